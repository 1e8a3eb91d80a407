"""Chapter 3 tour: CUDA kernels for tensors, checked against PyTorch (on the CPU path when there
is no GPU).

    python chapter3_cuda_kernels/demo.py      (part of `make tutorial`)
"""

from __future__ import annotations

import torch

import load_chapter3


def main() -> None:
    ext = load_chapter3.load_chapter3()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"module built with CUDA: {ext.built_with_cuda}; running on: {device}")
    if device == "cpu":
        print("(no GPU here: every op takes its CPU path; run this on a GPU to use the kernels)")

    print("\n--- fused_bias_relu = relu(x * scale + bias), four kernel versions")
    x = torch.randn(4, 1000, 256, device=device)
    bias = torch.randn(256, device=device)
    expected = torch.relu(x * 0.5 + bias)
    for name in load_chapter3.ELEMENTWISE_VERSIONS:
        error = (getattr(ext, name)(x, bias, 0.5) - expected).abs().max().item()
        print(f"{name:20s} matches torch (max abs error {error:.1e})")
    shifted = torch.randn(1 + 1000 * 256, device=device)[1:].view(1000, 256)  # x[1:]: misaligned
    error = (ext.fused_bias_relu_v3(shifted, bias, 0.5) - torch.relu(shifted * 0.5 + bias)).abs()
    print(f"v3 on a misaligned view matches torch (max abs error {error.max().item():.1e})")

    print("\n--- the sum of 1,000,003 elements, seven versions")
    x = torch.randn(1_000_003, device=device)
    exact = x.double().sum().item()
    for name in sorted(n for n in dir(ext) if n.startswith("sum_v")):
        value = getattr(ext, name)(x).item()
        print(f"{name:30s} {value:12.4f}   (float64 reference {exact:.4f})")
    columns = ext.sum_columns(torch.ones(3, 5, 7, device=device))
    print(f"sum_columns of ones(3, 5, 7): {columns.tolist()} (15 in each of 7 columns)")

    print("\n--- a bad input is an error with a message, before any launch")
    try:
        ext.fused_bias_relu_v3(torch.ones(2, 8, device=device), torch.ones(9, device=device))
    except RuntimeError as error:
        print(f"RuntimeError: {str(error).splitlines()[0]}")


if __name__ == "__main__":
    main()
