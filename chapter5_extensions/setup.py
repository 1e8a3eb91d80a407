"""Build the custom_ops package: C++ sources in csrc/, CUDA sources in csrc/cuda/, one .so.

    pip install --no-build-isolation ./chapter5_extensions       # install (or -e for editable)
    pip wheel --no-build-isolation --no-deps ./chapter5_extensions -w dist
    cd chapter5_extensions && python setup.py build_ext --inplace   # what the tests do

Switches (environment variables):
    USE_CUDA=0|1          default 1 when torch is a CUDA build and nvcc is found (CUDA_HOME)
    DEBUG=1               -g -O0 (and -lineinfo for nvcc) instead of -O3
    TORCH_CUDA_ARCH_LIST  the GPU architectures to compile for; default: the GPU of this machine,
                          or 9.0+PTX (H100, and PTX that newer GPUs can compile) if it has none
    MAX_JOBS              parallel compile jobs (ninja); each nvcc job can take a few GB of RAM

--no-build-isolation builds against the torch already installed. Without it pip would install
a fresh torch into a temporary environment to build with, and the .so must match the torch that
will load it exactly (chapter 1: ABI).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

HERE = Path(__file__).resolve().parent


def use_cuda() -> bool:
    if "USE_CUDA" in os.environ:
        return os.environ["USE_CUDA"] == "1"
    return torch.version.cuda is not None and CUDA_HOME is not None


def cuda_include_dirs() -> list[str]:
    """cusparse.h and cublas_v2.h, which ATen/cuda/CUDAContext.h includes, from torch's pip
    wheels when the toolkit in CUDA_HOME lacks them (an install with only nvcc)."""
    if CUDA_HOME is None or (Path(CUDA_HOME) / "include" / "cusparse.h").exists():
        return []
    try:
        import nvidia
    except ImportError:
        return []
    found = [Path(p) / "cu13" / "include" for p in nvidia.__path__]
    return [str(p) for p in found if (p / "cusparse.h").exists()][:1]


def extension():
    debug = os.environ.get("DEBUG", "0") == "1"
    with_cuda = use_cuda()
    sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc").glob("*.cpp"))
    # -fopenmp: the CPU kernels' at::parallel_for runs on one thread without it (chapter 2).
    # -g0: Python's own compile flags, which setuptools puts first, include -g; debug information
    # for torch's templates makes each object several times larger and slower to build.
    args = {"cxx": (["-O0", "-g"] if debug else ["-O3", "-g0"]) + ["-fopenmp"]}
    # Headers are not sources: listed here, a change to one rebuilds the extension (setuptools
    # compares times with the .so) instead of leaving a stale build.
    depends = sorted(
        str(p.relative_to(HERE)) for ext in ("*.h", "*.cuh") for p in (HERE / "csrc").rglob(ext)
    )
    if not with_cuda:
        cpu_only = CppExtension(
            "custom_ops._C",
            sources,
            depends=depends,
            extra_compile_args=args,
            extra_link_args=["-fopenmp"],
            include_dirs=cuda_include_dirs(),
            py_limited_api=True,  # see below
        )
        # The C++ files get the CUDA variant's include folders too (which they do not use): then
        # their compile commands are the same in both variants, and ninja, which keeps both
        # variants' objects in one folder (below), compiles them once for both.
        if CUDA_HOME is not None:
            cpu_only.include_dirs.append(os.path.join(CUDA_HOME, "include"))
        return cpu_only
    if "TORCH_CUDA_ARCH_LIST" not in os.environ and not torch.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0+PTX"
    sources += sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc" / "cuda").glob("*.cu"))
    args["nvcc"] = ["-O0", "-g", "-lineinfo"] if debug else ["-O3"]
    return CUDAExtension(
        "custom_ops._C",
        sources,
        depends=depends,
        extra_compile_args=args,
        extra_link_args=["-fopenmp"],
        include_dirs=cuda_include_dirs(),
        # The .so uses only the stable Python ABI (no pybind11; torch adds -DPy_LIMITED_API), so
        # one wheel serves every Python from 3.10 on. Its torch must still match exactly.
        py_limited_api=True,
    )


setup(
    packages=find_packages(include=["custom_ops"]),
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension},
    # CPU-only and CUDA builds link their .so apart (build/cpu, build/cuda), from objects in one
    # folder: the C++ files are compiled with the same command in both (no C++ file depends on
    # USE_CUDA), so `make tutorial`'s CPU-only build compiles them for `make test`'s CUDA build
    # too, and ninja, which tracks each object's command, rebuilds only what changed.
    options={
        "build": {"build_base": str(HERE / "build" / ("cuda" if use_cuda() else "cpu"))},
        "build_ext": {"build_temp": str(HERE / "build" / "objects")},
        "bdist_wheel": {"py_limited_api": "cp310"},
    },
)
