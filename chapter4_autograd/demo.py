"""Chapter 4 tour: custom ops that autograd differentiates, proved right by gradcheck.

python chapter4_autograd/demo.py      (part of `make tutorial`)
"""

from __future__ import annotations

import torch

import functions
import train_demo


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"module built with CUDA: {functions.ext.built_with_cuda}; running on: {device}")
    torch.manual_seed(0)

    print("\n--- gradients of fused_bias_relu against autograd through plain PyTorch")
    x = torch.randn(64, 100, device=device, requires_grad=True)
    bias = torch.randn(100, device=device, requires_grad=True)
    ours = torch.autograd.grad(functions.fused_bias_relu(x, bias, 0.5).sum(), (x, bias))
    plain = torch.autograd.grad(torch.relu(x * 0.5 + bias).sum(), (x, bias))
    for name, a, b in zip(["grad_x", "grad_bias"], ours, plain, strict=True):
        print(f"{name:9s} max abs difference {(a - b).abs().max().item():.1e}")

    print("\n--- torch.autograd.gradcheck in float64 (finite differences against our backward)")
    x64 = torch.randn(4, 6, device=device, dtype=torch.float64, requires_grad=True)
    b64 = torch.randn(6, device=device, dtype=torch.float64, requires_grad=True)
    checks = {
        "relu": (functions.relu, (x64,)),
        "fused_bias_relu (Python Function)": (
            lambda x, b: functions.fused_bias_relu(x, b, 1.5),
            (x64, b64),
        ),
        "fused_bias_relu (C++ Function)": (
            lambda x, b: functions.ext.fused_bias_relu_cpp_autograd(x, b, 1.5),
            (x64, b64),
        ),
    }
    for name, (fn, inputs) in checks.items():
        print(f"{name:35s} gradcheck passed: {torch.autograd.gradcheck(fn, inputs)}")

    print("\n--- what autograd saves for the backward")
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = functions.fused_bias_relu(x, bias, 0.5)
    same = saved[0].data_ptr() == y.data_ptr()
    print(f"fused_bias_relu saves {len(saved)} tensor; it is the output y itself: {same}")

    print("\n--- double backward is refused, with a message")
    x.grad = None
    try:
        loss = (functions.fused_bias_relu(x, bias) ** 2).sum()
        (grad_x,) = torch.autograd.grad(loss, x, create_graph=True)
        grad_x.sum().backward()
    except RuntimeError as error:
        print(f"RuntimeError: {str(error).splitlines()[0][:100]}...")

    print("\n--- training: FusedBiasReLU against Linear + ReLU from the same weights")
    train_demo.main(["--steps", "50", "--device", device])


if __name__ == "__main__":
    main()
