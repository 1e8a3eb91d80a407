"""One launch of each kernel version on 2^26 float32 elements, for Nsight Compute to measure
(lesson: "Reading an Nsight Compute report"); gpu_check.py runs it under ncu. Runs alone too, but prints nothing worth reading.

    ncu --clock-control none -k regex:"fused_bias_relu|sum_v|reduce_kernel" \\
        --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \\
        --metrics smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum \\
        python chapter3_cuda_kernels/profile_kernels.py
"""

from __future__ import annotations

import torch

import load_chapter3

PROFILED = [
    "fused_bias_relu_v1",
    "fused_bias_relu_v2",
    "fused_bias_relu_v3",
    "sum_v1_interleaved",
    "sum_v2_sequential",
    "sum_v3_first_add_during_load",
    "sum_v4_warp_shuffle",
    "sum_v5_vectorized_grid_stride",
]


def main() -> None:
    ext = load_chapter3.load_chapter3()
    x = torch.randn(2**16, 1024, device="cuda")
    bias = torch.randn(1024, device="cuda")
    torch.sum(x)  # PyTorch's reduction, the row to compare the sums with
    for name in PROFILED:
        op = getattr(ext, name)
        op(x, bias, 0.5) if name.startswith("fused") else op(x)
    torch.cuda.synchronize()
    print("profiled:", ", ".join(PROFILED))


if __name__ == "__main__":
    main()
