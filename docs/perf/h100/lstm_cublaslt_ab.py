"""The A/B behind lstm_cublaslt_experiment.md. It ran from chapter5_extensions/ at commit 3c7ffa3,
whose lstm.cu read CUSTOM_OPS_LSTM_CUBLASLT (the variable is gone since 62c3e8d), and is kept as
the record of how those numbers were taken: rounds in which the two variants take turns, medians.

    cp docs/perf/h100/lstm_cublaslt_ab.py chapter5_extensions/ && python3 chapter5_extensions/lstm_cublaslt_ab.py
"""

import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import build_inplace

    build_inplace.build_inplace()
    import custom_ops
    from gpu_timer import Timer

    timer = Timer()
    results: dict[tuple, list[dict]] = {}
    for steps, batch, hidden in [(64, 64, 1024), (256, 64, 1024), (64, 256, 1024)]:
        for dtype in (torch.float32, torch.bfloat16):
            torch.manual_seed(0)
            model = custom_ops.LSTM(hidden, hidden, device="cuda", dtype=dtype)
            x = torch.randn(steps, batch, hidden, device="cuda", dtype=dtype, requires_grad=True)
            grad_y = torch.randn_like(x)
            inputs = [x, *model.parameters()]

            def fwd_bwd(model=model, x=x, inputs=inputs, grad_y=grad_y):
                torch.autograd.grad(model(x)[0], inputs, grad_y)

            for _ in range(7):
                for variant in ("1", "0"):  # cuBLASLt, then cublasGemmEx
                    os.environ["CUSTOM_OPS_LSTM_CUBLASLT"] = variant
                    fwd_bwd()
                    key = (steps, batch, hidden, str(dtype).removeprefix("torch."), variant)
                    results.setdefault(key, []).append(timer.measure(fwd_bwd, runs=5, loop=10))
    for key, runs in results.items():
        medians = {
            m: statistics.median(r[m] for r in runs) for m in ("gpu_ms", "loop_ms", "host_ms")
        }
        loops = " ".join(f"{r['loop_ms']:.2f}" for r in runs)
        print(
            key,
            f"gpu {medians['gpu_ms']:.3f} loop {medians['loop_ms']:.3f} "
            f"host {medians['host_ms']:.3f}  loops: {loops}",
        )


if __name__ == "__main__":
    main()
