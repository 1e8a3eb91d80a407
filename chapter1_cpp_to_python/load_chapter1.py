"""Build chapter 1's extensions just in time with torch.utils.cpp_extension.load, and load them.

    python chapter1_cpp_to_python/load_chapter1.py     # build (or reuse) both, call them, print where

This is the first of the three ways to build `addone` (lesson: "Way 1: load()"), and the loader
the tests, the notebook and the benchmark share, so a module is compiled once and reused.
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


def _load(name: str, sources: list[str], first_build_s: int, verbose: bool) -> ModuleType:
    put_ninja_on_path()  # torch runs ninja from PATH: always this venv's (build_utils.py says why)
    print(f"[chapter 1] loading '{name}' (first build ~{first_build_s} s on 2 cores, cached after)")
    start = time.perf_counter()
    module = load(
        # The module's import name. It must match PYBIND11_MODULE(TORCH_EXTENSION_NAME, m):
        # load() passes -DTORCH_EXTENSION_NAME=<name> to the compiler.
        name=name,
        # C++ (.cpp) or CUDA (.cu) files; a .cu file switches on nvcc and the CUDA libraries.
        sources=[str(HERE / s) for s in sources],
        # Flags for the host compiler, appended to torch's own (-fPIC -std=c++17 and the include
        # paths). Torch adds no -O flag to JIT builds, so without this the code is built -O0.
        extra_cflags=["-O3"],
        # Flags for the linker, e.g. ["-lcublas"]; torch already links libc10, libtorch,
        # libtorch_cpu and libtorch_python.
        extra_ldflags=[],
        # Where build.ninja, the object files and <name>.so go: build/torch_extensions/torch<version>
        # -py<version>/<name> (build_utils.py). Without it: $TORCH_EXTENSIONS_DIR/<name>, else
        # ~/.cache/torch_extensions/py311_cu130/<name>, shared by every torch version.
        build_directory=str(build_directory(name)),
        # True prints the ninja command lines; turn it on whenever a build misbehaves.
        verbose=verbose,
    )
    print(f"[chapter 1] '{name}' ready in {time.perf_counter() - start:.1f} s: {module.__file__}")
    return module


# One module object per name and process: tests, the notebook and the benchmark all share it.
_cache: dict[str, ModuleType] = {}


def load_addone(verbose: bool = False) -> ModuleType:
    """The `addone` module: addone(x: int) -> int, build_info() -> str."""
    if "addone" not in _cache:
        _cache["addone"] = _load("addone", ["addone.cpp"], first_build_s=10, verbose=verbose)
    return _cache["addone"]


def load_pybind_features(verbose: bool = False) -> ModuleType:
    """The `pybind_features` module (containers, kwargs, a class, exceptions, the GIL, tensors)."""
    if "pybind_features" not in _cache:
        _cache["pybind_features"] = _load(
            "pybind_features", ["pybind_features.cpp"], first_build_s=30, verbose=verbose
        )
    return _cache["pybind_features"]


if __name__ == "__main__":
    addone = load_addone()
    print(f"addone.addone(41) = {addone.addone(41)}   ({addone.build_info()})")
    features = load_pybind_features()
    print(
        f"pybind_features.word_lengths(['gpu', 'kernel']) = {features.word_lengths(['gpu', 'kernel'])}"
    )
