"""custom_ops from a user's side: call the ops, take gradients, put the layers in a network,
compile it, and time it the right way.

    python chapter5_extensions/examples/example_usage.py      # builds the package in place if needed
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.utils.benchmark as benchmark

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the chapter folder
import build_inplace


def main() -> None:
    build_inplace.build_inplace()
    import custom_ops

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    print(f"custom_ops on {device}; built with CUDA: {custom_ops.built_with_cuda()}")

    # 1. The ops are PyTorch operators: torch.ops.custom_ops.* or the typed wrappers.
    x = torch.randn(4, 8, device=device, requires_grad=True)
    bias = torch.randn(8, device=device, requires_grad=True)
    y = custom_ops.fused_bias_relu(x, bias, scale=0.5)
    print("fused_bias_relu:", tuple(y.shape), "| reduce_sum:", custom_ops.reduce_sum(y).item())

    # 2. Gradients flow through the registered autograd formulas.
    custom_ops.reduce_sum(y).backward()
    x_ref, bias_ref = x.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
    torch.relu(x_ref * 0.5 + bias_ref).sum().backward()
    same = torch.allclose(x.grad, x_ref.grad) and torch.allclose(bias.grad, bias_ref.grad)
    print("gradients match plain PyTorch:", same)

    # 3. The layers in a network, and the network compiled whole (the fake kernels make that work).
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128, bias=False),
        custom_ops.FusedBiasReLU(128),
        torch.nn.Linear(128, 10),
    ).to(device)
    inputs = torch.randn(32, 64, device=device)
    compiled = torch.compile(model, fullgraph=True)
    same = torch.allclose(compiled(inputs), model(inputs), rtol=1e-5, atol=1e-6)
    print("compiled model matches eager (fullgraph=True, no graph break at the custom op):", same)

    # 4. Timing done right: torch.utils.benchmark synchronizes CUDA, warms up, and reports the
    # median of many runs. (time.time() around a CUDA call measures only the launch.)
    big_x = torch.randn(2048, 1024, device=device)
    big_bias = torch.randn(1024, device=device)
    for label, stmt in [
        ("eager relu(x * 0.5 + b)", "torch.relu(x * 0.5 + b)"),
        ("custom_ops.fused_bias_relu", "custom_ops.fused_bias_relu(x, b, 0.5)"),
    ]:
        timer = benchmark.Timer(
            stmt=stmt,
            globals={"torch": torch, "custom_ops": custom_ops, "x": big_x, "b": big_bias},
        )
        print(f"{label:30s} {timer.blocked_autorange(min_run_time=0.2).median * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
