"""Checks for exercise ch4/softplus (the specification: read it before you write softplus.cpp).

    make check EX=ch4/softplus

Your op must match torch.nn.functional.softplus(x, beta, threshold), forward and gradient, for
float32 and float64, any shape and layout, on the CPU and on a GPU; stay finite and accurate for
large and very negative x; and be recorded by autograd (and twice: its backward is ATen ops).
"""

from __future__ import annotations

import torch
from grading import CheckFailed, expect, expect_close, expect_error
from torch.autograd.gradcheck import GradcheckError

SOURCE = "softplus.cpp"  # the file you write, in this folder
LIBRARY = "ch4_softplus"  # its ops: torch.ops.ch4_softplus.softplus

# float32: exp, log1p and sigmoid may differ by an ulp or two from torch's own kernels, and a
# formula written another (correct) way by a few more. float64: the same, 2^-52 smaller.
TOLERANCE = {
    torch.float32: dict(atol=1e-6, rtol=1e-5),
    torch.float64: dict(atol=1e-12, rtol=1e-10),
}
SHAPES = [(0,), (1,), (7,), (3, 5, 11), (1000, 33), (2**18 + 3,)]
# (beta, threshold): torch's defaults, and a steeper curve with a low threshold, where the jump
# to y = x (and to a slope of exactly 1) is far from the smooth curve's values.
PARAMETERS = [(1.0, 20.0), (2.0, 1.0), (0.5, 5.0)]


def reference(x: torch.Tensor, beta: float, threshold: float) -> torch.Tensor:
    return torch.nn.functional.softplus(x, beta=beta, threshold=threshold)


def random(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return (4 * torch.randn(shape, generator=generator, dtype=torch.float64)).to(device, dtype)


def away_from_threshold(x: torch.Tensor, beta: float, threshold: float) -> torch.Tensor:
    """x moved off the threshold: y jumps there (log1p(exp(t)) / beta to t / beta), and a finite
    difference across a jump is no derivative."""
    near = (x * beta - threshold).abs() < 1e-3
    return torch.where(near, x + 0.01, x)


def gradients(fn, x: torch.Tensor, beta: float, threshold: float, grad_y: torch.Tensor):
    x = x.detach().requires_grad_()
    y = fn(x, beta, threshold)
    (grad_x,) = torch.autograd.grad(y, x, grad_y)
    return y, grad_x


def gradcheck(fn, inputs: tuple, what: str, second_order: bool = False) -> None:
    """torch.autograd.gradcheck (or gradgradcheck), its verdict in one line: its own message
    prints both Jacobians."""
    try:
        if second_order:
            torch.autograd.gradgradcheck(fn, inputs)
        else:
            torch.autograd.gradcheck(fn, inputs)
    except GradcheckError as e:
        first_line = str(e).strip().splitlines()[0].rstrip(",")
        verdict = (
            "the gradient of your backward disagrees with finite differences (does it read a "
            "tensor computed inside forward?)"
            if second_order
            else "your backward disagrees with finite differences"
        )
        name = "gradgradcheck" if second_order else "gradcheck"
        raise CheckFailed(f"{name}, {what}: {first_line}: {verdict}") from None


def check_forward_float32(ops, device):
    """float32 forward matches torch for shapes 0, 1, odd and large, several beta and threshold"""
    for seed, shape in enumerate(SHAPES):
        for beta, threshold in PARAMETERS:
            x = random(shape, torch.float32, device, seed)
            expect_close(
                ops.softplus(x, beta, threshold),
                reference(x, beta, threshold),
                **TOLERANCE[torch.float32],
                what=f"shape {shape}, beta {beta}, threshold {threshold}",
            )


def check_forward_float64_and_defaults(ops, device):
    """float64 forward matches torch, and beta and threshold default to 1 and 20"""
    x = random((513, 7), torch.float64, device, seed=10)
    expect_close(ops.softplus(x, 2.0, 1.0), reference(x, 2.0, 1.0), **TOLERANCE[torch.float64])
    expect_close(
        ops.softplus(x), reference(x, 1.0, 20.0), **TOLERANCE[torch.float64], what="defaults"
    )


def check_non_contiguous_inputs(ops, device):
    """a transposed view and a strided slice give torch's values, forward and gradient"""
    base = random((64, 257), torch.float32, device, seed=11)
    for what, x in [("x.t()", base.t()), ("x[:, ::3]", base[:, ::3])]:
        grad_y = random(tuple(x.shape), torch.float32, device, seed=12)
        y, grad_x = gradients(ops.softplus, x, 2.0, 1.0, grad_y)
        y_ref, grad_ref = gradients(reference, x, 2.0, 1.0, grad_y)
        expect_close(y, y_ref, **TOLERANCE[torch.float32], what=f"{what}: y")
        expect_close(grad_x, grad_ref, **TOLERANCE[torch.float32], what=f"{what}: grad_x")


def check_gradient_matches_torch(ops, device):
    """the gradient matches torch's autograd (float32 and float64, several beta and threshold)"""
    for dtype in (torch.float32, torch.float64):
        for seed, (beta, threshold) in enumerate(PARAMETERS):
            x = away_from_threshold(random((1000, 33), dtype, device, seed), beta, threshold)
            grad_y = random((1000, 33), dtype, device, seed + 100)
            y, grad_x = gradients(ops.softplus, x, beta, threshold, grad_y)
            expect(y.grad_fn is not None, "softplus: the output has no grad_fn: call apply()")
            _, grad_ref = gradients(reference, x, beta, threshold, grad_y)
            expect_close(
                grad_x,
                grad_ref,
                **TOLERANCE[dtype],
                what=f"grad_x ({dtype}, beta {beta}, threshold {threshold})",
            )


def check_gradcheck_float64(ops, device):
    """torch.autograd.gradcheck passes in float64 (finite differences agree with your backward)"""
    for seed, (beta, threshold) in enumerate(PARAMETERS):
        x = away_from_threshold(random((4, 7), torch.float64, device, seed + 20), beta, threshold)
        x.requires_grad_()
        gradcheck(ops.softplus, (x, beta, threshold), f"beta {beta}, threshold {threshold}")


def check_large_inputs(ops, device):
    """large x gives y = x and slope 1, not inf or NaN (exp(x) overflows there)"""
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor([-1e4, -100.0, -30.0, 30.0, 100.0, 1e3, 1e4], dtype=dtype, device=device)
        grad_y = torch.ones_like(x)
        y, grad_x = gradients(ops.softplus, x, 1.0, 20.0, grad_y)
        expect(bool(torch.isfinite(y).all()), f"{dtype}: y has inf or NaN for x = {x.tolist()}")
        expect(bool(torch.isfinite(grad_x).all()), f"{dtype}: grad_x has inf or NaN for large x")
        y_ref, grad_ref = gradients(reference, x, 1.0, 20.0, grad_y)
        expect_close(y, y_ref, **TOLERANCE[dtype], what=f"{dtype} y")
        expect_close(grad_x, grad_ref, **TOLERANCE[dtype], what=f"{dtype} grad_x")


def check_very_negative_inputs(ops, device):
    """for x in [-20, -10], tiny y and slope keep full relative precision (log1p, not log(1 + .))"""
    for dtype in (torch.float32, torch.float64):
        # y and the slope are 2e-9 to 5e-5 there: only a relative tolerance sees them.
        x = torch.linspace(-20.0, -10.0, 41, dtype=dtype, device=device)
        y, grad_x = gradients(ops.softplus, x, 1.0, 20.0, torch.ones_like(x))
        y_ref, grad_ref = gradients(reference, x, 1.0, 20.0, torch.ones_like(x))
        rtol = TOLERANCE[dtype]["rtol"]
        expect_close(y, y_ref, atol=0, rtol=rtol, what=f"{dtype} y")
        expect_close(grad_x, grad_ref, atol=0, rtol=rtol, what=f"{dtype} grad_x")


def check_without_gradients(ops, device):
    """x that does not require grad, and torch.no_grad(), give y with no graph and no error"""
    x = random((33,), torch.float32, device, seed=30)
    y = ops.softplus(x, 1.0, 20.0)
    expect(y.grad_fn is None and not y.requires_grad, "y has a graph though x needs no gradient")
    expect_close(y, reference(x, 1.0, 20.0), **TOLERANCE[torch.float32])
    with torch.no_grad():
        y = ops.softplus(x.requires_grad_(), 1.0, 20.0)
    expect(y.grad_fn is None, "under torch.no_grad() y must have no grad_fn")


def check_double_backward(ops, device):
    """the gradient is itself differentiable (gradgradcheck), as a backward of ATen ops is

    With create_graph=True autograd records the ATen ops your backward calls, so the gradient of
    the gradient comes for free, as long as the backward reads inputs or outputs of forward: a
    tensor computed inside forward and saved is a constant to autograd. A backward of hand-written
    loops would have to refuse instead.
    """
    x = away_from_threshold(random((3, 5), torch.float64, device, seed=40), 2.0, 1.0)
    x.requires_grad_()
    gradcheck(ops.softplus, (x, 2.0, 1.0), "beta 2, threshold 1", second_order=True)


def check_rejects_bad_input(ops, device):
    """an integer tensor, and beta = 0, are refused with messages that name the op"""
    x = torch.arange(10, device=device)
    expect_error(lambda: ops.softplus(x, 1.0, 20.0), r"softplus: x must be a floating-point tensor")
    x = torch.ones(3, device=device)
    expect_error(lambda: ops.softplus(x, 0.0, 20.0), r"softplus: beta must not be 0")
