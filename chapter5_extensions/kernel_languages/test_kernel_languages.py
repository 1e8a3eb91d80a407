"""Tests of the kernel-languages comparison's own ops (further/kernel_languages.md) against plain
PyTorch: fused_bias_relu compiled by NVRTC (nvrtc_fused_bias_relu.py) and written in Helion
(helion_fused_bias_relu.py, where helion is installed: it is optional).

    python chapter5_extensions/kernel_languages/test_kernel_languages.py   # or with pytest

Without a GPU, NVRTC still compiles every instantiation (for sm_90), the NVRTC op's CPU kernel
(the PyTorch formula) is checked with opcheck, torch.compile and torch.export, and Helion's kernel
runs in Triton's interpreter; the GPU launches are skipped with the reason.
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import nvrtc_fused_bias_relu as nvrtc  # noqa: E402

# The ops under test, by way. Helion needs its package, and without a GPU Triton's interpreter,
# which must be chosen before anything imports triton (make test sets TRITON_INTERPRET=1 there).
OPS = {"nvrtc": nvrtc.fused_bias_relu}
if importlib.util.find_spec("helion") is None:
    HELION_SKIP = (
        "helion is not installed (optional: pip install --no-deps helion==1.5.0 filecheck)"
    )
elif (
    not torch.cuda.is_available()
    and "triton" in sys.modules
    and not os.environ.get("TRITON_INTERPRET")
):
    HELION_SKIP = "no CUDA device, and triton was imported before TRITON_INTERPRET=1 could be set"
else:
    import helion_fused_bias_relu

    HELION_SKIP = None
    OPS["helion"] = helion_fused_bias_relu.fused_bias_relu
WAY = pytest.mark.parametrize("way", list(OPS), ids=str)


def op(way: str, device: torch.device | str):
    """The way's op for tensors on `device`. Helion writes Triton, which runs CPU tensors only in
    its interpreter: chosen without a GPU, not on a GPU machine. (`device` is a torch.device, and
    torch.device("cpu") == "cpu" is False: compare its type.)"""
    cpu = torch.device(device).type == "cpu"
    if way == "helion" and cpu and not helion_fused_bias_relu.INTERPRETED:
        pytest.skip("Helion on CPU tensors needs Triton's interpreter; this run compiles for a GPU")
    return OPS[way]


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
@WAY
def test_matches_pytorch(way, device, shape, dtype):
    x = random(shape, dtype, device, seed=1)
    bias = random(shape[-1:], dtype, device, seed=2)
    y = op(way, device)(x, bias, 0.5)
    assert y.shape == x.shape and y.dtype == dtype and y.device == x.device
    torch.testing.assert_close(y, reference(x, bias, 0.5).to(dtype), **TOLERANCES[dtype])


@pytest.mark.parametrize(
    "view", ["transposed", "every_other_column", "one_element_in"], ids=lambda v: v
)
@WAY
def test_a_view_gives_what_its_copy_gives(way, device, view):
    base = random((64, 256), torch.float32, device, seed=3)
    x = {
        "transposed": base.t(),
        "every_other_column": base[:, ::2],
        "one_element_in": base.view(-1)[1:1025].view(4, 256),  # 4 bytes past a 16-byte boundary
    }[view]
    bias = random(x.shape[-1:], torch.float32, device, seed=4)
    torch.testing.assert_close(op(way, device)(x, bias, 0.5), reference(x, bias, 0.5).float())


@WAY
def test_nan_stays_nan(way, device):
    x = torch.tensor([[float("nan"), -1.0, 2.0, 3.0]], device=device)
    y = op(way, device)(x, torch.zeros(4, device=device), 1.0)
    assert y[0, 0].isnan() and y[0, 1:].tolist() == [0.0, 2.0, 3.0]


@WAY
def test_gradients_match_pytorch(way, device):
    x = random((33, 40), torch.float64, device, seed=5).requires_grad_()
    bias = random((40,), torch.float64, device, seed=6).requires_grad_()
    grad_y = random((33, 40), torch.float64, device, seed=7)
    got = torch.autograd.grad(op(way, device)(x, bias, 0.5), (x, bias), grad_y)
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
@WAY
def test_rejects_bad_input_with_a_message_naming_op_and_argument(
    way, device, x_shape, bias_shape, dtype, message
):
    x = torch.zeros(x_shape, dtype=dtype, device=device)
    bias = torch.zeros(bias_shape, dtype=dtype, device=device)
    with pytest.raises(RuntimeError, match=f"fused_bias_relu: {message}"):
        OPS[way](x, bias, 0.5)


@WAY
def test_opcheck(way, device):
    """Schema, fake kernel, autograd registration and dispatch, as chapter 5's ops."""
    x = random((16, 32), torch.float32, device, seed=8).requires_grad_()
    bias = random((32,), torch.float32, device, seed=9).requires_grad_()
    torch.library.opcheck(op(way, device), (x, bias, 0.5))


@WAY
def test_compile_with_fullgraph_and_export_see_one_op(way, device):
    """The launch is Python that Dynamo never traces: one node of the op, in both."""

    fn = op(way, device)

    def model(x, bias):
        return fn(x, bias, 0.5) * 2

    x = random((8, 64), torch.float32, device, seed=10)
    bias = random((64,), torch.float32, device, seed=11)
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    torch.testing.assert_close(compiled(x, bias), model(x, bias))
    program = torch.export.export(_Wrapper(fn), (x, bias))
    assert f"course_{way}.fused_bias_relu.default" in str(program.graph)
    torch.testing.assert_close(program.module()(x, bias), model(x, bias))


class _Wrapper(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x, bias):
        return self.op(x, bias, 0.5) * 2


@pytest.mark.cuda
@WAY
def test_a_cuda_graph_replays_the_launch(way):
    """Compiled and loaded before capture (cuModuleLoadData cannot run inside one); the launch
    goes to the current stream, so a graph records it and replays it on new data."""
    x = random((128, 512), torch.float32, "cuda", seed=12)
    bias = random((512,), torch.float32, "cuda", seed=13)
    fn = op(way, "cuda")
    fn(x, bias, 0.5)  # compile and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = fn(x, bias, 0.5)
    x.copy_(random((128, 512), torch.float32, "cuda", seed=14))
    graph.replay()
    torch.testing.assert_close(y, reference(x, bias, 0.5).float())


def test_helion_runs_here_or_says_why():
    """Helion is optional: a machine without it skips its cases, and says which and why."""
    if HELION_SKIP:
        pytest.skip(HELION_SKIP)
    assert "helion" in OPS


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
