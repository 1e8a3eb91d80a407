"""Build chapter 4's extension just in time and load it: C++ and CUDA in one module.

    python chapter4_autograd/load_chapter4.py     # build (or reuse), then print the ops

The `.cpp` files are compiled by the host compiler, the `.cu` files by nvcc, and the objects linked
into one module, `chapter4` (how, and why TORCH_CUDA_ARCH_LIST must be set on a machine without
a GPU: chapter 3). With no nvcc, or a CPU-only torch, only the `.cpp` files are built and every
op runs on the CPU (the module's `built_with_cuda` says which).
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

# build_utils first: it sets CUDA_HOME, which torch.utils.cpp_extension reads on import.
from build_utils import (
    build_directory,
    can_build_cuda,
    cuda_include_paths,
    default_cuda_arch_list,
    put_ninja_on_path,
)

# isort: split
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent
CPP_SOURCES = ["ops.cpp", "lstm_cell.cpp", "autograd_cpp.cpp"]
CUDA_SOURCES = ["fused_bias_relu.cu", "lstm_cell.cu"]


_module: ModuleType | None = None


def load_chapter4(verbose: bool = False) -> ModuleType:
    """The `chapter4` module: relu_*, fused_bias_relu_*, lstm_cell_*, built_with_cuda."""
    global _module
    if _module is None:
        put_ninja_on_path()  # always the venv's ninja (chapter 1)
        with_cuda = can_build_cuda()
        if with_cuda:
            default_cuda_arch_list()  # 9.0 without a GPU, as the Makefile sets it
        name = "chapter4" if with_cuda else "chapter4_cpu_only"
        sources = CPP_SOURCES + (CUDA_SOURCES if with_cuda else [])
        first_build = "~2 minutes, nvcc included" if with_cuda else "under a minute"
        print(f"[chapter 4] loading '{name}' (first build {first_build} on 2 cores, cached after)")
        start = time.perf_counter()
        _module = load(
            name=name,
            sources=[str(HERE / s) for s in sources],
            # -fopenmp: the CPU paths' at::parallel_for runs on one thread without it (chapter 2).
            extra_cflags=["-O3", "-fopenmp"] + (["-DWITH_CUDA"] if with_cuda else []),
            extra_ldflags=["-fopenmp"],
            # -O3 is nvcc's default for device code already; -lineinfo maps SASS back to source
            # lines in Nsight Compute at no cost in speed. No --use_fast_math: it would change
            # results (and denormals) behind the tests' backs.
            extra_cuda_cflags=["-O3", "-lineinfo", "-DWITH_CUDA"],
            extra_include_paths=cuda_include_paths() if with_cuda else [],
            build_directory=str(build_directory(name)),
            # with_cuda=False keeps a CPU-only build from linking the CUDA runtime.
            with_cuda=with_cuda,
            verbose=verbose,
        )
        print(f"[chapter 4] ready in {time.perf_counter() - start:.1f} s: {_module.__file__}")
    return _module


if __name__ == "__main__":
    module = load_chapter4()
    print("built with CUDA:", module.built_with_cuda)
    print(
        "ops:",
        ", ".join(n for n in dir(module) if not n.startswith("_") and n != "built_with_cuda"),
    )
