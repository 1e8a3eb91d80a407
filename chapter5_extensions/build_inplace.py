"""Build custom_ops in this folder (setup.py build_ext --inplace) and make it importable: what the
tests, the notebook and the scripts here call before `import custom_ops`.

    python chapter5_extensions/build_inplace.py       # build (ninja recompiles only what changed)

A user installs the package instead (`pip install --no-build-isolation ./chapter5_extensions`);
building in place keeps the course's runs inside the repository and reuses the objects in
build/objects between runs (a cold build takes several minutes on 2 cores). The
plumbing (a lock against two builds at once, a stamp that skips setup.py when nothing changed)
is build_utils.build_inplace_with_setup_py.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import build_utils  # noqa: E402


def build_inplace(verbose: bool = False) -> None:
    """Build custom_ops here if anything it depends on changed; raise with the compiler's output
    if the build fails."""
    print(
        f"[chapter 5] custom_ops: {build_utils.build_inplace_with_setup_py(HERE, verbose=verbose)}"
    )


if __name__ == "__main__":
    build_inplace(verbose=True)
    import custom_ops

    print("built with CUDA:", custom_ops.built_with_cuda())
    print("ops:", ", ".join(name for name in custom_ops.__all__ if name.islower()))
