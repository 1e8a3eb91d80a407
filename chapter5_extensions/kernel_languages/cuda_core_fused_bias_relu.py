"""fused_bias_relu's forward with cuda.core, NVIDIA's Python API over the CUDA driver: the same
kernel file as the NVRTC way (fused_bias_relu_nvrtc.cu), compiled by cuda.core's Program (NVRTC
underneath) and launched with its launch(), on torch's stream. Registered with torch.library as
course_cuda_core::fused_bias_relu, so autograd, torch.compile and torch.export see one op. What
differs from nvrtc_fused_bias_relu.py is only how the kernel is compiled and launched: a public,
versioned API instead of torch's private torch.cuda._compile_kernel, for the price of a package
and of typing each argument yourself. Lesson: chapter 5, further/kernel_languages.md; tests:
test_kernel_languages.py.

    python chapter5_extensions/kernel_languages/cuda_core_fused_bias_relu.py  # compile; a GPU: check

requirements.txt installs cuda-core 1.2.2 (its CUDA 13 half uses cuda-bindings, which torch's CUDA
13 wheel brings); the tests skip without it. Without a GPU it still compiles, for sm_90.
"""

from __future__ import annotations

import functools

import fused_bias_relu_contract as contract
import numpy as np
import nvrtc_fused_bias_relu as nvrtc
import torch
from cuda.core import Device, LaunchConfig, ObjectCode, Program, ProgramOptions, launch
from torch import Tensor


def compiled_program(source: str, name: str, arch: str) -> ObjectCode:
    """The CUBIN of one instantiation, `name` a C++ expression such as "kernel<float, 4>": NVRTC
    instantiates a template only where it is named (name_expressions), as nvcc does where a
    launch names it."""
    options = ProgramOptions(std="c++17", arch=f"sm_{arch}", include_path=nvrtc.cuda_include_dirs())
    return Program(source, "c++", options).compile("cubin", name_expressions=(name,))


@functools.cache
def loaded_kernel(source: str, name: str, device_index: int):
    """Compiled on first use per (kernel, GPU) and loaded on that GPU (both ops use this)."""
    # That GPU current while it loads, the one before restored after (torch.cuda.device); the
    # context is the GPU's primary one, torch's own.
    with torch.cuda.device(device_index):
        device = Device(device_index)
        device.set_current()
        return compiled_program(source, name, device.arch).get_kernel(name)


def kernel(dtype: torch.dtype, vec: int, device_index: int):
    return loaded_kernel(nvrtc.SOURCE, nvrtc.kernel_name(dtype, vec), device_index)


def compile_only(dtype: torch.dtype, vec: int) -> bytes:
    """The CUBIN for sm_90 (the H100), without a GPU: Program compiles without one."""
    return compiled_program(nvrtc.SOURCE, nvrtc.kernel_name(dtype, vec), "90").code


@torch.library.custom_op("course_cuda_core::fused_bias_relu", mutates_args=(), device_types="cuda")
def fused_bias_relu(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    """y = relu(x * scale + bias): x (..., cols) on a GPU, any strides, float32, float64, float16
    or bfloat16; bias (cols,) of x's dtype and device. CPU tensors take the PyTorch reference."""
    nvrtc.check_inputs(x, bias)
    x, bias = x.contiguous(), bias.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    shape = nvrtc.launch_shape(x, bias, y)
    # launch() packs each argument by its Python type: an int is a pointer (intptr_t), a float a
    # double, a numpy scalar its own width. The kernel takes (T*, T*, T*, int, int, double).
    with torch.cuda.device(x.device):
        launch(
            torch.cuda.current_stream(),  # torch's stream: it has __cuda_stream__
            LaunchConfig(grid=shape.grid, block=shape.block),
            kernel(x.dtype, shape.vec, x.device.index),
            x.data_ptr(),
            bias.data_ptr(),
            y.data_ptr(),
            np.int32(shape.rows),
            np.int32(shape.vec_cols),
            float(scale),
        )
    return y


fused_bias_relu.register_kernel("cpu")(nvrtc.cpu_kernel)  # the PyTorch reference, as the NVRTC op's


contract.register_fake_and_autograd(fused_bias_relu)


if __name__ == "__main__":
    nvrtc.demo(fused_bias_relu, compile_only, "course_cuda_core.fused_bias_relu")
