"""Tests of the kernel-languages comparison's own ops (further/kernel_languages.md) against plain
PyTorch: today the NVRTC fused_bias_relu (nvrtc_fused_bias_relu.py).

    python chapter5_extensions/kernel_languages/test_kernel_languages.py   # or with pytest

Without a GPU, NVRTC still compiles every instantiation (for sm_90), and the op's CPU kernel,
fake and autograd are checked with opcheck, torch.compile and torch.export; the launches are
skipped with the reason.
"""

import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import nvrtc_fused_bias_relu as nvrtc  # noqa: E402

# One rounding of the output dtype (the kernel computes the half types in float32), and for
# float32 the last bits a fused multiply-add can change.
TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}
# 0 elements, one, odd widths (the one-element path), 16-byte rows (the vector path), 3-D.
SHAPES = [(0, 16), (1,), (7,), (3, 1023), (64, 1024), (5, 3, 40)]


def reference(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.relu(x.double() * scale + bias.double())


def random(shape, dtype, device, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)


@pytest.mark.parametrize("dtype", list(nvrtc.TYPE_NAMES), ids=str)
def test_every_instantiation_compiles_with_nvrtc(dtype):
    """The kernel for each dtype at both widths the op launches, compiled for the H100 (sm_90)."""
    for vec in (1, 16 // dtype.itemsize):
        assert len(nvrtc.compile_only(dtype, vec)) > 1000


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_pytorch(device, shape, dtype):
    x = random(shape, dtype, device, seed=1)
    bias = random(shape[-1:], dtype, device, seed=2)
    y = nvrtc.fused_bias_relu(x, bias, 0.5)
    assert y.shape == x.shape and y.dtype == dtype and y.device == x.device
    torch.testing.assert_close(y, reference(x, bias, 0.5).to(dtype), **TOLERANCES[dtype])


@pytest.mark.parametrize(
    "view", ["transposed", "every_other_column", "one_element_in"], ids=lambda v: v
)
def test_a_view_gives_what_its_copy_gives(device, view):
    base = random((64, 256), torch.float32, device, seed=3)
    x = {
        "transposed": base.t(),
        "every_other_column": base[:, ::2],
        "one_element_in": base.view(-1)[1:1025].view(4, 256),  # 4 bytes past a 16-byte boundary
    }[view]
    bias = random(x.shape[-1:], torch.float32, device, seed=4)
    torch.testing.assert_close(nvrtc.fused_bias_relu(x, bias, 0.5), reference(x, bias, 0.5).float())


def test_nan_stays_nan(device):
    x = torch.tensor([[float("nan"), -1.0, 2.0, 3.0]], device=device)
    y = nvrtc.fused_bias_relu(x, torch.zeros(4, device=device), 1.0)
    assert y[0, 0].isnan() and y[0, 1:].tolist() == [0.0, 2.0, 3.0]


def test_gradients_match_pytorch(device):
    x = random((33, 40), torch.float64, device, seed=5).requires_grad_()
    bias = random((40,), torch.float64, device, seed=6).requires_grad_()
    grad_y = random((33, 40), torch.float64, device, seed=7)
    got = torch.autograd.grad(nvrtc.fused_bias_relu(x, bias, 0.5), (x, bias), grad_y)
    expected = torch.autograd.grad(reference(x, bias, 0.5), (x, bias), grad_y)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize(
    ("x_shape", "bias_shape", "dtype", "message"),
    [
        (
            (4, 8),
            (8,),
            torch.int64,
            "x must be float32, float64, float16 or bfloat16, got torch.int64",
        ),
        (
            (4, 8),
            (7,),
            torch.float32,
            r"bias must have shape \(8,\), the last dimension of x, got \(7,\)",
        ),
    ],
    ids=["integer_x", "bias_of_the_wrong_length"],
)
def test_rejects_bad_input_with_a_message_naming_op_and_argument(
    device, x_shape, bias_shape, dtype, message
):
    x = torch.zeros(x_shape, dtype=dtype, device=device)
    bias = torch.zeros(bias_shape, dtype=dtype, device=device)
    with pytest.raises(RuntimeError, match=f"fused_bias_relu: {message}"):
        nvrtc.fused_bias_relu(x, bias, 0.5)


def test_opcheck(device):
    """Schema, fake kernel, autograd registration and dispatch, as chapter 5's ops."""
    x = random((16, 32), torch.float32, device, seed=8).requires_grad_()
    bias = random((32,), torch.float32, device, seed=9).requires_grad_()
    torch.library.opcheck(nvrtc.fused_bias_relu, (x, bias, 0.5))


def test_compile_with_fullgraph_and_export_see_one_op(device):
    """The launch is Python that Dynamo never traces: one node of the op, in both."""

    def model(x, bias):
        return nvrtc.fused_bias_relu(x, bias, 0.5) * 2

    x = random((8, 64), torch.float32, device, seed=10)
    bias = random((64,), torch.float32, device, seed=11)
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    torch.testing.assert_close(compiled(x, bias), model(x, bias))
    program = torch.export.export(_Wrapper(), (x, bias))
    assert "course_nvrtc.fused_bias_relu.default" in str(program.graph)
    torch.testing.assert_close(program.module()(x, bias), model(x, bias))


class _Wrapper(torch.nn.Module):
    def forward(self, x, bias):
        return nvrtc.fused_bias_relu(x, bias, 0.5) * 2


@pytest.mark.cuda
def test_a_cuda_graph_replays_the_launch():
    """Compiled and loaded before capture (cuModuleLoadData cannot run inside one); the launch
    goes to the current stream, so a graph records it and replays it on new data."""
    x = random((128, 512), torch.float32, "cuda", seed=12)
    bias = random((512,), torch.float32, "cuda", seed=13)
    nvrtc.fused_bias_relu(x, bias, 0.5)  # compile and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = nvrtc.fused_bias_relu(x, bias, 0.5)
    x.copy_(random((128, 512), torch.float32, "cuda", seed=14))
    graph.replay()
    torch.testing.assert_close(y, reference(x, bias, 0.5).float())


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
