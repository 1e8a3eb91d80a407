"""Checks for exercise ch4/bias_tanh (the specification: read it before you write bias_tanh.cpp).

    make check EX=ch4/bias_tanh

Your op computes y = tanh(x + bias) for x of shape (..., C) and bias of shape (C,), on the CPU,
in every floating dtype, and is differentiable in both: grad_x = grad_y (1 - y^2), grad_bias its
sum over all rows, summed in float (double for float64). It saves only y, refuses a double
backward and bad input by message, and should compute only the gradients asked for (the checks
test that each one alone is right; they cannot see work done for nothing).
"""

from __future__ import annotations

import torch
from grading import CheckFailed, expect, expect_close, expect_error, needs_cuda
from torch.autograd.gradcheck import GradcheckError

SOURCE = "bias_tanh.cpp"  # the file you write, in this folder
LIBRARY = "ch4_bias_tanh"  # its ops: torch.ops.ch4_bias_tanh.bias_tanh

# y and grad_x, per dtype, against a float64 computation rounded once: float32 and float64 allow
# for tanh's last-bit differences between libraries, the half types for one rounding of their 11
# or 8 significant bits. grad_bias in float32 sums up to a thousand terms in another order than
# torch's sum: a few units in the last place of the sum, hence the larger atol.
TOLERANCE = {
    torch.float32: dict(atol=1e-6, rtol=1e-5),
    torch.float64: dict(atol=1e-12, rtol=1e-10),
    torch.float16: dict(atol=1e-5, rtol=1e-3),
    torch.bfloat16: dict(atol=1e-5, rtol=1.6e-2),
}
BIAS_TOLERANCE = {**TOLERANCE, torch.float32: dict(atol=1e-4, rtol=1e-5)}
# x of shape (..., C): 0 rows, one element, a 1-d x, odd sizes, rank 3, many rows, long rows.
SHAPES = [(0, 5), (1, 1), (7,), (3, 5, 11), (1000, 33), (64, 1031)]


def random(shape: tuple[int, ...], dtype: torch.dtype, seed: int, scale: float = 1.0):
    generator = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(shape, generator=generator, dtype=torch.float64)).to(dtype)


def with_grads(x: torch.Tensor, bias: torch.Tensor, grad_x: bool = True, grad_bias: bool = True):
    return x.detach().requires_grad_(grad_x), bias.detach().requires_grad_(grad_bias)


def reference(x: torch.Tensor, bias: torch.Tensor, grad_y: torch.Tensor):
    """y, grad_x and grad_bias in float64 from the inputs, each rounded once to x's dtype. The
    gradients start from y rounded to that dtype, the y the op saves (near |y| = 1, 1 - y^2
    depends on y's last bits), with tanh's backward as PyTorch writes it: grad_y (1 - y^2)."""
    y = torch.tanh(x.double() + bias.double()).to(x.dtype)
    grad_x = grad_y.double() * (1 - y.double() ** 2)
    grad_bias = grad_x.reshape(-1, x.shape[-1]).sum(0)
    return y, grad_x.to(x.dtype), grad_bias.to(x.dtype)


def run(ops, x: torch.Tensor, bias: torch.Tensor, grad_y: torch.Tensor):
    """y, grad_x and grad_bias from the op (None for an input that does not require grad)."""
    y = ops.bias_tanh(x, bias)
    inputs = [t for t in (x, bias) if t.requires_grad]
    grads = iter(torch.autograd.grad(y, inputs, grad_y)) if inputs else iter(())
    return (
        y,
        next(grads) if x.requires_grad else None,
        next(grads) if bias.requires_grad else None,
    )


def expect_op_matches(ops, x, bias, grad_y, what: str) -> None:
    dtype = x.dtype
    y, grad_x, grad_bias = run(ops, *with_grads(x, bias), grad_y)
    y_ref, grad_x_ref, grad_bias_ref = reference(x, bias, grad_y)
    expect_close(y, y_ref, **TOLERANCE[dtype], what=f"{what}: y")
    expect_close(grad_x, grad_x_ref, **TOLERANCE[dtype], what=f"{what}: grad_x")
    expect_close(grad_bias, grad_bias_ref, **BIAS_TOLERANCE[dtype], what=f"{what}: grad_bias")


def gradcheck(fn, inputs: tuple, what: str) -> None:
    """torch.autograd.gradcheck, its verdict in one line: its own message prints both Jacobians."""
    try:
        torch.autograd.gradcheck(fn, inputs)
    except GradcheckError as e:
        first_line = str(e).strip().splitlines()[0].rstrip(",")
        raise CheckFailed(
            f"gradcheck, {what}: {first_line}: your backward disagrees with finite differences"
        ) from None


def check_forward_and_gradients_float32(ops):
    """float32 y, grad_x and grad_bias match plain PyTorch for shapes 0, 1, odd, rank 3 and large"""
    for seed, shape in enumerate(SHAPES):
        x = random(shape, torch.float32, seed)
        bias = random(shape[-1:], torch.float32, seed + 100)
        grad_y = random(shape, torch.float32, seed + 200)
        expect_op_matches(ops, x, bias, grad_y, f"shape {shape}")


def check_gradients_match_plain_pytorch_autograd(ops):
    """float32 gradients match autograd through torch.tanh(x + bias) in float32"""
    x, bias = with_grads(random((1000, 33), torch.float32, 30), random((33,), torch.float32, 31))
    grad_y = random((1000, 33), torch.float32, 32)
    _, grad_x, grad_bias = run(ops, x, bias, grad_y)
    grad_x_ref, grad_bias_ref = torch.autograd.grad(torch.tanh(x + bias), (x, bias), grad_y)
    expect_close(grad_x, grad_x_ref, **TOLERANCE[torch.float32], what="grad_x")
    expect_close(grad_bias, grad_bias_ref, **BIAS_TOLERANCE[torch.float32], what="grad_bias")


def check_forward_and_gradients_other_dtypes(ops):
    """float64, float16 and bfloat16 match (the half types computed in float, rounded once)"""
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        x, bias = random((513, 37), dtype, 1), random((37,), dtype, 2)
        expect_op_matches(ops, x, bias, random((513, 37), dtype, 3), str(dtype))


def check_large_inputs_saturate(ops):
    """large |x + bias| gives y = +-1 and gradient 0, never NaN"""
    x = torch.tensor([[-1e4, -50.0, -20.0, 20.0, 50.0, 1e4]])
    bias = torch.tensor([0.0, 1.0, -1.0, 1.0, -1.0, 0.0])
    expect_op_matches(ops, x, bias, torch.ones_like(x), "large x")


def check_gradcheck_float64(ops):
    """torch.autograd.gradcheck passes in float64, for x and bias together"""
    x, bias = with_grads(random((6, 5), torch.float64, 4), random((5,), torch.float64, 5))
    gradcheck(ops.bias_tanh, (x, bias), "x (6, 5)")
    x, bias = with_grads(random((2, 3, 4), torch.float64, 6), random((4,), torch.float64, 7))
    gradcheck(ops.bias_tanh, (x, bias), "x (2, 3, 4)")


def check_non_contiguous_inputs_and_gradients(ops):
    """a transposed x, a strided bias, and the stride-0 gradient of y.sum()"""
    base = random((40, 64), torch.float32, 8)
    bias = random((80,), torch.float32, 9)[::2]
    x = base.t()  # (64, 40), not contiguous
    expect_op_matches(ops, x, bias, random((64, 40), torch.float32, 10), "x.t(), bias[::2]")
    # The gradient of y.sum() is torch.ones(()) expanded to y's shape: every stride 0.
    x, bias = with_grads(random((300, 7), torch.float32, 11), random((7,), torch.float32, 12))
    ops.bias_tanh(x, bias).sum().backward()
    _, grad_x_ref, grad_bias_ref = reference(x, bias, torch.ones(300, 7))
    expect_close(x.grad, grad_x_ref, **TOLERANCE[torch.float32], what="y.sum(): grad_x")
    expect_close(bias.grad, grad_bias_ref, **BIAS_TOLERANCE[torch.float32], what="y.sum(): bias")


def check_bias_gradient_sums_in_float(ops):
    """float16 and bfloat16 bias gradients of 5000 rows are summed in float, not the half type"""
    for dtype in (torch.float16, torch.bfloat16):
        # tanh'(~0) is 1: each column's gradient is about 5000, where a float16 running sum stops
        # growing at 2048 (2048 + 1 rounds back to 2048) and a bfloat16 one at 256.
        x, bias = 0.01 * random((5000, 8), dtype, 13), torch.zeros(8, dtype=dtype)
        expect_op_matches(ops, x, bias, torch.ones(5000, 8, dtype=dtype), str(dtype))


def check_only_bias_needs_a_gradient(ops):
    """x that does not require grad: bias.grad is right (and x gets none)"""
    x, bias = with_grads(random((50, 9), torch.float32, 14), random((9,), torch.float32, 15), False)
    grad_y = random((50, 9), torch.float32, 16)
    _, grad_x, grad_bias = run(ops, x, bias, grad_y)
    expect(grad_x is None and x.grad is None, "x does not require grad but got one")
    _, _, grad_bias_ref = reference(x, bias, grad_y)
    expect_close(grad_bias, grad_bias_ref, **BIAS_TOLERANCE[torch.float32], what="grad_bias")


def check_only_x_needs_a_gradient(ops):
    """a frozen bias (requires_grad=False): x.grad is right, and backward() does not fail"""
    x, bias = with_grads(random((50, 9), torch.float32, 17), random((9,), torch.float32, 18))
    bias.requires_grad_(False)
    grad_y = random((50, 9), torch.float32, 19)
    ops.bias_tanh(x, bias).backward(grad_y)
    expect(bias.grad is None, "bias does not require grad but got one")
    _, grad_x_ref, _ = reference(x, bias, grad_y)
    expect_close(x.grad, grad_x_ref, **TOLERANCE[torch.float32], what="x.grad")
    # And the gradient of bias alone, with x requiring grad: only needs_input_grad(1) is set.
    x, bias = with_grads(x, bias)
    (grad_bias,) = torch.autograd.grad(ops.bias_tanh(x, bias), bias, grad_y)
    _, _, grad_bias_ref = reference(x, bias, grad_y)
    expect_close(grad_bias, grad_bias_ref, **BIAS_TOLERANCE[torch.float32], what="grad_bias alone")


def check_saves_only_the_output(ops):
    """autograd keeps one tensor for the backward: y itself (not x)"""
    saved: list[torch.Tensor] = []
    x, bias = with_grads(random((16, 8), torch.float32, 20), random((8,), torch.float32, 21))
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = ops.bias_tanh(x, bias)
    expect(len(saved) == 1, f"the op saved {len(saved)} tensors for the backward; save only y")
    expect(saved[0].data_ptr() == y.data_ptr(), "the saved tensor is not y: save the output")


def check_refuses_double_backward(ops):
    """create_graph=True is refused with a message (a loop's backward cannot be differentiated)"""
    x, bias = with_grads(random((4, 3), torch.float64, 22), random((3,), torch.float64, 23))
    y = ops.bias_tanh(x, bias)
    # The gradient reaching y is 2 y, which requires grad when a graph of the backward is recorded.
    expect_error(
        lambda: torch.autograd.grad((y * y).sum(), x, create_graph=True),
        r"bias_tanh: double backward is not implemented",
    )


def check_rejects_bad_input(ops):
    """a wrong bias shape, mixed dtypes, integer or 0-dim x are refused by messages"""
    x = torch.ones(3, 4)
    expect_error(lambda: ops.bias_tanh(x, torch.ones(5)), r"bias_tanh: bias must have shape \(4,\)")
    expect_error(
        lambda: ops.bias_tanh(x, torch.ones(1, 4)), r"bias_tanh: bias must have shape \(4,\)"
    )
    expect_error(
        lambda: ops.bias_tanh(x, torch.ones(4, dtype=torch.float64)),
        r"bias_tanh: x and bias must have the same dtype",
    )
    expect_error(
        lambda: ops.bias_tanh(
            torch.ones(3, 4, dtype=torch.int32), torch.ones(4, dtype=torch.int32)
        ),
        r"bias_tanh: x must be a floating-point tensor",
    )
    expect_error(
        lambda: ops.bias_tanh(torch.tensor(1.0), torch.ones(1)),
        r"bias_tanh: x must have at least 1 dimension",
    )


def check_rejects_cuda_tensors(ops):
    """a CUDA tensor is refused with a message (this exercise's loops run on the CPU)"""
    needs_cuda()
    x, bias = torch.ones(3, 4, device="cuda"), torch.ones(4, device="cuda")
    expect_error(lambda: ops.bias_tanh(x, bias), r"bias_tanh: x and bias must be CPU tensors")
