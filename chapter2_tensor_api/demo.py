"""Chapter 2 tour: tensor ops written in C++ with ATen, checked against PyTorch.

python chapter2_tensor_api/demo.py      (part of `make tutorial`)
"""

from __future__ import annotations

import torch

import load_chapter2


def main() -> None:
    ext = load_chapter2.load_chapter2()
    torch.manual_seed(0)

    print("\n--- fused_bias_relu = relu(x * scale + bias), three versions")
    x, bias = torch.randn(4, 1000, 256), torch.randn(256)
    expected = torch.relu(x * 0.5 + bias)
    for name in [
        "fused_bias_relu_v1_aten",
        "fused_bias_relu_v2_loop",
        "fused_bias_relu_v3_parallel",
    ]:
        out = getattr(ext, name)(x, bias, 0.5)
        error = (out - expected).abs().max().item()
        print(f"{name:28s} matches torch (max abs error {error:.1e})")
    half = ext.fused_bias_relu_v3_parallel(x.bfloat16(), bias.bfloat16(), 0.5)
    print(f"bfloat16 through the same loop: {half.dtype}, computed in float, rounded once")

    print("\n--- bad input is refused before any work, with a message that says what to fix")
    try:
        ext.fused_bias_relu_v2_loop(x, torch.randn(255), 0.5)
    except RuntimeError as error:
        print(f"RuntimeError: {str(error).splitlines()[0]}")

    print("\n--- an LSTM cell in ATen against torch.nn.LSTMCell")
    cell = torch.nn.LSTMCell(32, 64)
    xs, h, c = torch.randn(8, 32), torch.randn(8, 64), torch.randn(8, 64)
    h_next, c_next, gates, _ = ext.lstm_cell_forward(xs, h, c, *cell.parameters())
    with torch.no_grad():
        ref_h, ref_c = cell(xs, (h, c))
    print(
        f"h_next matches torch: {torch.allclose(h_next, ref_h, atol=1e-6)}, "
        f"c_next matches torch: {torch.allclose(c_next, ref_c, atol=1e-6)}, gates {tuple(gates.shape)}"
    )

    print("\n--- row-major PyTorch through a column-major GEMM: C^T = B^T A^T")
    a, b = torch.randn(5, 3), torch.randn(3, 4)
    print(
        f"matches torch: {torch.allclose(ext.matmul_via_column_major_gemm(a, b), a @ b, atol=1e-6)}"
    )

    print("\nNext: python chapter2_tensor_api/benchmark.py --quick --no-compile")


if __name__ == "__main__":
    main()
