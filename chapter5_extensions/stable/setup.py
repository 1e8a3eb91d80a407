"""Build custom_ops_stable: relu and fused_bias_relu against PyTorch's stable ABI, one wheel for
every Python from 3.10 on and every torch from 2.11 on (the lesson: ../part3_shipping.md, "One
wheel across torch releases: the stable ABI"; the details: ../further/stable_abi.md).

    pip wheel --no-build-isolation --no-deps ./chapter5_extensions/stable -w dist
    cd chapter5_extensions/stable && python setup.py build_ext --inplace   # what the tests do

Switches (environment variables), as ../setup.py's:
    USE_CUDA=0|1          default 1 when torch is a CUDA build and nvcc is found (CUDA_HOME)
    TORCH_CUDA_ARCH_LIST  default: the GPU of this machine, or 9.0+PTX if it has none
    MAX_JOBS              parallel compile jobs (ninja)

Two flags make the promise, the rest is custom_ops's build:
- -DTORCH_TARGET_VERSION=2.11: the headers hide every stable API newer than 2.11, so the .so
  calls nothing a torch 2.11 lacks. Newer torches keep each of these C functions (the stable
  ABI's contract), so the .so loads in them too.
- py_limited_api=True: no pybind11, only Python's stable C API, so one cp310-abi3 wheel.
The sources include only torch/csrc/stable and torch/headeronly; abi_audit.py proves that the
.so imports no C++ symbol of ATen, c10 or torch (those change with every release).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

HERE = Path(__file__).resolve().parent

# [major 1 byte][minor 1 byte][patch 1 byte][ABI tag 5 bytes]: 2.11.0. The oldest torch the wheel
# loads in; pyproject.toml's dependency says the same to pip.
TORCH_TARGET_VERSION = "0x020b000000000000"


def use_cuda() -> bool:
    if "USE_CUDA" in os.environ:
        return os.environ["USE_CUDA"] == "1"
    return torch.version.cuda is not None and CUDA_HOME is not None


def extension():
    with_cuda = use_cuda()
    sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc").glob("*.cpp"))
    depends = sorted(
        str(p.relative_to(HERE)) for ext in ("*.h", "*.cuh") for p in (HERE / "csrc").rglob(ext)
    )
    # No -fopenmp: torch::stable::parallel_for runs on torch's own thread pool, through the shim.
    target = f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"
    args = {"cxx": ["-O3", "-g0", target]}  # -g0: Python's flags add -g, slow and large here
    if not with_cuda:
        return CppExtension(
            "custom_ops_stable._C",
            sources,
            depends=depends,
            extra_compile_args=args,
            py_limited_api=True,
        )
    if "TORCH_CUDA_ARCH_LIST" not in os.environ and not torch.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0+PTX"
    sources += sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc" / "cuda").glob("*.cu"))
    # USE_CUDA: the C shim declares its CUDA functions (aoti_torch_get_current_cuda_stream) only
    # when it is defined.
    args["nvcc"] = ["-O3", target, "-DUSE_CUDA"]
    return CUDAExtension(
        "custom_ops_stable._C",
        sources,
        depends=depends,
        extra_compile_args=args,
        define_macros=[("WITH_CUDA", None)],
        py_limited_api=True,
    )


setup(
    packages=find_packages(include=["custom_ops_stable"]),
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension},
    options={
        "build": {"build_base": str(HERE / "build" / ("cuda" if use_cuda() else "cpu"))},
        "bdist_wheel": {"py_limited_api": "cp310"},
    },
)
