"""Checks for exercise ch2/masked_softmax (the specification: read it before you write
masked_softmax.cpp).

    make check EX=ch2/masked_softmax

Your op must compute softmax over the last dimension of x counting only the elements where mask
(a bool tensor of x's shape) is true, with 0 where it is false, and all zeros for a row whose mask
is all false: torch.softmax(x.masked_fill(~mask, -inf), -1).nan_to_num(0). It must not overflow
for large values, ignore whatever the masked-out elements hold, and split its rows with
at::parallel_for (the checks test that 1 and 8 threads give the same bits, not a speed-up).
"""

from __future__ import annotations

import torch
from grading import expect, expect_close, expect_error

SOURCE = "masked_softmax.cpp"  # the file you write, in this folder
LIBRARY = "ch2_masked_softmax"  # its ops: torch.ops.ch2_masked_softmax.masked_softmax

# Per dtype. float32 and float64: exp differs by an ulp or two between libraries, and a sum of a
# thousand terms in another order by a few more. The half types: the reference is computed in
# float32 and rounded once, as the op must do; allow one rounding of 11 (float16) or 8 (bfloat16)
# significant bits.
TOLERANCE = {
    torch.float32: dict(atol=1e-7, rtol=1e-5),
    torch.float64: dict(atol=1e-15, rtol=1e-12),
    torch.float16: dict(atol=1e-6, rtol=1e-3),
    torch.bfloat16: dict(atol=1e-6, rtol=1.6e-2),
}
SHAPES = [(1,), (7,), (3, 5, 11), (1000, 33), (64, 1031), (0, 7), (4, 0)]


def reference(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """In float32 for the half types, so that the reference is rounded once, like the op."""
    compute = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    out = torch.softmax(compute.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0)
    return out.to(x.dtype)


def random(shape: tuple[int, ...], dtype: torch.dtype, seed: int, scale: float = 3.0):
    generator = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(shape, generator=generator, dtype=torch.float64)).to(dtype)


def random_mask(shape: tuple[int, ...], seed: int, keep: float = 0.7) -> torch.Tensor:
    """About `keep` of each row true, and at least one element of every row."""
    generator = torch.Generator().manual_seed(seed + 1000)
    mask = torch.rand(shape, generator=generator) < keep
    if mask.numel() > 0:
        one_per_row = torch.randint(shape[-1], (*shape[:-1], 1), generator=generator)
        mask.scatter_(-1, one_per_row, True)
    return mask


def check_float32(ops):
    """float32 matches the reference for shapes 1, odd, large and empty (0 rows, 0 columns)"""
    for seed, shape in enumerate(SHAPES):
        x, mask = random(shape, torch.float32, seed), random_mask(shape, seed)
        got = ops.masked_softmax(x, mask)
        expect_close(got, reference(x, mask), **TOLERANCE[torch.float32], what=f"shape {shape}")


def check_float64(ops):
    """float64 matches the reference (so it computes in double, not in float)"""
    x, mask = random((257, 129), torch.float64, seed=10), random_mask((257, 129), seed=10)
    expect_close(ops.masked_softmax(x, mask), reference(x, mask), **TOLERANCE[torch.float64])


def check_half_types(ops):
    """float16 and bfloat16 match the reference (computed in float, rounded once)"""
    for seed, dtype in enumerate((torch.float16, torch.bfloat16)):
        x, mask = random((33, 1025), dtype, seed=11 + seed), random_mask((33, 1025), seed=11)
        got = ops.masked_softmax(x, mask)
        expect_close(got, reference(x, mask), **TOLERANCE[dtype], what=str(dtype))


def check_large_values_do_not_overflow(ops):
    """x near +1000 or -1000 neither overflows nor underflows (subtract the row's max first)"""
    for dtype in (torch.float32, torch.float64):
        x, mask = random((64, 100), dtype, seed=13), random_mask((64, 100), seed=13)
        for offset in (1000.0, -1000.0):
            # exp(1000) is inf and exp(-1000) is 0, in float and in double: without the shift,
            # every row is inf / inf or 0 / 0, NaN.
            shifted = x + offset
            got = ops.masked_softmax(shifted, mask)
            what = f"{dtype}, x + {offset:g}"
            expect_close(got, reference(shifted, mask), **TOLERANCE[dtype], what=what)


def check_masked_out_values_are_ignored(ops):
    """whatever sits under a false mask (1e4, inf, -inf, NaN) changes nothing"""
    # The max and the sum are over the kept elements only: a max over the row would be 1e4 or
    # inf, and x * mask turns inf into NaN.
    x, mask = random((50, 40), torch.float32, seed=14), random_mask((50, 40), seed=14, keep=0.5)
    expected = reference(x, mask)
    for junk in (1e4, float("inf"), float("-inf"), float("nan")):
        got = ops.masked_softmax(x.masked_fill(~mask, junk), mask)
        expect_close(got, expected, **TOLERANCE[torch.float32], what=f"{junk:g} under the mask")


def check_fully_masked_and_single_element_rows(ops):
    """a row with no true in mask is all zeros (not NaN); a row with one true has 1 there"""
    x = random((4, 6), torch.float32, seed=15)
    mask = torch.tensor(
        [
            [False] * 6,
            [False, False, True, False, False, False],
            [True] * 6,
            [False] * 5 + [True],
        ]
    )
    expect_close(ops.masked_softmax(x, mask), reference(x, mask), atol=1e-7, rtol=1e-6)
    x, nothing_kept = random((3, 1), torch.float32, seed=16), torch.zeros(3, 1, dtype=torch.bool)
    expect_close(ops.masked_softmax(x, nothing_kept), torch.zeros(3, 1), atol=0, rtol=0)


def check_every_element_is_written(ops):
    """a masked-out element is written as 0, even where the output's memory held other values"""
    x, mask = random((16, 64), torch.float32, seed=17), random_mask((16, 64), seed=17, keep=0.3)
    expected = reference(x, mask)
    for _ in range(5):
        # Freed memory of the output's size: the allocator is likely to hand it out again.
        stale = torch.full((16, 64), 7.0)
        del stale
        got = ops.masked_softmax(x, mask)
        expect_close(got, expected, **TOLERANCE[torch.float32])


def check_non_contiguous_inputs(ops):
    """transposed x and mask, a strided slice, and one padding mask row expanded over all rows"""
    base, base_mask = random((96, 130), torch.float32, seed=18), random_mask((96, 130), seed=18)
    padding = torch.arange(130) < 100  # a (cols,) mask, expand()ed: stride 0 over the rows
    cases = {
        "x.t(), mask.t()": (base.t(), base_mask.t()),
        "x.t(), mask.t().contiguous()": (base.t(), base_mask.t().contiguous()),
        "x[:, ::3], mask[:, ::3]": (base[:, ::3], base_mask[:, ::3]),
        "x, padding.expand(96, -1)": (base, padding.expand(96, -1)),
    }
    for what, (x, mask) in cases.items():
        got = ops.masked_softmax(x, mask)
        expect_close(got, reference(x, mask), **TOLERANCE[torch.float32], what=what)


def check_result_does_not_depend_on_the_thread_count(ops):
    """1 thread and 8 threads give the same bits (rows are independent: nothing is shared)"""
    x, mask = random((4096, 77), torch.float32, seed=19), random_mask((4096, 77), seed=19)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        serial = ops.masked_softmax(x, mask)
        torch.set_num_threads(8)
        for _ in range(3):
            expect_close(ops.masked_softmax(x, mask), serial, atol=0, rtol=0, what="8 threads")
    finally:
        torch.set_num_threads(threads)
    expect_close(serial, reference(x, mask), **TOLERANCE[torch.float32], what="1 thread")


def check_inputs_are_left_unchanged(ops):
    """x and mask are not modified, and the output is a new tensor"""
    x, mask = random((10, 20), torch.float32, seed=20), random_mask((10, 20), seed=20)
    x_before, mask_before = x.clone(), mask.clone()
    out = ops.masked_softmax(x, mask)
    expect(out.data_ptr() != x.data_ptr(), "masked_softmax returned x: write a new tensor")
    expect_close(x, x_before, atol=0, rtol=0, what="x after the call")
    expect(bool((mask == mask_before).all()), "masked_softmax modified mask")


def check_rejects_bad_inputs(ops):
    """a non-bool mask, a mask of another shape, an integer x and a 0-dim x are refused by name"""
    x = torch.randn(3, 4)
    cases = [
        (x, torch.ones(3, 4, dtype=torch.uint8), r"masked_softmax: mask must be a bool tensor"),
        (x, torch.ones(4, dtype=torch.bool), r"masked_softmax: mask must have x's shape \[3, 4\]"),
        (x, torch.ones(4, 3, dtype=torch.bool), r"mask must have x's shape \[3, 4\], got \[4, 3\]"),
        (
            torch.ones(3, 4, dtype=torch.int64),
            torch.ones(3, 4, dtype=torch.bool),
            r"masked_softmax: x must be a floating-point tensor.*Long",
        ),
        (torch.tensor(1.0), torch.tensor(True), r"masked_softmax: x must have at least 1 dim"),
    ]
    for x_bad, mask_bad, message in cases:
        expect_error(
            lambda x_bad=x_bad, mask_bad=mask_bad: ops.masked_softmax(x_bad, mask_bad), message
        )
