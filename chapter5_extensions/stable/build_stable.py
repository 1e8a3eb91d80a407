"""Build custom_ops_stable in this folder (setup.py build_ext --inplace) and make it importable:
what test_stable.py and benchmark_stable.py call before `import custom_ops_stable`.

    python chapter5_extensions/stable/build_stable.py           # build (ninja: only what changed)
    USE_CUDA=0 python chapter5_extensions/stable/build_stable.py   # CPU only

A user installs the package instead (`pip install --no-build-isolation ./chapter5_extensions/stable`).
The plumbing (lock, stamp) is chapter 5's build_utils.build_inplace_with_setup_py.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent):  # this package; chapter 5's build_utils
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import build_utils  # noqa: E402


def build_stable(verbose: bool = False, use_cuda: bool | None = None) -> None:
    """Build custom_ops_stable here (USE_CUDA=0/1 when `use_cuda` is given) if anything it
    depends on changed; raise with the compiler's output if the build fails."""
    env = {} if use_cuda is None else {"USE_CUDA": "1" if use_cuda else "0"}
    done = build_utils.build_inplace_with_setup_py(HERE, env, verbose=verbose)
    print(f"[chapter 5] custom_ops_stable: {done}")


if __name__ == "__main__":
    build_stable(verbose=True)
    import custom_ops_stable

    print("built with CUDA:", custom_ops_stable.built_with_cuda())
