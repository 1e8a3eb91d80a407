"""Checks for exercise ch5/autograd (the specification: read it before you write autograd.py).

    make check EX=ch5/autograd

The ops ch5_autograd::scaled_softsign and scaled_softsign_backward, their CPU kernels and fakes
are given. Your autograd formula must give PyTorch's gradients for x and scale (gradcheck in
float64), whatever layout the incoming gradient has, for any subset of inputs that require grad,
pass torch.library.opcheck, and compile with torch.compile(fullgraph=True), backward included.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from grading import CheckFailed, expect, expect_close

SOURCE = "autograd.py"  # the file you write, in this folder
GIVEN = ["autograd_kernels.cpp"]  # built and loaded first: the ops and their CPU kernels
LIBRARY = "ch5_autograd"  # the namespace autograd_kernels.cpp registers: torch.ops.ch5_autograd

# Without a registered formula, PyTorch warns at every backward through the op (the first check
# says so once, by name).
warnings.filterwarnings("ignore", message=".*an autograd kernel was not registered")

# The kernels compute in the tensor's dtype, the reference's autograd in another order: a few ulp
# of float32; grad_scale is a sum over rows (the kernel's in double), so it gets 10 times more.
TOLERANCE = dict(atol=1e-5, rtol=1e-5)
TOLERANCE_SUM = dict(atol=1e-4, rtol=1e-4)
# (x's shape): one row, odd sizes, three dimensions, no rows at all (grad_scale is then zeros).
SHAPES = [(1, 1), (7, 5), (3, 4, 9), (0, 6)]


def reference(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return scale * F.softsign(x)


def random(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def gradients(fn, x: torch.Tensor, scale: torch.Tensor, weight: torch.Tensor | None):
    """d loss / d (x, scale) for loss = (fn(x, scale) * weight).sum(), or fn(...).sum() if weight
    is None; None for an input that does not require grad."""
    x = x.detach().requires_grad_(x.requires_grad)
    scale = scale.detach().requires_grad_(scale.requires_grad)
    y = fn(x, scale)
    loss = y.sum() if weight is None else (y * weight).sum()
    needed = [t for t in (x, scale) if t.requires_grad]
    grads = iter(torch.autograd.grad(loss, needed, allow_unused=True))
    found = tuple(next(grads) if t.requires_grad else None for t in (x, scale))
    for t, g, name in zip((x, scale), found, ("x", "scale"), strict=True):
        if t.requires_grad and g is None:
            raise CheckFailed(f"no gradient reached {name}: is the autograd formula registered?")
    return found


def compare_gradients(got, expected, what: str) -> None:
    expect_close(got[0], expected[0], **TOLERANCE, what=f"{what}: grad of x")
    expect_close(got[1], expected[1], **TOLERANCE_SUM, what=f"{what}: grad of scale")


def check_autograd_formula_is_registered(ops):
    """scaled_softsign has an autograd kernel (register_autograd), not PyTorch's fallback"""
    # register_autograd registers for the Autograd alias key, which covers every device.
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    expect(
        has_kernel("ch5_autograd::scaled_softsign", "Autograd"),
        "no autograd formula for ch5_autograd::scaled_softsign: call "
        "torch.library.register_autograd (TODO 3)",
    )


def check_forward_matches_the_reference(ops):
    """the given forward kernel computes scale * x / (1 + |x|)"""
    for seed, shape in enumerate(SHAPES):
        x, scale = random(shape, torch.float32, seed), random(shape[-1:], torch.float32, seed + 50)
        expect_close(
            ops.scaled_softsign(x, scale), reference(x, scale), **TOLERANCE, what=f"shape {shape}"
        )


def check_gradients_match_the_reference(ops):
    """float32 gradients of x and scale match PyTorch's, for shapes 1, odd, 3-D and 0 rows"""
    for seed, shape in enumerate(SHAPES):
        x = random(shape, torch.float32, seed).requires_grad_()
        scale = random(shape[-1:], torch.float32, seed + 50).requires_grad_()
        weight = random(shape, torch.float32, seed + 100)
        compare_gradients(
            gradients(ops.scaled_softsign, x, scale, weight),
            gradients(reference, x, scale, weight),
            f"shape {shape}",
        )


def check_gradient_of_a_sum(ops):
    """y.sum().backward() works: its gradient is an expanded tensor, not a contiguous one"""
    x = random((6, 10), torch.float32, 20).requires_grad_()
    scale = random((10,), torch.float32, 21).requires_grad_()
    compare_gradients(
        gradients(ops.scaled_softsign, x, scale, None),
        gradients(reference, x, scale, None),
        "loss = y.sum()",
    )
    # A transposed gradient: y used through its transpose.
    weight = random((10, 6), torch.float32, 22)
    compare_gradients(
        gradients(lambda a, b: ops.scaled_softsign(a, b).t(), x, scale, weight),
        gradients(lambda a, b: reference(a, b).t(), x, scale, weight),
        "loss = (y.t() * w).sum()",
    )


def check_gradcheck_float64(ops):
    """torch.autograd.gradcheck passes in float64 (analytic gradients against finite differences)"""
    x = random((4, 5), torch.float64, 30).requires_grad_()
    scale = random((5,), torch.float64, 31).requires_grad_()
    expect(
        torch.autograd.gradcheck(ops.scaled_softsign, (x, scale), raise_exception=False),
        "gradcheck failed: the gradients differ from finite differences of the forward",
    )


def check_inputs_without_grad(ops):
    """only x, only scale, or neither requiring grad, and torch.no_grad(), all work"""
    x = random((5, 3), torch.float32, 40)
    scale = random((3,), torch.float32, 41)
    weight = random((5, 3), torch.float32, 42)
    for x_grad, scale_grad in [(True, False), (False, True)]:
        a, b = x.clone().requires_grad_(x_grad), scale.clone().requires_grad_(scale_grad)
        got = gradients(ops.scaled_softsign, a, b, weight)
        expected = gradients(reference, a, b, weight)
        what = "only x requires grad" if x_grad else "only scale requires grad"
        for g, e, name in zip(got, expected, ("x", "scale"), strict=True):
            if e is None:
                expect(g is None, f"{what}: {name} got a gradient")
            else:
                expect_close(g, e, **TOLERANCE_SUM, what=f"{what}: grad of {name}")
    y = ops.scaled_softsign(x, scale)
    expect(not y.requires_grad, "no input requires grad, but the output does")
    with torch.no_grad():
        y = ops.scaled_softsign(x.clone().requires_grad_(), scale)
    expect(not y.requires_grad, "under torch.no_grad() the output must not require grad")
    expect_close(y, reference(x, scale), **TOLERANCE, what="output under torch.no_grad()")


def check_opcheck(ops):
    """torch.library.opcheck passes (schema, fake, autograd registration, AOTAutograd's trace)"""
    op = torch.ops.ch5_autograd.scaled_softsign.default
    for seed, (shape, grads) in enumerate(
        [((5, 8), (True, True)), ((2, 3, 4), (True, False)), ((6, 1), (False, True))]
    ):
        x = random(shape, torch.float32, 50 + seed).requires_grad_(grads[0])
        scale = random(shape[-1:], torch.float32, 60 + seed).requires_grad_(grads[1])
        torch.library.opcheck(op, (x, scale))


class Layer(torch.nn.Module):
    """A linear layer followed by the op, with scale as a parameter: a model's use of it."""

    def __init__(self, op, features: int) -> None:
        super().__init__()
        self.op = op
        self.linear = torch.nn.Linear(features, features)
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 2.0, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(self.linear(x), self.scale).sum()


def check_compile_forward_and_backward(ops):
    """torch.compile(fullgraph=True) of a model with the op: loss and gradients match eager"""
    torch.manual_seed(0)
    model = Layer(ops.scaled_softsign, 12)
    x = random((6, 12), torch.float32, 70).requires_grad_()
    torch._dynamo.reset()
    # aot_eager: AOTAutograd traces forward and backward (your formula, with fake tensors) as for
    # inductor, then runs the graphs without generating code, which would take seconds.
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    loss, loss_compiled = model(x), compiled(x)
    expect_close(loss_compiled, loss, **TOLERANCE_SUM, what="loss")
    inputs = [x, *model.parameters()]
    names = ["x", *(name for name, _ in model.named_parameters())]
    expected = torch.autograd.grad(loss, inputs, allow_unused=True)
    got = torch.autograd.grad(loss_compiled, inputs, allow_unused=True)
    for g, e, name in zip(got, expected, names, strict=True):
        expect(g is not None and e is not None, f"no gradient reached {name}")
        expect_close(g, e, **TOLERANCE_SUM, what=f"gradient of {name}")
