"""Tests of triton_fused_bias_relu.py, the Triton fused_bias_relu, against plain PyTorch.

    python chapter5_extensions/test_triton.py          # or: pytest chapter5_extensions/test_triton.py

On a CUDA GPU the kernels are compiled; without one, triton_fused_bias_relu runs them in Triton's
interpreter (it sets TRITON_INTERPRET=1 itself, before it imports triton), in this process, on CPU
tensors: the same kernels, slowly, with small shapes. What the interpreter cannot do (torch.compile,
the fake-tensor half of opcheck) is skipped with the reason.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# Looked for, not imported: triton_fused_bias_relu must be the first to import triton (below).
if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed (torch's CUDA wheels bring it)", allow_module_level=True)
# Imported at collection, before any test runs: had something imported triton before (as
# torch._inductor does), the interpreter could no longer be switched on, and the tests say so.
import triton_fused_bias_relu as tfbr  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ON_GPU = DEVICE == "cuda" and not tfbr.INTERPRETED
needs_kernels = pytest.mark.skipif(
    DEVICE == "cpu" and not tfbr.INTERPRETED,
    reason="no CUDA device, and triton was imported before TRITON_INTERPRET=1 could be set "
    "(run this file alone, or with TRITON_INTERPRET=1 in the environment)",
)
needs_compiled_kernels = pytest.mark.skipif(
    not ON_GPU,
    reason="needs Triton kernels compiled for a CUDA device: under the interpreter triton.jit "
    "returns an InterpretedFunction, which wrap_triton refuses, so nothing can trace the launch",
)
pytestmark = needs_kernels

# One rounding of the output dtype (the kernels compute half types in float32); the bias
# gradient, a sum in another order than the reference's, gets rows * 2^-22 more (test_chapter5's).
TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}
# The interpreter runs each program in numpy: small shapes on the CPU, bigger ones on a GPU.
# (rows, cols): one column, odd widths, a width past one tile (256), several row splits (>256 rows),
# 0 rows, a 1-D and a 3-D input.
SHAPES = [(5, 1), (7, 33), (2, 520), (600, 6), (0, 16), (16,), (2, 3, 40)]
if ON_GPU:
    SHAPES += [(3, 4099), (2, 1100), (1024, 1024), (4097, 1023), (70_000, 3)]
# The interpreter hands a kernel a Python float as float32, whatever its annotation (scale:
# tl.float64 in the kernels), so a float64 input would meet a rounded 0.7 there; 0.75 is exact.
SCALE = 0.75 if tfbr.INTERPRETED else 0.7


def reference_fused_bias_relu(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.relu(x.double() * scale + bias.double())


def random(shape, dtype, generator, requires_grad=False) -> torch.Tensor:
    t = torch.randn(shape, generator=generator, dtype=torch.float64).to(DEVICE, dtype)
    return t.requires_grad_(requires_grad)


def away_from_the_kink(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """x moved so that no x * scale + bias is within 0.05 of 0, where relu bends and a low
    precision forward and the float64 reference may round to different sides."""
    with torch.no_grad():
        z = x.double() * scale + bias.double()
        x.copy_(x.double() + torch.where(z.abs() < 0.05, 0.1 * torch.sign(z + 1e-30) / scale, 0))
    return x


def check_against_reference(x_base, x, bias, grad_y, scale=SCALE):
    """Forward, grad_x and grad_bias of the Triton op against the float64 reference."""
    dtype, tol = x.dtype, TOLERANCES[x.dtype]
    y = tfbr.fused_bias_relu(x, bias, scale)
    assert y.is_contiguous() and y.dtype == dtype and y.shape == x.shape
    torch.testing.assert_close(y, reference_fused_bias_relu(x, bias, scale).to(dtype), **tol)
    grads = torch.autograd.grad(y, (x_base, bias), grad_y)
    grads_ref = torch.autograd.grad(
        reference_fused_bias_relu(x, bias, scale), (x_base, bias), grad_y
    )
    assert grads[1].dtype == dtype  # summed in float32 for half types, returned in x's dtype
    torch.testing.assert_close(grads[0], grads_ref[0].to(dtype), **tol)
    rows = x.numel() // max(x.shape[-1], 1)
    sum_tol = dict(rtol=tol["rtol"], atol=tol["atol"] + rows * 2**-22)
    torch.testing.assert_close(grads[1], grads_ref[1].to(dtype), **sum_tol)


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_forward_and_gradients_match_pytorch(shape, dtype, generator):
    x = random(shape, dtype, generator, requires_grad=True)
    bias = random(shape[-1:], dtype, generator, requires_grad=True)
    away_from_the_kink(x, bias, SCALE)
    check_against_reference(x, x, bias, random(shape, dtype, generator))


@pytest.mark.parametrize("view", ["transposed", "every_other_column"])
def test_a_view_is_made_contiguous_and_gives_the_same_result(view, generator):
    base = random((40, 34), torch.float32, generator, requires_grad=True)
    x = base.t() if view == "transposed" else base[:, ::2]
    assert not x.is_contiguous()
    bias = random(x.shape[-1:], torch.float32, generator, requires_grad=True)
    check_against_reference(base, x, bias, random(x.shape, torch.float32, generator))


def test_an_expanded_gradient_is_accepted(generator):
    """y.sum()'s backward hands over one value expanded with stride 0."""
    x = random((9, 20), torch.float32, generator, requires_grad=True)
    bias = random((20,), torch.float32, generator, requires_grad=True)
    grad_x, grad_bias = torch.autograd.grad(tfbr.fused_bias_relu(x, bias, 1.5).sum(), (x, bias))
    active = (reference_fused_bias_relu(x, bias, 1.5) > 0).float()
    torch.testing.assert_close(grad_x, active * 1.5)
    torch.testing.assert_close(grad_bias, active.sum(0))


def test_no_rows_give_an_empty_output_and_a_zero_bias_gradient(generator):
    x = random((0, 16), torch.float32, generator, requires_grad=True)
    bias = random((16,), torch.float32, generator, requires_grad=True)
    y = tfbr.fused_bias_relu(x, bias, 0.5)
    grad_x, grad_bias = torch.autograd.grad(y, (x, bias), torch.ones_like(y))
    assert y.shape == (0, 16) and grad_x.shape == (0, 16)
    assert torch.equal(grad_bias, torch.zeros(16, device=DEVICE))


def test_nan_stays_nan_and_passes_its_gradient_on():
    """As the C++ kernels: relu(NaN) is NaN, and the backward zeroes only where y <= 0."""
    x = torch.tensor([[float("nan"), -1.0, 2.0]], device=DEVICE, requires_grad=True)
    bias = torch.zeros(3, device=DEVICE, requires_grad=True)
    y = tfbr.fused_bias_relu(x, bias, 1.0)
    assert y[0, 0].isnan() and y[0, 1] == 0 and y[0, 2] == 2
    grad_x, grad_bias = torch.autograd.grad(y, (x, bias), torch.ones_like(y))
    assert torch.equal(grad_x, torch.tensor([[1.0, 0.0, 1.0]], device=DEVICE))
    assert grad_bias.tolist() == [1.0, 0.0, 1.0]


def test_bias_gradient_is_the_same_bits_on_every_run(generator):
    """No atomics: the partial sums are added in a fixed order, so a rerun is bit for bit equal."""
    shape = (70_000, 96) if ON_GPU else (600, 6)
    grad_y = random(shape, torch.float32, generator)
    y = torch.relu(random(shape, torch.float32, generator))
    first = tfbr.fused_bias_relu_backward(grad_y, y, 0.5)
    for _ in range(3):
        again = tfbr.fused_bias_relu_backward(grad_y, y, 0.5)
        assert torch.equal(again[0], first[0]) and torch.equal(again[1], first[1])


def test_only_the_gradients_asked_for_are_returned(generator):
    x = random((6, 10), torch.float32, generator)
    bias = random((10,), torch.float32, generator, requires_grad=True)
    (grad_bias,) = torch.autograd.grad(tfbr.fused_bias_relu(x, bias, 0.5).sum(), (bias,))
    assert grad_bias.shape == (10,)


def test_gradcheck_in_float64(generator):
    x = random((3, 5), torch.float64, generator, requires_grad=True)
    bias = random((5,), torch.float64, generator, requires_grad=True)
    away_from_the_kink(x, bias, SCALE)  # finite differences across the kink would disagree
    assert torch.autograd.gradcheck(lambda x, b: tfbr.fused_bias_relu(x, b, SCALE), (x, bias))


def test_double_backward_is_refused_with_the_op_named(generator):
    x = random((4, 8), torch.float64, generator, requires_grad=True)
    bias = random((8,), torch.float64, generator, requires_grad=True)
    y = tfbr.fused_bias_relu(x, bias, 0.7)
    (grad_x,) = torch.autograd.grad(y.sum(), (x,), create_graph=True)
    with pytest.raises(RuntimeError, match="fused_bias_relu_backward: double backward"):
        grad_x.sum().backward()


# ---- bad input: refused with the op, the argument, expected and got ---------------------------


def test_rejects_a_bias_of_the_wrong_length():
    with pytest.raises(RuntimeError, match=r"fused_bias_relu: bias must have shape \(8,\).*\(7,\)"):
        tfbr.fused_bias_relu(torch.ones(2, 8, device=DEVICE), torch.ones(7, device=DEVICE), 1.0)


def test_rejects_a_bias_of_another_dtype():
    with pytest.raises(RuntimeError, match="x and bias must have the same dtype"):
        tfbr.fused_bias_relu(
            torch.ones(2, 8, device=DEVICE), torch.ones(8, device=DEVICE).double(), 1.0
        )


def test_rejects_an_integer_tensor():
    with pytest.raises(RuntimeError, match="x must be a floating-point tensor"):
        tfbr.fused_bias_relu(
            torch.ones(2, 8, dtype=torch.int32, device=DEVICE),
            torch.ones(8, dtype=torch.int32, device=DEVICE),
            1.0,
        )


def test_rejects_a_0_dim_input():
    with pytest.raises(RuntimeError, match="x must have at least 1 dimension"):
        tfbr.fused_bias_relu(torch.tensor(1.0, device=DEVICE), torch.ones(1, device=DEVICE), 1.0)


@needs_compiled_kernels
def test_rejects_cpu_tensors_when_compiled_for_the_gpu():
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor, got cpu"):
        tfbr.fused_bias_relu(torch.ones(2, 8), torch.ones(8), 1.0)


# ---- what PyTorch sees: opcheck and torch.compile ---------------------------------------------

# Every test opcheck has, and which need the launch traced: test_faketensor and
# test_aot_dispatch_dynamic run the op on fake tensors (no data), which only wrap_triton can do.
OPCHECK_TESTS = {
    "test_schema": False,
    "test_autograd_registration": False,
    "test_faketensor": True,
    "test_aot_dispatch_dynamic": True,
}


@pytest.mark.parametrize("test_util", list(OPCHECK_TESTS))
@pytest.mark.parametrize("op", ["fused_bias_relu", "fused_bias_relu_backward"])
def test_opcheck(op, test_util, generator):
    if OPCHECK_TESTS[test_util] and not ON_GPU:
        pytest.skip(
            f"{test_util} runs the op on fake tensors, which needs the launch traced by "
            "wrap_triton, and wrap_triton refuses the interpreter's kernels (no CUDA device)"
        )
    x = random((5, 40), torch.float32, generator, requires_grad=True)
    if op == "fused_bias_relu":
        args = (x, random((40,), torch.float32, generator, requires_grad=True), 0.5)
    else:
        args = (random((5, 40), torch.float32, generator), torch.relu(x.detach()), 0.5)
    torch.library.opcheck(getattr(torch.ops.course_triton, op).default, args, test_utils=test_util)


@needs_compiled_kernels
@pytest.mark.slow
def test_compile_with_fullgraph_sees_the_kernels_and_matches_eager(generator):
    from torch._inductor.utils import run_and_get_code

    x = random((256, 384), torch.float32, generator, requires_grad=True)
    bias = random((384,), torch.float32, generator, requires_grad=True)
    grad_y = random((256, 384), torch.float32, generator)

    def forward(x, bias):
        return tfbr.fused_bias_relu(x * 2.0, bias, 0.5)

    def forward_and_backward(fn):
        y = fn(x, bias)
        return (y, *torch.autograd.grad(y, (x, bias), grad_y))

    torch._dynamo.reset()
    compiled = torch.compile(forward, fullgraph=True)  # an error, not a graph break, if it can't
    # The forward's code is generated at the first call, the backward's at the first backward
    # (AOTAutograd traces both through the op's register_autograd formula).
    got, codes = run_and_get_code(forward_and_backward, compiled)
    want = forward_and_backward(forward)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-4)
    # Inductor's code launches our kernels by name: it traced into the op, not around it.
    code = "\n".join(codes)
    for kernel in ("fused_bias_relu_kernel", "fused_bias_relu_backward_kernel", "sum_partials"):
        assert kernel in code, f"{kernel} is not in the code torch.compile generated"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-rs"]))
