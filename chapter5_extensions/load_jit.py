"""Build custom_ops just in time with torch.utils.cpp_extension.load(), from the same sources and
flags as setup.py, and register its operators: chapter 1's way, for trying an edited kernel
without reinstalling the package. Every argument is explained below, as in chapter 1's loader.

    python chapter5_extensions/load_jit.py     # build (or reuse), then call torch.ops.custom_ops.relu
    import load_jit; load_jit.load_custom_ops()  # in a script or notebook in this folder

Lesson: chapter 5, further/build_switches.md, "Just in time".
"""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path

# build_utils first: it sets CUDA_HOME, which torch.utils.cpp_extension reads on import.
from build_utils import build_directory, can_build_cuda, cuda_include_paths, put_ninja_on_path

# isort: split
import torch
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent

# setup.py's sources: every csrc/*.cpp, and csrc/cuda/*.cu for a CUDA build. Headers are not
# listed: load() hashes the sources and flags only, but ninja, which runs the build, rebuilds an
# object whenever a header it included changed (it records them with -MD), so no `depends` here.
CPP_SOURCES = sorted((HERE / "csrc").glob("*.cpp"))
CUDA_SOURCES = sorted((HERE / "csrc" / "cuda").glob("*.cu"))

_registered_by: str | None = None


def load_custom_ops(verbose: bool = False) -> str:
    """Register the custom_ops operators in this process, then import the custom_ops package
    (fake kernels, autograd, modules) on top of them. Returns the file that registered them.

    One library, one registration. TORCH_LIBRARY(custom_ops, m) in csrc/ops.cpp runs when a .so
    is loaded, and PyTorch refuses a second TORCH_LIBRARY for a namespace that exists: loading
    this JIT build *and* the package's own build (custom_ops/_C*.so, from pip or build_inplace.py)
    into one process kills it: "Only a single TORCH_LIBRARY can be used to register the namespace
    custom_ops" is a C++ exception thrown while the second .so loads, which ends in
    std::terminate, with no Python exception to catch. So: if the package's build is
    already loaded, this function uses it and builds nothing; if not, it loads the JIT build and
    puts a stand-in for custom_ops._C in sys.modules, so that `import custom_ops`, here or later,
    finds the library registered and never loads the second .so.
    """
    global _registered_by
    if _registered_by is not None:
        return _registered_by
    package_build = sys.modules.get("custom_ops._C")
    if package_build is not None:
        _registered_by = str(package_build.__file__)
        print(
            f"[chapter 5] custom_ops is already registered by {_registered_by}; not loading a JIT build"
        )
        return _registered_by
    if hasattr(torch.ops.custom_ops, "relu"):
        raise RuntimeError(
            "load_jit: the custom_ops library is already registered in this process by a library "
            f"loaded some other way (torch.ops.loaded_libraries: {sorted(torch.ops.loaded_libraries)}); "
            "a second registration would fail. Use that one, or start a new process."
        )
    put_ninja_on_path()  # always this venv's ninja (chapter 1, build_utils.py)
    # CUDA only where a GPU will run it. A CUDA build of all of chapter 5 is many minutes of nvcc
    # on a 2-core machine without a GPU (CI), and build_inplace.py already compiles the same .cu
    # files there; a CPU-only JIT build still proves this loader. On a GPU machine: both halves.
    with_cuda = can_build_cuda() and torch.cuda.is_available()
    name = "custom_ops_jit" if with_cuda else "custom_ops_jit_cpu"
    print(f"[chapter 5] loading '{name}' (first build: minutes on 2 cores, cached after)")
    start = time.perf_counter()
    path = load(
        # Names the .so and its build folder. There is no PYBIND11_MODULE to match: csrc/ops.cpp
        # defines its own empty PyInit__C, and the operators register in static initializers.
        name=name,
        sources=[str(p) for p in CPP_SOURCES + (CUDA_SOURCES if with_cuda else [])],
        # setup.py's cxx flags. -O3: torch adds no -O to JIT builds (chapter 1). -fopenmp: the CPU
        # kernels' at::parallel_for runs on one thread without it (chapter 2).
        extra_cflags=["-O3", "-fopenmp"],
        # setup.py's nvcc flags. -O3 is nvcc's default for device code already.
        #
        # No --use_fast_math. It swaps float expf, sinf, division and sqrt for approximate
        # hardware versions (__expf, ...) and flushes denormals to zero (-ftz=true): the LSTM's
        # sigmoid, 1 / (1 + exp(-v)), would be computed approximately and compared with torch's to
        # tolerances chosen for exact math, results would depend on a flag nobody sees in the
        # code, and these kernels, limited by memory, would gain nothing from it.
        #
        # No -arch=sm_XX either. torch turns TORCH_CUDA_ARCH_LIST into nvcc's -gencode flags:
        # "9.0" gives -gencode=arch=compute_90,code=sm_90 (machine code for the H100), "9.0+PTX"
        # adds code=compute_90 (PTX, which the driver compiles for newer GPUs at load time); unset,
        # torch asks the GPUs it sees. `-arch=sm_90` is nvcc's shorthand for the "9.0+PTX" pair,
        # and torch gives way to it: any flag here containing "arch" makes torch drop its own
        # -gencode flags and ignore TORCH_CUDA_ARCH_LIST. Set the list (the Makefile does, to 9.0,
        # on a machine without a GPU) and keep architectures out of the code.
        extra_cuda_cflags=["-O3"],
        # setup.py's extra_link_args: OpenMP's runtime.
        extra_ldflags=["-fopenmp"],
        # cusparse.h and cublas_v2.h from torch's wheels if CUDA_HOME lacks them (build_utils.py).
        extra_include_paths=cuda_include_paths() if with_cuda else [],
        build_directory=str(build_directory(name)),
        # False: no CUDA runtime linked, no nvcc run, as setup.py's CppExtension.
        with_cuda=with_cuda,
        # False: not a Python module. load() loads the .so with torch.ops.load_library (running
        # its TORCH_LIBRARY blocks) and returns its path, instead of importing it by name.
        is_python_module=False,
        verbose=verbose,
    )
    _registered_by = str(path)
    print(f"[chapter 5] '{name}' ready in {time.perf_counter() - start:.1f} s: {path}")
    stand_in = types.ModuleType("custom_ops._C", f"custom_ops' operators, registered by {path}")
    stand_in.__file__ = str(path)
    sys.modules["custom_ops._C"] = stand_in
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import custom_ops  # noqa: F401  (register_fake and register_autograd, custom_ops/ops.py)

    return _registered_by


if __name__ == "__main__":
    registered_by = load_custom_ops()
    import custom_ops

    x = torch.tensor([-1.0, 0.0, 2.0])
    print("torch.ops.custom_ops.relu(x) =", torch.ops.custom_ops.relu(x).tolist())
    print("registered by:", registered_by)
    print("built with CUDA:", custom_ops.built_with_cuda())
