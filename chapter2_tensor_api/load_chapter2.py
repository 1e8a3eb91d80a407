"""Build chapter 2's extension just in time and load it (how, and every argument: chapter 1).

    python chapter2_tensor_api/load_chapter2.py     # build (or reuse), then print the ops

One module, `chapter2`, from four source files: ninja compiles them in parallel and recompiles
only the file you edit. The tests, the notebook and the benchmark all load it through here.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

# build_utils first: it sets CUDA_HOME, which torch.utils.cpp_extension reads on import.
from build_utils import build_directory, put_ninja_on_path

# isort: split
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent
SOURCES = ["bindings.cpp", "fused_bias_relu.cpp", "lstm_cell.cpp", "dispatch_and_layout.cpp"]


_module: ModuleType | None = None


def load_chapter2(verbose: bool = False) -> ModuleType:
    """The `chapter2` module: fused_bias_relu_v1/v2/v3, lstm_cell_forward, matmul_loop, ..."""
    global _module
    if _module is None:
        put_ninja_on_path()  # always the venv's ninja (chapter 1)
        print("[chapter 2] loading 'chapter2' (first build ~40 s on 2 cores, cached after)")
        start = time.perf_counter()
        _module = load(
            name="chapter2",
            sources=[str(HERE / s) for s in SOURCES],
            # -O3: torch adds no optimisation flag to JIT builds. -fopenmp: at::parallel_for is a
            # template whose OpenMP pragmas compile into this module, and without the flag they
            # are ignored: v3 would run on one thread (lesson, v3). torch has loaded its own
            # libgomp already, so the module shares torch's OpenMP runtime and thread count.
            extra_cflags=["-O3", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
            build_directory=str(build_directory("chapter2")),
            verbose=verbose,
        )
        print(f"[chapter 2] ready in {time.perf_counter() - start:.1f} s: {_module.__file__}")
    return _module


if __name__ == "__main__":
    module = load_chapter2()
    print("ops:", ", ".join(name for name in dir(module) if not name.startswith("_")))
