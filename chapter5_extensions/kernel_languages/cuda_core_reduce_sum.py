"""reduce_sum with cuda.core: the NVRTC way's kernel (reduce_sum_nvrtc.cu), compiled by cuda.core's
Program and launched with its launch(), as cuda_core_fused_bias_relu.py does for fused_bias_relu.
Registered as course_cuda_core::reduce_sum. Lesson: chapter 5, further/kernel_languages.md; tests:
test_kernel_languages.py.

    python chapter5_extensions/kernel_languages/cuda_core_reduce_sum.py   # compile; a GPU: check
"""

from __future__ import annotations

import numpy as np
import nvrtc_reduce_sum as nvrtc
import reduce_sum_contract as contract
import torch
from cuda.core import LaunchConfig, launch
from cuda_core_fused_bias_relu import compiled_program, loaded_kernel
from torch import Tensor


def kernel(dtype: torch.dtype, vec: int, device_index: int):
    """Compiled on first use per (dtype, vector width, GPU) and loaded on that GPU."""
    return loaded_kernel(nvrtc.SOURCE, nvrtc.kernel_name(dtype, vec), device_index)


def compile_only(dtype: torch.dtype, vec: int) -> bytes:
    """The CUBIN for sm_90 without a GPU."""
    return compiled_program(nvrtc.SOURCE, nvrtc.kernel_name(dtype, vec), "90").code


@torch.library.custom_op("course_cuda_core::reduce_sum", mutates_args=(), device_types="cuda")
def reduce_sum(x: Tensor) -> Tensor:
    """The sum of x's elements: a 0-dim tensor of x's dtype, summed in float32 (float64 stays),
    the same bits on every run. x: any shape and strides, float32, float64, float16 or bfloat16."""
    nvrtc.check_inputs(x)
    x = x.contiguous()
    plan = nvrtc.launch_plan(x)
    # The kernel takes (const T*, int, acc_t*, unsigned int*, T*): the pointers as Python ints.
    with torch.cuda.device(x.device):
        launch(
            torch.cuda.current_stream(),
            LaunchConfig(grid=(plan.blocks, 1, 1), block=(nvrtc.THREADS, 1, 1)),
            kernel(x.dtype, plan.vec, x.device.index),
            x.data_ptr(),
            np.int32(x.numel()),
            plan.partials.data_ptr(),
            plan.blocks_done.data_ptr(),
            plan.out.data_ptr(),
        )
    return plan.out


reduce_sum.register_kernel("cpu")(nvrtc.cpu_kernel)  # the PyTorch reference, as the NVRTC op's


contract.register_fake_and_autograd(reduce_sum)


if __name__ == "__main__":
    nvrtc.demo(reduce_sum, compile_only, "course_cuda_core.reduce_sum")
