"""The stable ABI's promise, tested: build custom_ops_stable's wheel once against the torch of this
environment (2.11), install that same file next to a newer torch in a second venv, and run
test_stable.py's CPU tests there against the installed wheel.

    python chapter5_extensions/stable/check_wheel.py            # what `make stable-check` runs
    NEWER_TORCH="torch==2.13.0+cpu" python chapter5_extensions/stable/check_wheel.py
    python chapter5_extensions/stable/check_wheel.py --matrix torch==2.12.1 torch==2.14.1 \
        --record docs/perf/cpu/check_wheel_matrix.txt     # what `make stable-matrix` runs

The wheel is CPU-only (USE_CUDA=0): the newer torch here is the small CPU build, and a CUDA build
of the wheel links libtorch_cuda and the CUDA runtime, which a CPU torch does not have (README).
The venv is kept in build/ and reused; only the wheel is rebuilt. Exit codes: 0 the tests
passed there, 1 they failed, 3 the second venv could not be made (no network, no index).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from filelock import FileLock  # installed with torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
NEWER_TORCH = os.environ.get("NEWER_TORCH", "torch==2.13.0+cpu")
# Where the +cpu builds live; pip also looks in its configured indexes and find-links.
TORCH_INDEX = os.environ.get("NEWER_TORCH_INDEX", "https://download.pytorch.org/whl/cpu")
VENV = HERE / "build" / f"venv-{NEWER_TORCH.replace('==', '-').replace('+', '-')}"


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(str(c) for c in command), flush=True)
    return subprocess.run(command, text=True, **kwargs)


def build_wheel(out: Path) -> Path:
    """pip wheel --no-build-isolation against this environment's torch, CPU only. Under the lock
    of build_stable.py's in-place builds (build_utils.build_inplace_with_setup_py): both can
    compile into build/cpu."""
    with FileLock(HERE / "build" / "build_inplace.lock"):
        return _build_wheel(out)


def _build_wheel(out: Path) -> Path:
    start = time.perf_counter()
    env = {**os.environ, "USE_CUDA": "0", "MAX_JOBS": os.environ.get("MAX_JOBS", "2")}
    result = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-q",
            str(HERE),
            "-w",
            str(out),
        ],
        env=env,
        capture_output=True,
    )
    if result.returncode != 0:
        print(result.stdout[-3000:], result.stderr[-3000:])
        raise SystemExit(1)
    (wheel,) = out.glob("custom_ops_stable-*.whl")
    print(f"built {wheel.name} in {time.perf_counter() - start:.1f} s")
    return wheel


def index_reachable(url: str) -> bool:
    """Whether `url` answers within 5 s. pip retries an index that does not answer for minutes,
    package by package; an unreachable one is left out (pip's own configuration still applies)."""
    import urllib.request

    try:
        urllib.request.urlopen(url, timeout=5).close()
    except OSError:
        return False
    return True


def make_venv() -> Path:
    """The second venv with the newer torch, numpy and pytest; reused when it is already there."""
    python = VENV / "bin" / "python"
    if (VENV / ".ready").exists():
        return python
    start = time.perf_counter()
    shutil.rmtree(VENV, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(VENV)], check=True)
    index = ["--extra-index-url", TORCH_INDEX] if index_reachable(TORCH_INDEX) else []
    # Bounded: on a machine whose network drops packets (a GPU box with no way out) pip's default
    # of 5 retries at 15 s each, for every file, held a test for minutes before it could skip.
    bounded = ["--retries", "1", "--timeout", "20"]
    # --no-compile: pip would byte-compile all of torch's 6,000 .py files (15 s of CPU on 2
    # cores); the tests import a few hundred, compiled as they load.
    result = run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            *bounded,
            *index,
            NEWER_TORCH,
            "numpy",
            "pytest",
        ],
        capture_output=True,
    )
    if result.returncode != 0:
        print(f"could not install {NEWER_TORCH}: {result.stderr.strip()[-1500:]}")
        raise SystemExit(3)
    (VENV / ".ready").touch()
    print(f"venv with {NEWER_TORCH} made in {time.perf_counter() - start:.1f} s")
    return python


def main() -> int:
    # Two runs at once (two pytest sessions in one checkout, pytest -n) would make the same venv
    # together and break it: the second waits, then reuses the first one's venv.
    (HERE / "build").mkdir(exist_ok=True)
    with FileLock(HERE / "build" / "check_wheel.lock"):
        return check()


def check() -> int:
    print(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}, {platform.machine()}")
    import torch

    print(f"build: torch {torch.__version__}, python {platform.python_version()}")
    python = make_venv()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp) / "dist")
        run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--force-reinstall",
                str(wheel),
            ],
            check=True,
        )
        # The tests run from a folder of their own, so that `import custom_ops_stable` finds the
        # installed wheel, not the source folder beside test_stable.py.
        tests = Path(tmp) / "tests"
        tests.mkdir()
        for name in ["test_stable.py", "abi_audit.py"]:
            shutil.copy(HERE / name, tests / name)
        # The course's fixtures (device, generator) and pytest settings (the cuda marker).
        shutil.copy(REPO / "conftest.py", tests / "conftest.py")
        shutil.copy(REPO / "pyproject.toml", tests / "pyproject.toml")
        versions = (
            "import torch, custom_ops_stable, platform; "
            "print(f'run: torch {torch.__version__}, python {platform.python_version()}, '"
            "f'custom_ops_stable from {custom_ops_stable.__file__}')"
        )
        env = {**os.environ, "CUSTOM_OPS_STABLE_INSTALLED": "1"}
        run([str(python), "-c", versions], cwd=tests, env=env, check=True)
        result = run(
            [str(python), "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_stable.py"],
            cwd=tests,
            env=env,
        )
    return 0 if result.returncode == 0 else 1


def pip_constraints(package: str) -> list[str]:
    """The lines about `package` in the constraints file pip is configured with, if any: a machine
    may cap the versions it offers (`pip config list` shows it)."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    files = re.findall(r"constraint='([^']+)'", listed)
    return [
        f"{line.strip()} ({path})"
        for path in files
        if Path(path).is_file()
        for line in Path(path).read_text().splitlines()
        if re.match(rf"{package}\s*[<>=!~]", line.strip())
    ]


def matrix(versions: list[str], record: Path | None) -> int:
    """check() once per torch version, each in a process of its own (NEWER_TORCH), and one line a
    version: its pytest summary, or why it could not run. Exit 0 only if every version passed."""
    lines = [
        f"# custom_ops_stable's wheel, built once against this environment's torch, on each torch "
        f"below ({datetime.datetime.now(datetime.UTC):%Y-%m-%d}, {platform.machine()}, "
        f"python {platform.python_version()}; chapter5_extensions/stable/check_wheel.py --matrix)"
    ]
    failed = False
    for version in versions:
        result = subprocess.run(
            [sys.executable, __file__],
            env={**os.environ, "NEWER_TORCH": version},
            capture_output=True,
            text=True,
        )
        out = result.stdout + result.stderr
        ran = re.search(r"^run: (torch [^,\s]+)", out, flags=re.M)
        summary = re.findall(r"^=*\s*(\d+ passed.*?)\s*=*$", out, flags=re.M)
        if result.returncode == 3:
            # pip's reasons: a version no index has, or a constraint that excludes it.
            why = [
                line.strip().removeprefix("ERROR: ")
                for line in out.splitlines()
                if re.search(
                    r"Cannot install|No matching distribution|Could not find a version", line
                )
            ]
            why += [f"pip's configured constraint: {c}" for c in pip_constraints("torch")]
            reason = "; ".join(dict.fromkeys(why)) or "pip could not make the venv"
            lines.append(f"{version}: not installed here: {reason[:300]}")
        else:
            state = "passed" if result.returncode == 0 else "FAILED"
            lines.append(
                f"{version}: {state}: {ran[1] if ran else '?'}, "
                f"{summary[-1] if summary else 'no pytest summary'}"
            )
        failed |= result.returncode != 0
        print(lines[-1], flush=True)
    if record:
        record.write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", nargs="+", metavar="TORCH", help="one check per version")
    parser.add_argument("--record", type=Path, help="with --matrix: write its lines here")
    args = parser.parse_args()
    sys.exit(matrix(args.matrix, args.record) if args.matrix else main())
