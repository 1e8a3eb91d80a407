"""Checks for exercise ch5/schema (the specification: read it before you write schema.cpp).

    make check EX=ch5/schema

Your library must declare ch5_schema::scaled_add with exactly the schema below, run the given
CPU kernel for CPU tensors and your meta kernel for meta tensors, and pass torch.library.opcheck.
"""

from __future__ import annotations

import torch
from grading import CheckFailed, expect, expect_close, expect_error

SOURCE = "schema.cpp"  # the file you write, in this folder
LIBRARY = "ch5_schema"  # its ops: torch.ops.ch5_schema.scaled_add
SCHEMA = "ch5_schema::scaled_add(Tensor x, Tensor y, float alpha) -> Tensor"

# The kernel and the reference both compute x + alpha * y with one rounding of the product and
# one of the sum, but a compiler may fuse them into one fma: allow a few ulp of the output dtype.
TOLERANCE = {
    torch.float32: dict(atol=1e-6, rtol=1e-6),
    torch.float64: dict(atol=1e-14, rtol=1e-14),
}
SHAPES = [(0,), (1,), (7,), (3, 5, 11), (1000, 33)]


def reference(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.add(x, y, alpha=alpha)


def random(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def scaled_add(ops):
    """The op's overload packet, with a message that says which TODO is missing."""
    try:
        return ops.scaled_add
    except (AttributeError, RuntimeError):
        raise CheckFailed(
            "there is no op ch5_schema::scaled_add: declare it with m.def(...) in "
            "TORCH_LIBRARY(ch5_schema, m) (TODO 2)"
        ) from None


def check_schema(ops):
    """the op exists with the schema scaled_add(Tensor x, Tensor y, float alpha) -> Tensor"""
    schema = str(scaled_add(ops).default._schema)
    expect(schema == SCHEMA, f"expected the schema {SCHEMA!r}, got {schema!r}")


def check_a_kernel_per_dispatch_key(ops):
    """a kernel is registered for the CPU key and one for the Meta key, and none for all backends"""
    scaled_add(ops)
    name = "ch5_schema::scaled_add"
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    # m.def(schema, &fn) registers fn as a catch-all kernel, which would also run on meta tensors.
    expect(
        not has_kernel(name, "CompositeImplicitAutograd"),
        "scaled_add has a kernel for every backend (was a function passed to m.def?): declare the "
        "schema alone in TORCH_LIBRARY and register kernels in TORCH_LIBRARY_IMPL (TODO 2, 3)",
    )
    for key in ("CPU", "Meta"):
        expect(
            has_kernel(name, key),
            f"no kernel for the {key} dispatch key: m.impl it in "
            f"TORCH_LIBRARY_IMPL(ch5_schema, {key}, m) (TODO 3)",
        )


def check_float32(ops):
    """float32 matches x + alpha * y for shapes 0, 1, odd and large, and several alphas"""
    for seed, shape in enumerate(SHAPES):
        x, y = random(shape, torch.float32, seed), random(shape, torch.float32, seed + 100)
        for alpha in (1.0, -0.5, 0.0, 3.25):
            expect_close(
                scaled_add(ops)(x, y, alpha),
                reference(x, y, alpha),
                **TOLERANCE[torch.float32],
                what=f"shape {shape}, alpha {alpha}",
            )


def check_float64(ops):
    """float64 matches the reference"""
    x, y = random((513, 7), torch.float64, 10), random((513, 7), torch.float64, 11)
    alpha = 0.1
    expect_close(scaled_add(ops)(x, y, alpha), reference(x, y, alpha), **TOLERANCE[torch.float64])


def check_non_contiguous_inputs(ops):
    """transposed and strided inputs give the reference's values in a contiguous output"""
    base = random((64, 257), torch.float32, 12)
    other = random((257, 64), torch.float32, 13)
    for what, x, y in [
        ("x.t(), y contiguous", base.t(), other),
        ("x[:, ::3], y[:, ::3]", base[:, ::3], other.t()[:, ::3]),
    ]:
        out = scaled_add(ops)(x, y, 2.0)
        expect_close(out, reference(x, y, 2.0), **TOLERANCE[torch.float32], what=what)
        expect(out.is_contiguous(), f"{what}: the output must be contiguous")


def check_rejects_bad_inputs(ops):
    """integer inputs, mixed dtypes and different shapes are refused with the op's message"""
    op = scaled_add(ops)
    x = random((4, 5), torch.float32, 14)
    expect_error(lambda: op(x.int(), x.int(), 1.0), r"scaled_add: x must be float32 or float64")
    expect_error(lambda: op(x, x.double(), 1.0), r"scaled_add: x and y must have the same dtype")
    expect_error(lambda: op(x, x[:3], 1.0), r"scaled_add: x and y must have the same shape")


def check_meta_tensors(ops):
    """on meta tensors the op returns a meta tensor of the right shape and dtype, and checks x, y"""
    op = scaled_add(ops)
    for shape in [(0,), (7,), (3, 5, 11)]:
        for dtype in (torch.float32, torch.float64):
            x = torch.empty(shape, dtype=dtype, device="meta")
            out = op(x, torch.empty_like(x), 2.0)
            expect(out.device.type == "meta", f"expected a meta tensor, got one on {out.device}")
            expect(
                tuple(out.shape) == shape and out.dtype == dtype,
                f"expected shape {shape} and {dtype}, got {tuple(out.shape)} and {out.dtype}",
            )
            expect(out.is_contiguous(), "the meta output must be contiguous, as the CPU kernel's")
    # The meta kernel is what torch.compile traces with: it must refuse what the kernel refuses.
    x = torch.empty(4, 5, device="meta")
    expect_error(lambda: op(x, x[:3], 1.0), r"scaled_add: x and y must have the same shape")
    out = op(x.t(), x.t(), 1.0)
    expect(out.is_contiguous(), "for a transposed x the meta output must still be contiguous")


def check_opcheck(ops):
    """torch.library.opcheck passes: schema, fake (meta) kernel, AOTAutograd trace"""
    op = scaled_add(ops).default
    x = random((5, 8), torch.float32, 15)
    y = random((5, 8), torch.float32, 16)
    # Contiguous, transposed and empty inputs.
    for args in [(x, y, 0.5), (x.t(), y.t(), -2.0), (x[:0], y[:0], 1.0)]:
        torch.library.opcheck(op, args)
