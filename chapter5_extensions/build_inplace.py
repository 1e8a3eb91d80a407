"""Build custom_ops in this folder (setup.py build_ext --inplace) and make it importable: what the
tests, the notebook and the scripts here call before `import custom_ops`.

    python chapter5_extensions/build_inplace.py       # build (ninja recompiles only what changed)

A user installs the package instead (`pip install --no-build-isolation ./chapter5_extensions`);
building in place keeps the course's runs inside the repository and reuses the objects in
build/cuda or build/cpu between runs (a cold build takes several minutes on 2 cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock  # installed with torch, which locks its own JIT builds with it

HERE = Path(__file__).resolve().parent


def build_inplace(verbose: bool = False) -> None:
    """Run setup.py build_ext --inplace here; raise with the compiler's output if it fails."""
    start = time.perf_counter()
    # Two builds at once (pytest -n 8, a second terminal) would write the same objects and the
    # same .so together, and a process could load a half-written one. The second waits here for
    # the first, then finds everything up to date.
    (HERE / "build").mkdir(exist_ok=True)
    with FileLock(HERE / "build" / "build_inplace.lock"):
        result = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace"],
            cwd=HERE,
            env={**os.environ, "MAX_JOBS": os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))},
            capture_output=not verbose,
            text=True,
        )
    if result.returncode != 0:
        raise RuntimeError(
            "building custom_ops failed (python setup.py build_ext --inplace in "
            f"{HERE}):\n{(result.stdout or '')[-4000:]}\n{(result.stderr or '')[-4000:]}"
        )
    print(f"[chapter 5] custom_ops built in place in {time.perf_counter() - start:.1f} s")
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))


if __name__ == "__main__":
    build_inplace(verbose=True)
    import custom_ops

    print("built with CUDA:", custom_ops.built_with_cuda())
    print("ops:", ", ".join(name for name in custom_ops.__all__ if name.islower()))
