"""Checks for exercise ch5/fake (the specification: read it before you write fake.py).

    make check EX=ch5/fake

The op ch5_fake::pad_to_multiple and its CPU kernel are given (fake_kernels.cpp). Your fake
kernel must give every output's shape, dtype and strides without reading data, refuse what the
kernel refuses, pass torch.library.opcheck, and let torch.compile trace the op, with static and
with dynamic shapes, into one graph.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from grading import expect, expect_close, expect_error
from torch._dynamo.testing import CompileCounterWithBackend
from torch._subclasses.fake_tensor import FakeTensorMode

SOURCE = "fake.py"  # the file you write, in this folder
GIVEN = ["fake_kernels.cpp"]  # built and loaded first: the op and its CPU kernel
LIBRARY = "ch5_fake"  # the namespace fake_kernels.cpp registers: torch.ops.ch5_fake

# (shape of x, multiple): n = 0, 1, odd, already a multiple, multiple 1, multiple above n.
CASES = [
    ((0,), 4),
    ((1,), 4),
    ((7,), 4),
    ((8,), 4),
    ((3, 5, 11), 8),
    ((2, 13), 1),
    ((4, 3), 16),
    ((5, 0), 3),
]


def reference(x: torch.Tensor, multiple: int) -> torch.Tensor:
    n = x.shape[-1]
    return F.pad(x, (0, -n % multiple))


def random(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def check_kernel_matches_the_reference(ops):
    """the given CPU kernel pads with zeros to the next multiple (what your fake must describe)"""
    for seed, (shape, multiple) in enumerate(CASES):
        x = random(shape, torch.float32, seed)
        expect_close(
            ops.pad_to_multiple(x, multiple),
            reference(x, multiple),
            atol=0,  # a copy and zeros: exact
            rtol=0,
            what=f"shape {shape}, multiple {multiple}",
        )


def check_fake_shapes(ops):
    """under FakeTensorMode the op gives the kernel's shape, dtype and strides, for n = 0, 1, odd"""
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        for shape, multiple in CASES:
            expected = reference(torch.empty(shape, dtype=dtype), multiple)
            with FakeTensorMode():
                out = ops.pad_to_multiple(torch.empty(shape, dtype=dtype), multiple)
            what = f"shape {shape}, multiple {multiple}, {dtype}"
            expect(
                tuple(out.shape) == tuple(expected.shape),
                f"{what}: expected the fake to return shape {tuple(expected.shape)}, "
                f"got {tuple(out.shape)}",
            )
            expect(out.dtype == dtype, f"{what}: expected dtype {dtype}, got {out.dtype}")
            expect(out.is_contiguous(), f"{what}: the output must be contiguous, as the kernel's")
    with FakeTensorMode():
        out = ops.pad_to_multiple(torch.empty(9, 5).t(), 4)
    expect(
        tuple(out.shape) == (5, 12) and out.is_contiguous(),
        f"for a transposed x of shape (5, 9) and multiple 4 expected a contiguous (5, 12) output, "
        f"got shape {tuple(out.shape)} and strides {out.stride()}",
    )


def check_fake_reads_no_data(ops):
    """the fake runs on meta tensors, which have no data (.item(), .tolist() or numpy fail there)"""
    for shape, multiple in CASES:
        x = torch.empty(shape, device="meta")
        out = ops.pad_to_multiple(x, multiple)
        expect(out.device.type == "meta", f"expected a meta tensor, got one on {out.device}")
        expect(
            tuple(out.shape) == tuple(reference(torch.empty(shape), multiple).shape),
            f"shape {shape}, multiple {multiple}: wrong shape {tuple(out.shape)} on meta tensors",
        )


def check_fake_refuses_what_the_kernel_refuses(ops):
    """a multiple below 1 and a 0-dim x fail at trace time with the kernel's messages"""
    with FakeTensorMode():
        x = torch.empty(3, 5)
        expect_error(
            lambda: ops.pad_to_multiple(x, 0), r"pad_to_multiple: multiple must be >= 1, got 0"
        )
        expect_error(
            lambda: ops.pad_to_multiple(torch.empty(()), 4),
            r"pad_to_multiple: x must have at least 1 dimension",
        )


def check_opcheck(ops):
    """torch.library.opcheck passes: schema, fake kernel, autograd registration, AOTAutograd"""
    op = torch.ops.ch5_fake.pad_to_multiple.default
    base = random((8, 5), torch.float32, 20)
    for args in [
        (base, 4),
        (base.t(), 3),
        (random((2, 3, 7), torch.float64, 21), 2),
        (base[:, :0], 4),
    ]:
        torch.library.opcheck(op, args)


def uses_the_padded_shape(x: torch.Tensor) -> torch.Tensor:
    """A function whose later ops need the op's output shape: the reshape is sized by the fake."""
    padded = torch.ops.ch5_fake.pad_to_multiple.default(torch.sin(x), 4)
    return padded.reshape(*padded.shape[:-1], -1, 4).sum(-1) * 2 + 1


def check_compile_fullgraph_matches_eager(ops):
    """torch.compile(fullgraph=True) of a function that uses the op matches eager"""
    torch._dynamo.reset()
    # The default backend, inductor: it generates code sized by the fake's shapes (one shape here,
    # as each new one would compile again, for seconds).
    compiled = torch.compile(uses_the_padded_shape, fullgraph=True)
    x = random((6, 9), torch.float32, 30)
    # inductor may reorder the sums of four values: float32's rounding, a few ulp
    expect_close(compiled(x), uses_the_padded_shape(x), atol=1e-6, rtol=1e-5)


def check_dynamic_shapes_compile_once(ops):
    """torch.compile(dynamic=True): one graph serves last dimensions 5, 9, 14 and 16"""
    torch._dynamo.reset()
    # aot_eager traces forward as inductor does (the same fake tensors and symbolic sizes) but
    # generates no code: what is checked here is the trace, and it takes a fraction of the time.
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(uses_the_padded_shape, fullgraph=True, dynamic=True, backend=counter)
    for seed, n in enumerate([5, 9, 14, 16]):
        x = random((3, n), torch.float32, 40 + seed)
        expect_close(
            compiled(x), uses_the_padded_shape(x), atol=1e-6, rtol=1e-6, what=f"last dimension {n}"
        )
    expect(
        counter.frame_count == 1,
        f"{counter.frame_count} graphs were compiled for 4 sizes, expected 1: the fake pinned the "
        "size (int(n) or a Python `if` on a size adds a guard, and a new size recompiles)",
    )
