"""Build custom_ops_stable in this folder (setup.py build_ext --inplace) and make it importable:
what test_stable.py and benchmark_stable.py call before `import custom_ops_stable`.

    python chapter5_extensions/stable/build_stable.py           # build (ninja: only what changed)
    USE_CUDA=0 python chapter5_extensions/stable/build_stable.py   # CPU only

A user installs the package instead (`pip install --no-build-isolation ./chapter5_extensions/stable`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock  # installed with torch

HERE = Path(__file__).resolve().parent


def build_stable(verbose: bool = False, use_cuda: bool | None = None) -> None:
    """Run setup.py build_ext --inplace here (USE_CUDA=0/1 when `use_cuda` is given); raise with
    the compiler's output if it fails."""
    start = time.perf_counter()
    env = {**os.environ, "MAX_JOBS": os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))}
    if use_cuda is not None:
        env["USE_CUDA"] = "1" if use_cuda else "0"
    (HERE / "build").mkdir(exist_ok=True)
    with FileLock(HERE / "build" / "build_stable.lock"):  # two builds at once wait in turn
        result = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace"],
            cwd=HERE,
            env=env,
            capture_output=not verbose,
            text=True,
        )
    if result.returncode != 0:
        raise RuntimeError(
            f"building custom_ops_stable failed (python setup.py build_ext --inplace in {HERE}):\n"
            f"{(result.stdout or '')[-4000:]}\n{(result.stderr or '')[-4000:]}"
        )
    print(f"[chapter 5] custom_ops_stable built in place in {time.perf_counter() - start:.1f} s")
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))


if __name__ == "__main__":
    build_stable(verbose=True)
    import custom_ops_stable

    print("built with CUDA:", custom_ops_stable.built_with_cuda())
