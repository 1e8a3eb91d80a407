"""One launch of each kernel version on 2^26 float32 elements (and v3, v4 and torch.compile's
kernel for the same line in bfloat16 too), for Nsight Compute to
measure (lesson: "Reading an Nsight Compute report"); gpu_check.py runs it under ncu. Runs alone
too, but prints nothing worth reading. Only the launches between torch.cuda.profiler.start() and
stop() are profiled (--profile-from-start off): not the builds, nor torch.compile's autotuning.

    ncu --clock-control none --profile-from-start off \\
        -k regex:"fused_bias_relu|sum_v|reduce_kernel|triton" \\
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
    "fused_bias_relu_v4",
    "fused_bias_relu_v4_gpu_sized_grid",
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
    x16, bias16 = x.bfloat16(), bias.bfloat16()
    # torch.compile's Triton kernel for the same line, the one to compare v3 and v4 with; compiled
    # and autotuned for both dtypes before profiling starts.
    compiled = torch.compile(lambda x, b: torch.relu(x * 0.5 + b), dynamic=False)
    compiled(x, bias), compiled(x16, bias16)
    torch.cuda.synchronize()

    torch.cuda.profiler.start()
    torch.sum(x)  # PyTorch's reduction, the row to compare the sums with
    for name in PROFILED:
        op = getattr(ext, name)
        op(x, bias, 0.5) if name.startswith("fused") else op(x)
    compiled(x, bias)
    # bfloat16, where each 16-byte vector holds eight elements.
    for name in ["fused_bias_relu_v3", "fused_bias_relu_v4"]:
        getattr(ext, name)(x16, bias16, 0.5)
    compiled(x16, bias16)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled:", ", ".join(PROFILED))


if __name__ == "__main__":
    main()
