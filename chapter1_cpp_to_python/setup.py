"""Way 3 of building addone: ahead of time, as an installable package, with setuptools.

    .venv/bin/pip install --no-build-isolation ./chapter1_cpp_to_python
    .venv/bin/python -c "import torch, chapter1_addone; print(chapter1_addone.addone(41))"

--no-build-isolation: pip normally builds in a fresh environment holding only the build tools,
where `from torch.utils.cpp_extension import ...` below fails; this builds against the torch
already installed, the one the module will run with. `import torch` first: the module needs
torch's shared libraries and finds them only once torch has loaded them. Chapter 5 builds a full
package this way.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="chapter1-addone",
    version="0.1.0",
    description="Chapter 1 of the PyTorch extensions course: addone, built by setup.py",
    ext_modules=[
        # The module is imported as `chapter1_addone`; BuildExtension passes
        # -DTORCH_EXTENSION_NAME=chapter1_addone so PYBIND11_MODULE in addone.cpp matches it.
        CppExtension(
            name="chapter1_addone",
            sources=["addone.cpp"],
            extra_compile_args=["-O3"],
        )
    ],
    # BuildExtension adds torch's include paths, libraries and C++ flags, and compiles with ninja
    # in parallel when ninja is installed (MAX_JOBS caps the number of jobs).
    cmdclass={"build_ext": BuildExtension},
    # This folder also holds the chapter's scripts and tests; they are not part of the package.
    py_modules=[],
    packages=[],
)
