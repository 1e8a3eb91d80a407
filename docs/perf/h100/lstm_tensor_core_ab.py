"""The A/B behind lstm_tensor_core_experiment.md. It ran from chapter5_extensions/ at commit e33dea0
with the next commit's cp.async staging, and with one line added to plan_mma in
csrc/cuda/lstm_persistent.cu, `if (std::getenv("LSTM_NO_MMA") != nullptr) return plan;`, so that
the CUDA-core kernel could be asked for. Kept as the record of how those numbers were taken.

    cp docs/perf/h100/lstm_tensor_core_ab.py chapter5_extensions/ && python3 chapter5_extensions/lstm_tensor_core_ab.py
"""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

# tensor cores, CUDA cores (the same persistent plan), the step loop
PATHS = [
    {"CUSTOM_OPS_LSTM_PERSISTENT": "1"},
    {"CUSTOM_OPS_LSTM_PERSISTENT": "1", "LSTM_NO_MMA": "1"},
    {"CUSTOM_OPS_LSTM_PERSISTENT": "0"},
]


def main() -> None:
    import build_inplace

    build_inplace.build_inplace()
    import custom_ops
    from gpu_timer import Timer

    timer = Timer()
    print(
        "| H | B | dtype | fwd, tensor cores | fwd, CUDA cores | fwd, step loop "
        "| fwd+bwd, tensor cores | fwd+bwd, CUDA cores | fwd+bwd, step loop |"
    )
    for dtype in (torch.float32, torch.bfloat16):
        for hidden in (256, 512, 1024):
            torch.manual_seed(0)
            model = custom_ops.LSTM(hidden, hidden, device="cuda", dtype=dtype)
            for batch in (1, 4, 8, 16, 32, 64):
                x = torch.randn(64, batch, hidden, device="cuda", dtype=dtype, requires_grad=True)
                grad_y = torch.randn_like(x)
                inputs = [x, *model.parameters()]

                def forward(model=model, x=x):
                    with torch.no_grad():
                        model(x)

                def forward_backward(model=model, x=x, inputs=inputs, grad_y=grad_y):
                    torch.autograd.grad(model(x)[0], inputs, grad_y)

                cells = []
                for fn in (forward, forward_backward):
                    for env in PATHS:
                        os.environ.pop("LSTM_NO_MMA", None)
                        os.environ.update(env)
                        fn()
                        cells.append(timer.gpu_ms(fn, runs=15))
                os.environ.pop("LSTM_NO_MMA", None)
                dtype_name = str(dtype).removeprefix("torch.")
                print(
                    f"| {hidden} | {batch} | {dtype_name} | "
                    + " | ".join(f"{c:.3f}" for c in cells)
                    + " |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
