"""The plumbing around torch.utils.cpp_extension.load() that every chapter's loader needs: where
builds go, which ninja runs them, where CUDA's extra headers are, whether CUDA can be built.

Each load_chapterN.py (and chapter 5's load_jit.py) keeps only its own annotated load() call and
imports the rest from here. Identical copies live in chapters 1 to 5 and in tools/, so that each
chapter folder builds on its own; tests/test_repo.py fails if they differ. Lesson: chapter 1,
"Way 1: load()".
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def default_cuda_home() -> str | None:
    """CUDA_HOME, set to /usr/local/cuda when it is unset and holds bin/nvcc, as the Makefile does.

    Without it torch guesses the toolkit as the folder above the first nvcc on PATH, and a launcher
    script such as /usr/local/bin/nvcc makes that /usr/local: compiling works, linking fails with
    "cannot find -lcudart" (docs/troubleshooting.md). A command pasted from a lesson into a plain
    shell then builds what `make` builds. Runs at import; if a loader imported
    torch.utils.cpp_extension before this file, torch's own value is corrected too."""
    unset = "CUDA_HOME" not in os.environ and "CUDA_PATH" not in os.environ
    if unset and Path("/usr/local/cuda/bin/nvcc").exists():
        os.environ["CUDA_HOME"] = "/usr/local/cuda"
        if (imported := sys.modules.get("torch.utils.cpp_extension")) is not None:
            imported.CUDA_HOME = "/usr/local/cuda"
    # Only now, not at the top of this file: torch.utils.cpp_extension makes its guess as it is
    # imported and logs it without a GPU ("No CUDA runtime is found, using CUDA_HOME=..."), which
    # must name the folder the builds use. A loader imports this file before it for the same reason.
    import torch.utils.cpp_extension

    return torch.utils.cpp_extension.CUDA_HOME


CUDA_HOME = default_cuda_home()


def build_root() -> Path:
    """Where JIT builds go: $TORCH_EXTENSIONS_DIR, else build/torch_extensions in the repository.

    One subfolder per torch and Python version: a module compiled against one torch must never be
    loaded by another (that is the classic "undefined symbol" error), and torch's own cache key
    (sources and flags) does not include the torch version.
    """
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR", REPO / "build" / "torch_extensions"))
    v = sys.version_info
    return root / f"torch{torch.__version__}-py{v.major}{v.minor}".replace("+", "_")


def build_directory(name: str) -> Path:
    """build_root()/name, created. load() writes build.ninja, the objects and <name>.so there, and
    locks it while it builds, so that two processes building one module take turns."""
    directory = build_root() / name
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def put_ninja_on_path() -> None:
    """torch runs `ninja` from PATH. `pip install ninja` puts it next to the Python executable,
    which is on PATH only in an activated venv. Put it first, so `.venv/bin/python <script>` works
    too, and always with the same ninja: another version (say /usr/bin/ninja) finds the build log
    "too old" and recompiles everything."""
    python_bin = Path(sys.executable).parent
    if (python_bin / "ninja").exists() and shutil.which("ninja") != str(python_bin / "ninja"):
        os.environ["PATH"] = f"{python_bin}{os.pathsep}{os.environ.get('PATH', '')}"


def can_build_cuda() -> bool:
    """A CUDA build of torch and an nvcc to compile with; a GPU is not needed to compile. USE_CUDA=0
    says no, as it does to chapter 5's setup.py: `make tutorial` sets it on a machine without a
    GPU, where no demo runs CUDA code and compiling it would be most of the set-up time."""
    if os.environ.get("USE_CUDA") == "0":
        return False
    return torch.version.cuda is not None and CUDA_HOME is not None


def default_cuda_arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST, set to "9.0" (the course's GPU, the H100) when it is unset and no GPU
    is visible, as the Makefile does: torch asks the GPU which architecture to compile for and,
    with none to ask, fails with "IndexError: list index out of range". A command pasted from a
    lesson into a plain shell gets the same default as `make`. With a GPU, torch's own choice
    stands (the variable stays unset)."""
    if "TORCH_CUDA_ARCH_LIST" not in os.environ and not torch.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
    return os.environ.get("TORCH_CUDA_ARCH_LIST", "")


def cuda_include_paths() -> list[str]:
    """Where cusparse.h and cublas_v2.h are, if the toolkit in CUDA_HOME lacks them (an install
    with only nvcc): ATen/cuda/CUDAContext.h includes both, and torch's pip wheels bring them in
    site-packages/nvidia/cu13/include."""
    if CUDA_HOME is None or (Path(CUDA_HOME) / "include" / "cusparse.h").exists():
        return []
    try:
        import nvidia
    except ImportError:
        return []
    found = [Path(p) / "cu13" / "include" for p in nvidia.__path__]
    return [str(p) for p in found if (p / "cusparse.h").exists()][:1]


# The environment variables a setup.py build reads: a change to any of them must rebuild.
BUILD_ENV = ("USE_CUDA", "DEBUG", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CXX", "CC", "CPATH")


def build_fingerprint(folder: Path, env: dict) -> str:
    """What a setup.py build in `folder` depends on: setup.py, every file under csrc/, the built
    .so files, the environment variables in BUILD_ENV, the compilers that PATH finds, the torch
    and Python versions. Sizes and modification times stand for the files' contents, as they do
    for ninja and setuptools."""
    digest = hashlib.sha256(f"{sys.version} torch {torch.__version__}\n".encode())
    for key in BUILD_ENV:
        digest.update(f"{key}={env.get(key)}\n".encode())
    for tool in (env.get("CXX", "c++"), "nvcc"):
        digest.update(f"{tool}: {shutil.which(tool, path=env.get('PATH'))}\n".encode())
    files = [folder / "setup.py", *(folder / "csrc").rglob("*"), *folder.glob("*/_C*.so")]
    for path in sorted(p for p in files if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


NINJA_STEP = re.compile(r"^\[\d+/\d+\]")
NINJA_SOURCE = re.compile(r" -c (\S+\.(?:cpp|cu)) ")


def announce_inplace_build(folder: Path, env: dict) -> None:
    """Say what a build will compile before its minutes start, and why CUDA code is compiled on a
    machine that cannot run it."""
    cpp = len(list((folder / "csrc").glob("*.cpp")))
    cuda = len(list((folder / "csrc").rglob("*.cu")))
    with_cuda = env.get("USE_CUDA", "1" if can_build_cuda() else "0") == "1" and cuda > 0
    what = f"{cpp} C++" + (f" and {cuda} CUDA files" if with_cuda else " files")
    print(
        f"[{folder.name}] building {what} with setup.py: minutes on 2 cores the first time; "
        "later builds recompile only what changed",
        flush=True,
    )
    if with_cuda and not torch.cuda.is_available():
        print(
            f"[{folder.name}] no GPU here: the CUDA files are compiled all the same, so that they "
            "are checked and ready for a GPU (USE_CUDA=0 skips them)",
            flush=True,
        )


def build_inplace_with_setup_py(folder: Path, env: dict | None = None, verbose=False) -> str:
    """`python setup.py build_ext --inplace` in `folder`, unless nothing it depends on changed
    since the last build there; returns what it did, for the caller to print.

    Two builds at once (pytest -n 8, a second terminal) would write the same objects and the same
    .so together, and a process could load a half-written one: a file lock makes the second wait,
    and it then finds the first's work done. Even with nothing to compile, setup.py costs seconds
    (it imports torch, asks ninja, may relink), and every test process and script calls this
    before importing the package; build/inplace.stamp, written after each successful build,
    records build_fingerprint() so that an unchanged build costs a few file stats instead.
    """
    from filelock import FileLock  # installed with torch, which locks its own JIT builds with it

    # As under make, so that a plain shell builds alike: the Makefile's TORCH_CUDA_ARCH_LIST, and
    # the venv's ninja (another one finds the build log "too old" and recompiles everything).
    default_cuda_arch_list()
    put_ninja_on_path()
    env = {**os.environ, **(env or {})}
    env.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
    stamp = folder / "build" / "inplace.stamp"
    if stamp.exists() and stamp.read_text() == build_fingerprint(folder, env):
        return "up to date"
    start = time.perf_counter()
    stamp.parent.mkdir(exist_ok=True)
    with FileLock(folder / "build" / "build_inplace.lock"):
        if stamp.exists() and stamp.read_text() == build_fingerprint(folder, env):
            return "built by another process"
        announce_inplace_build(folder, env)
        process = subprocess.Popen(
            [sys.executable, "setup.py", "build_ext", "--inplace"],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        output = []
        for line in process.stdout:
            output.append(line)
            progress = NINJA_STEP.match(line)
            if verbose:
                print(line, end="", flush=True)
            elif progress:  # "[3/16] csrc/cuda/lstm.cu": ninja's count, and what it compiles
                source = NINJA_SOURCE.search(line)
                what = Path(source.group(1)).relative_to(folder) if source else "linking"
                print(f"[{folder.name}] {progress.group(0)} {what}", flush=True)
        if process.wait() != 0:
            raise RuntimeError(
                f"building failed (python setup.py build_ext --inplace in {folder}):\n"
                + "".join(output)[-8000:]
            )
        stamp.with_suffix(".tmp").write_text(build_fingerprint(folder, env))
        stamp.with_suffix(".tmp").replace(stamp)  # whole or absent: never half-written
    return f"built in {time.perf_counter() - start:.1f} s"
