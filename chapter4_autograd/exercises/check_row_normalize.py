"""Checks for exercise ch4/row_normalize (the specification: read it before you write
row_normalize.cpp).

    make check EX=ch4/row_normalize

Your op scales each row (the last dimension) of x to unit 2-norm, dividing by max(||x||, eps), as
torch.nn.functional.normalize(x, dim=-1, eps=eps) does; its backward, which you derive, must give
autograd's gradients of that function, for rows far from zero and for rows shorter than eps, in
float32 and float64, on the CPU and on a GPU.
"""

from __future__ import annotations

import torch
from grading import CheckFailed, expect, expect_close, expect_error
from torch.autograd.gradcheck import GradcheckError

SOURCE = "row_normalize.cpp"  # the file you write, in this folder
LIBRARY = "ch4_row_normalize"  # its ops: torch.ops.ch4_row_normalize.row_normalize

# float32: a norm (a sum of squares and a square root) computed in another order than torch's
# differs in the last bits, and y and the gradient inherit that. float64: the same, 2^-52 smaller.
TOLERANCE = {
    torch.float32: dict(atol=1e-6, rtol=1e-5),
    torch.float64: dict(atol=1e-12, rtol=1e-10),
}
# x of shape (..., n): no rows, rows of 0 or 1 element, a 1-d x, odd sizes, rank 3, large.
SHAPES = [(0, 5), (4, 0), (1, 1), (7,), (3, 5, 11), (1000, 33), (64, 1031)]
DEFAULT_EPS = 1e-12


def reference(x: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.nn.functional.normalize(x, p=2.0, dim=-1, eps=eps)


def random(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)


def with_short_rows(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x (rows, n) with row 1 scaled to a norm of 0.3 eps, row 2 to 0.9 eps and row 3 all zeros:
    rows that max(||x||, eps) divides by eps, not by their norm."""
    x = x.clone()
    for row, fraction in ((1, 0.3), (2, 0.9)):
        x[row] *= fraction * eps / x[row].norm()
    x[3] = 0
    return x


def gradients(fn, x: torch.Tensor, eps: float, grad_y: torch.Tensor):
    x = x.detach().requires_grad_()
    y = fn(x, eps)
    (grad_x,) = torch.autograd.grad(y, x, grad_y)
    return y, grad_x


def expect_gradient(got: torch.Tensor, x, eps: float, grad_y, what: str) -> None:
    """got against autograd through F.normalize; if it is wrong and equals the common mistake
    grad_y / max(||x||, eps), say so."""
    _, expected = gradients(reference, x, eps, grad_y)
    try:
        expect_close(got, expected, **TOLERANCE[x.dtype], what=what)
    except CheckFailed as e:
        norm = torch.linalg.vector_norm(x.detach(), dim=-1, keepdim=True).clamp_min(eps)
        mistake = grad_y / norm
        if got.shape == mistake.shape and torch.allclose(got, mistake, **TOLERANCE[x.dtype]):
            raise CheckFailed(
                f"{e}. Your grad_x is grad_y / ||x||: that treats the norm as a constant, but it "
                "depends on x too"
            ) from None
        raise


def gradcheck(fn, inputs: tuple, what: str) -> None:
    """torch.autograd.gradcheck, its verdict in one line: its own message prints both Jacobians."""
    try:
        torch.autograd.gradcheck(fn, inputs)
    except GradcheckError as e:
        first_line = str(e).strip().splitlines()[0].rstrip(",")
        raise CheckFailed(
            f"gradcheck, {what}: {first_line}: your backward disagrees with finite differences"
        ) from None


def check_forward_float32(ops, device):
    """float32 y matches torch's normalize for shapes 0, 1, odd, rank 3 and large"""
    for seed, shape in enumerate(SHAPES):
        x = random(shape, torch.float32, device, seed)
        expect_close(
            ops.row_normalize(x, DEFAULT_EPS),
            reference(x, DEFAULT_EPS),
            **TOLERANCE[torch.float32],
            what=f"shape {shape}",
        )


def check_forward_float64_and_short_rows(ops, device):
    """float64 y matches, rows shorter than eps are divided by eps, zero rows give 0 (not NaN)"""
    x = random((513, 7), torch.float64, device, seed=10)
    expect_close(ops.row_normalize(x), reference(x, DEFAULT_EPS), **TOLERANCE[torch.float64])
    for eps in (0.1, 1e-3):
        x = with_short_rows(random((50, 9), torch.float64, device, seed=11), eps)
        expect_close(
            ops.row_normalize(x, eps),
            reference(x, eps),
            **TOLERANCE[torch.float64],
            what=f"eps {eps}",
        )


def check_gradients_match_torch(ops, device):
    """grad_x matches autograd through torch's normalize (float32 and float64, random grad_y)"""
    for dtype in (torch.float32, torch.float64):
        x = random((1000, 33), dtype, device, seed=20)
        grad_y = random((1000, 33), dtype, device, seed=21)
        y, grad_x = gradients(ops.row_normalize, x, DEFAULT_EPS, grad_y)
        expect(y.grad_fn is not None, "row_normalize: the output has no grad_fn: call apply()")
        expect_gradient(grad_x, x, DEFAULT_EPS, grad_y, f"grad_x ({dtype})")


def check_gradients_of_rows_shorter_than_eps(ops, device):
    """rows shorter than eps (and zero rows) get torch's gradient there: grad_y / eps"""
    for dtype in (torch.float32, torch.float64):
        x = with_short_rows(random((50, 9), dtype, device, seed=22), 0.1)
        grad_y = random((50, 9), dtype, device, seed=23)
        _, grad_x = gradients(ops.row_normalize, x, 0.1, grad_y)
        expect_gradient(grad_x, x, 0.1, grad_y, f"grad_x ({dtype}, eps 0.1)")


def check_gradcheck_float64(ops, device):
    """torch.autograd.gradcheck passes in float64, for ordinary rows and rows shorter than eps"""
    x = random((5, 6), torch.float64, device, seed=30).requires_grad_()
    gradcheck(ops.row_normalize, (x, DEFAULT_EPS), "x (5, 6)")
    # eps 0.1: the short rows stay shorter than eps under gradcheck's nudges of 1e-6.
    x = with_short_rows(random((5, 6), torch.float64, device, seed=31), 0.1).requires_grad_()
    gradcheck(ops.row_normalize, (x, 0.1), "eps 0.1, rows 1 to 3 shorter than eps")
    x = random((2, 3, 4), torch.float64, device, seed=32).requires_grad_()
    gradcheck(ops.row_normalize, (x, DEFAULT_EPS), "x (2, 3, 4)")


def check_non_contiguous_inputs_and_gradients(ops, device):
    """a transposed x, a strided slice, and the stride-0 gradient of y.sum()"""
    base = random((40, 65), torch.float32, device, seed=40)
    for what, x in [("x.t()", base.t()), ("x[:, ::2]", base[:, ::2])]:
        grad_y = random(tuple(x.shape), torch.float32, device, seed=41)
        y, grad_x = gradients(ops.row_normalize, x, DEFAULT_EPS, grad_y)
        expect_close(y, reference(x, DEFAULT_EPS), **TOLERANCE[torch.float32], what=f"{what}: y")
        expect_gradient(grad_x, x, DEFAULT_EPS, grad_y, f"{what}: grad_x")
    # The gradient of y.sum() is one number expanded to y's shape: every stride 0.
    x = base.detach().requires_grad_()
    ops.row_normalize(x, DEFAULT_EPS).sum().backward()
    expect_gradient(x.grad, base, DEFAULT_EPS, torch.ones_like(base), "y.sum(): grad_x")


def check_without_gradients(ops, device):
    """x that does not require grad gives y with no graph and no error"""
    x = random((33, 5), torch.float32, device, seed=50)
    y = ops.row_normalize(x, DEFAULT_EPS)
    expect(y.grad_fn is None and not y.requires_grad, "y has a graph though x needs no gradient")
    expect_close(y, reference(x, DEFAULT_EPS), **TOLERANCE[torch.float32])


def check_refuses_double_backward(ops, device):
    """create_graph=True is refused with a message (a saved norm is a constant to autograd)"""
    x = random((4, 3), torch.float64, device, seed=60).requires_grad_()
    y = ops.row_normalize(x, DEFAULT_EPS)
    # The gradient reaching y is 2 y, which requires grad when a graph of the backward is recorded.
    expect_error(
        lambda: torch.autograd.grad((y * y).sum(), x, create_graph=True),
        r"row_normalize: double backward is not implemented",
    )


def check_rejects_bad_input(ops, device):
    """an integer or 0-dim x, and eps <= 0, are refused with messages that name the op"""
    expect_error(
        lambda: ops.row_normalize(torch.ones(3, 4, dtype=torch.int64, device=device), 1e-12),
        r"row_normalize: x must be a floating-point tensor",
    )
    expect_error(
        lambda: ops.row_normalize(torch.tensor(2.0, device=device), 1e-12),
        r"row_normalize: x must have at least 1 dimension",
    )
    expect_error(
        lambda: ops.row_normalize(torch.ones(3, 4, device=device), 0.0),
        r"row_normalize: eps must be positive",
    )
