"""Run every chapter's notebook here and write the executed copy that the course website shows.

    .venv/bin/python tools/execute_notebooks.py                                      # all chapters
    .venv/bin/python tools/execute_notebooks.py chapter3_cuda_kernels/chapter3.ipynb   # only some

Each notebook runs top to bottom with nbclient, in its chapter's folder and with the environment
`make test` gives it (builds in build/torch_extensions, the CUDA settings for a machine without a
GPU), one notebook at a time. The copy goes to docs/notebooks/<name>.ipynb with each cell's timing
and, in the notebook's metadata "executed", where it ran: CPU, cores, GPU, date, torch, commit.
Paths of this machine in the outputs become <repo>/... and ~/...; ANSI colours and widget state
are dropped. tests/test_executed_notebooks.py fails when a notebook changes until its copy is
refreshed; tools/notebook_outputs.py turns a copy's outputs into the website's Markdown.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "notebooks"
sys.path.insert(0, str(REPO / "tools"))

from notebook_outputs import run_time  # noqa: E402

# What an output keeps: text and images. Widgets, HTML and JavaScript would only make the copy
# large; the website shows text and images.
KEPT_TYPES = ("text/plain", "image/png", "image/jpeg", "image/svg+xml")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Temporary folders named for a user (pytest's, Inductor's), as tests/test_repo.py finds them.
USER_TMP = re.compile(r"/tmp/(pytest-of-|torchinductor_)[\w.-]+/")
# torch's warning on a machine without a GPU, on every first import of cpp_extension: explained on
# the troubleshooting page ("No CUDA toolkit"), and with its timestamp and process id only noise
# under a notebook's first cell.
NO_CUDA_RUNTIME = re.compile(
    r"^W\d{4} [\d:.]+ +\d+ torch/utils/cpp_extension\.py:\d+\] No CUDA runtime is found.*\n?", re.M
)
# A copy larger than this is probably a plot at too high a resolution.
MAX_BYTES = 500_000


def chapter_notebooks() -> list[Path]:
    """Every chapter's notebook: chapterN_topic/*.ipynb, in chapter order."""
    return sorted(REPO.glob("chapter*_*/*.ipynb"))


def copy_of(notebook: Path) -> Path:
    """Where a notebook's executed copy goes: docs/notebooks/<its name>."""
    return OUT / notebook.name


def refresh_command(notebook: Path) -> str:
    """The command that rewrites one notebook's executed copy, run from the repository root."""
    return f".venv/bin/python tools/execute_notebooks.py {notebook.relative_to(REPO)}"


def set_make_test_environment() -> None:
    """The variables `make test` exports (see the Makefile), set here for the kernels this process
    starts: the venv's ninja first on PATH, JIT builds in build/torch_extensions, CUDA_HOME,
    TORCH_CUDA_ARCH_LIST=9.0 and TRITON_INTERPRET=1 without a GPU, CPATH with the cuBLAS/cuSPARSE
    headers of torch's wheels when the toolkit lacks them, and torch's threads: every core, as
    under `make test PYTEST_WORKERS=0`, since the notebooks run one at a time. A variable already
    set stays, as under make."""
    env = os.environ
    venv_bin = REPO / ".venv" / "bin"
    if venv_bin.is_dir():
        env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TORCH_EXTENSIONS_DIR", str(REPO / "build" / "torch_extensions"))
    if "CUDA_HOME" not in env and Path("/usr/local/cuda/bin/nvcc").exists():
        env["CUDA_HOME"] = "/usr/local/cuda"
    if not gpu_names():
        env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
        env.setdefault("TRITON_INTERPRET", "1")
    cuda_home = env.get("CUDA_HOME", "")
    headers = sorted(REPO.glob(".venv/lib/python3*/site-packages/nvidia/cu13/include"))
    if headers and not (Path(cuda_home) / "include" / "cusparse.h").exists():
        env["CPATH"] = os.pathsep.join(filter(None, [str(headers[0]), env.get("CPATH")]))
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def gpu_names() -> list[str]:
    """The GPUs nvidia-smi lists (as the Makefile asks), by name; [] on a machine without one."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return re.findall(r"^GPU \d+: (.+?)(?: \(UUID.*)?$", listed.stdout, re.M)


def machine() -> str:
    """This machine in a few words: "AMD EPYC CPU (2 cores), no GPU"."""
    cpu = "unknown"
    try:
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = found.group(1).strip() if found else cpu
    except OSError:
        import platform

        cpu = platform.processor() or cpu
    gpus = gpu_names()
    gpu = "no GPU" if not gpus else f"{len(gpus)}x {gpus[0]}" if len(gpus) > 1 else gpus[0]
    return f"{cpu} CPU ({os.cpu_count()} cores), {gpu}"


def commit_of(notebook: Path) -> str:
    """HEAD's short hash, with "+changes" if the notebook differs from HEAD's (or is untracked)."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "unknown"
    name = str(notebook.relative_to(REPO))
    tracked = git("ls-files", "--error-unmatch", "--", name).returncode == 0
    changed = not tracked or git("diff", "--quiet", "HEAD", "--", name).returncode != 0
    return head.stdout.strip() + ("+changes" if changed else "")


def without_machine_paths(text: str) -> str:
    """`text` with this checkout's path as <repo>, the home folder as ~ and a user's temporary
    folder as /tmp/<prefix><user>/: what tests/test_repo.py forbids in a tracked file."""
    for path in dict.fromkeys([str(REPO.resolve()), str(REPO)]):
        text = re.sub(re.escape(path) + r"(?![\w.-])", "<repo>", text)
    home = str(Path.home())
    if home != "/":
        text = re.sub(re.escape(home) + r"(?![\w.-])", "~", text)
    return USER_TMP.sub(r"/tmp/\1<user>/", text)


def clean_text(value: str | list[str]) -> str:
    """An output's text without ANSI colour codes or machine paths."""
    text = value if isinstance(value, str) else "".join(value)
    return without_machine_paths(ANSI.sub("", text))


def clean_outputs(outputs: list[dict]) -> list[dict]:
    """The outputs worth keeping, cleaned: stream text, errors (with a plain traceback), and the
    text and image parts of results and displays; an output with nothing left is dropped."""
    kept = []
    for output in outputs:
        kind = output["output_type"]
        if kind == "stream":
            output["text"] = NO_CUDA_RUNTIME.sub("", clean_text(output["text"]))
            if not output["text"]:
                continue
        elif kind == "error":
            output["ename"] = clean_text(output["ename"])
            output["evalue"] = clean_text(output["evalue"])
            output["traceback"] = [clean_text(line) for line in output["traceback"]]
        else:
            data = {k: v for k, v in output.get("data", {}).items() if k in KEPT_TYPES}
            if not data:
                continue
            for key in ("text/plain", "image/svg+xml"):
                if key in data:
                    data[key] = clean_text(data[key])
            output["data"] = data
            output["metadata"] = {
                k: v for k, v in output.get("metadata", {}).items() if k in KEPT_TYPES
            }
        kept.append(output)
    return kept


def execute(notebook: Path, timeout: int) -> tuple[Path, float]:
    """Run `notebook` in its folder and write its cleaned copy; returns the copy and the seconds
    the whole run took (the kernel's start included). Raises nbclient's CellExecutionError, naming
    the cell, if a cell fails that is not tagged raises-exception."""
    import nbformat
    import torch
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebook.parent)}},
        record_timing=True,
        coalesce_streams=True,
    )
    start = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - start
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = clean_outputs(cell.outputs)
    nb.metadata.pop("widgets", None)
    nb.metadata["executed"] = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "commit": commit_of(notebook),
        "threads": int(os.environ["OMP_NUM_THREADS"]),
        "seconds": round(sum(run_time(cell) or 0.0 for cell in nb.cells), 1),
        "command": refresh_command(notebook),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, copy_of(notebook))
    return copy_of(notebook), wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="notebooks to run (default: every chapter's)"
    )
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds a cell may take (nbmake's, make test)"
    )
    args = parser.parse_args(argv)
    notebooks = [p.resolve() for p in args.notebooks] or chapter_notebooks()
    unknown = [p for p in notebooks if p not in chapter_notebooks()]
    if unknown:
        parser.error(f"not a chapter's notebook: {', '.join(map(str, unknown))}")
    set_make_test_environment()
    failed = []
    for notebook in notebooks:
        name = notebook.relative_to(REPO)
        print(f"{name}: running (a build that is not cached compiles first)", flush=True)
        try:
            copy, wall = execute(notebook, args.timeout)
        except Exception as error:  # a failing cell: say which, go on with the next notebook
            failed.append(str(name))
            print(f"{name}: FAILED\n{without_machine_paths(str(error))[-4000:]}", flush=True)
            continue
        size = copy.stat().st_size
        print(
            f"{name}: ran in {wall:.1f} s -> {copy.relative_to(REPO)} ({size / 1000:.0f} kB)"
            + (f" over {MAX_BYTES // 1000} kB: make its plots smaller" if size > MAX_BYTES else ""),
            flush=True,
        )
    if failed:
        print(f"failed, copies not written: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
