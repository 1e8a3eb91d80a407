"""Way 2 of building addone: torch.utils.cpp_extension.load_inline, C++ source in a Python string.

    python chapter1_cpp_to_python/load_inline_example.py

load_inline writes the strings to a file in the build directory and then does what load() does.
It suits a notebook experiment or a one-function test; past a few lines, a real .cpp file (with an
editor that understands it) is easier to live with.
"""

from __future__ import annotations

# build_utils first: it sets CUDA_HOME, which torch.utils.cpp_extension reads on import.
from build_utils import build_root

# isort: split
from torch.utils.cpp_extension import load_inline

# With no_implicit_headers=True below, the string includes what it uses: pybind11 and
# torch::wrap_pybind_function, which the generated binding block calls (torch/csrc/Exceptions.h).
CPP_SOURCE = """
#include <torch/csrc/Exceptions.h>

int addone(int x) { return x + 1; }
"""


def load_addone_inline():
    """Build (or reuse) the inline module and return it."""
    build_directory = build_root() / "addone_inline"
    build_directory.mkdir(parents=True, exist_ok=True)
    return load_inline(
        name="addone_inline",
        cpp_sources=[CPP_SOURCE],
        # functions= writes the PYBIND11_MODULE block for us: one m.def per name listed. Without
        # no_implicit_headers=True the generated file would start with <torch/extension.h>, all
        # of libtorch's C++ API, and take half a minute to build for one line of C++.
        functions=["addone"],
        no_implicit_headers=True,
        extra_cflags=["-O3"],
        build_directory=str(build_directory),
        verbose=False,
    )


if __name__ == "__main__":
    print("[chapter 1] loading 'addone_inline' (first build ~10 s on 2 cores, cached after)")
    module = load_addone_inline()
    print(f"addone_inline.addone(41) = {module.addone(41)}   ({module.__file__})")
