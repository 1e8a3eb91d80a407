"""Build chapter 1's extensions just in time with torch.utils.cpp_extension.load, and load them.

    python chapter1_cpp_to_python/load_chapter1.py     # build (or reuse) both, call them, print where

This is the first of the three ways to build `addone` (lesson: "Way 1: load()"), and the loader
the tests, the notebook and the benchmark share, so a module is compiled once and reused.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType

import torch
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent


def build_root() -> Path:
    """Where JIT builds go: $TORCH_EXTENSIONS_DIR, else build/torch_extensions next to this folder.

    One subfolder per torch and Python version: a module compiled against one torch must never be
    loaded by another (that is the classic "undefined symbol" error), and torch's own cache key
    (sources and flags) does not include the torch version.
    """
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR", HERE.parent / "build" / "torch_extensions"))
    v = sys.version_info
    return root / f"torch{torch.__version__}-py{v.major}{v.minor}".replace("+", "_")


def _put_ninja_on_path() -> None:
    """torch runs `ninja` from PATH. `pip install ninja` puts it next to the Python executable,
    which is on PATH only in an activated venv. Put it first, so `.venv/bin/python <script>` works
    too, and always with the same ninja: another version (say /usr/bin/ninja) finds the build log
    "too old" and recompiles everything."""
    python_bin = Path(sys.executable).parent
    if (python_bin / "ninja").exists() and shutil.which("ninja") != str(python_bin / "ninja"):
        os.environ["PATH"] = f"{python_bin}{os.pathsep}{os.environ.get('PATH', '')}"


def _load(name: str, sources: list[str], first_build_s: int, verbose: bool) -> ModuleType:
    _put_ninja_on_path()
    build_directory = build_root() / name
    build_directory.mkdir(parents=True, exist_ok=True)
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
        # Where build.ninja, the object files and <name>.so go. Without it: $TORCH_EXTENSIONS_DIR/
        # <name>, else ~/.cache/torch_extensions/py311_cu130/<name>.
        build_directory=str(build_directory),
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
            "pybind_features", ["pybind_features.cpp"], first_build_s=35, verbose=verbose
        )
    return _cache["pybind_features"]


if __name__ == "__main__":
    addone = load_addone()
    print(f"addone.addone(41) = {addone.addone(41)}   ({addone.build_info()})")
    features = load_pybind_features()
    print(
        f"pybind_features.word_lengths(['gpu', 'kernel']) = {features.word_lengths(['gpu', 'kernel'])}"
    )
