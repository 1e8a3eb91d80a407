"""custom_ops against custom_ops_stable on a CUDA GPU: the same kernels, reached through the
dispatcher as a TORCH_LIBRARY op and as a STABLE_TORCH_LIBRARY op (boxed, through the C shim).
relu and fused_bias_relu at 2^28 float32 elements, forward, and forward + backward.

    python chapter5_extensions/stable/benchmark_stable.py           # builds both packages first
    python chapter5_extensions/stable/benchmark_stable.py --log2 24 # smaller: the call cost shows

Timed with ../benchmarks/gpu_timer.py, the course's one GPU timer: GPU ms (median of 30, cold L2,
the host's work hidden; three rounds in turns, their median), and the host's time to issue one
call. Lesson: ../further/build_times.md, "Measured on the H100" (from ../part3_shipping.md, "One
wheel across torch releases: the stable ABI"). Without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent  # chapter5_extensions/stable
# build_stable here; build_inplace and custom_ops in the chapter folder; gpu_timer in benchmarks/.
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "benchmarks")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log2", type=int, default=28, help="elements: 2^LOG2 (default 28)")
    parser.add_argument("--cols", type=int, default=4096, help="x is (2^LOG2 / COLS, COLS)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmark_stable.py needs a CUDA GPU (torch.cuda.is_available() is False)")
        return 0

    import build_stable

    import build_inplace

    build_inplace.build_inplace()
    build_stable.build_stable()
    import custom_ops_stable

    import custom_ops
    from gpu_timer import Timer

    timer = Timer()
    rows = 2**args.log2 // args.cols
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, args.cols, device="cuda", generator=gen, requires_grad=True)
    bias = torch.randn(args.cols, device="cuda", generator=gen, requires_grad=True)
    grad_y = torch.randn(rows, args.cols, device="cuda", generator=gen)

    def forward_backward(op):
        def run():
            # autograd.grad, not backward(): no accumulation into x.grad, one add kernel more.
            torch.autograd.grad(op(), (x, bias), grad_y, allow_unused=True)

        return run

    cases = {
        "relu": {
            name: lambda pkg=pkg: pkg.relu(x)
            for name, pkg in [("custom_ops", custom_ops), ("stable", custom_ops_stable)]
        },
        "fused_bias_relu": {
            name: lambda pkg=pkg: pkg.fused_bias_relu(x, bias, 0.5)
            for name, pkg in [("custom_ops", custom_ops), ("stable", custom_ops_stable)]
        },
    }
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}; x: ({rows}, {args.cols}) float32 "
        f"(2^{args.log2} elements)"
    )
    print(
        "| op | pass | custom_ops GPU ms | stable GPU ms | stable / custom_ops "
        "| host ms a call (custom_ops / stable) |"
    )
    print("|" + " --- |" * 6)
    for op, impls in cases.items():
        for label, wrap in [("forward", lambda f: f), ("fwd+bwd", forward_backward)]:
            # In turns, three rounds: a drift of the GPU's clock touches both alike.
            with torch.no_grad() if label == "forward" else torch.enable_grad():
                both = timer.measure_in_turns({k: wrap(f) for k, f in impls.items()})
            theirs, mine = both["custom_ops"], both["stable"]
            print(
                f"| {op} | {label} | {theirs['gpu_ms']:.3f} | {mine['gpu_ms']:.3f} | "
                f"{mine['gpu_ms'] / theirs['gpu_ms']:.3f} | "
                f"{theirs['host_ms']:.4f} / {mine['host_ms']:.4f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
