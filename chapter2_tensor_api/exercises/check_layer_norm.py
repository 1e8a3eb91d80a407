"""Checks for exercise ch2/layer_norm (the specification: read it before you write layer_norm.cpp).

    make check EX=ch2/layer_norm

Your op normalises x over its last dimension (n elements) and returns (y, mean, rstd):
y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance (divided by n), as
torch.nn.functional.layer_norm computes it, and mean and rstd = 1 / sqrt(var + eps) of shape
x.shape[:-1] + (1,) in x's dtype, as torch.native_layer_norm returns them. It must accumulate in
float (double for float64), stay accurate when the rows' mean is far from 0, and split its rows
with at::parallel_for (the checks test that 1 and 8 threads give the same bits, not a speed-up).
"""

from __future__ import annotations

import torch
from grading import expect, expect_close, expect_error

SOURCE = "layer_norm.cpp"  # the file you write, in this folder
LIBRARY = "ch2_layer_norm"  # its ops: torch.ops.ch2_layer_norm.layer_norm

EPS = 1e-5
# Per dtype. float32 and float64: sums of up to a thousand terms, in another order than torch's,
# differ by a few units in the last place of the sum. The half types: the references are computed
# in float and rounded once, as the op must do; allow one rounding of 11 (float16) or 8 (bfloat16)
# significant bits.
TOLERANCE = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float64: dict(atol=1e-12, rtol=1e-12),
    torch.float16: dict(atol=1e-5, rtol=2e-3),
    torch.bfloat16: dict(atol=1e-5, rtol=1.6e-2),
}
SHAPES = [(1, 1), (7,), (2, 2), (3, 5, 33), (1000, 33), (64, 1031), (0, 16)]


def reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """y from torch.nn.functional.layer_norm (in float32 for the half types, rounded once); mean
    and rstd from torch.var_mean in float64, rounded once to x's dtype."""
    half = x.dtype in (torch.float16, torch.bfloat16)
    compute = (lambda t: t.float()) if half else (lambda t: t)
    y = torch.nn.functional.layer_norm(
        compute(x), (x.shape[-1],), compute(weight), compute(bias), eps
    )
    if x.numel() == 0:  # var_mean warns about 0 / 0 elements per row
        mean = var = x.new_empty((*x.shape[:-1], 1), dtype=torch.float64)
    else:
        var, mean = torch.var_mean(x.double(), dim=-1, unbiased=False, keepdim=True)
    rstd = (var + eps).rsqrt()
    return y.to(x.dtype), mean.to(x.dtype), rstd.to(x.dtype)


def random(shape: tuple[int, ...], dtype: torch.dtype, seed: int, offset: float = 0.0):
    generator = torch.Generator().manual_seed(seed)
    return (offset + torch.randn(shape, generator=generator, dtype=torch.float64)).to(dtype)


def random_params(n: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """weight near 1 and bias near 0, as trained ones are, but neither 1 nor 0."""
    return 1 + 0.5 * random((n,), dtype, seed + 500), 0.5 * random((n,), dtype, seed + 600)


def expect_layer_norm(
    got: object, expected: tuple[torch.Tensor, ...], tolerance: dict, what: str, stats_rtol=None
) -> None:
    expect(
        isinstance(got, (tuple, list)) and len(got) == 3,
        f"{what}: expected a tuple (y, mean, rstd), got {type(got).__name__}",
    )
    stats = tolerance if stats_rtol is None else dict(atol=0, rtol=stats_rtol)
    expect_close(got[0], expected[0], **tolerance, what=f"{what}: y")
    expect_close(got[1], expected[1], **stats, what=f"{what}: mean")
    expect_close(got[2], expected[2], **stats, what=f"{what}: rstd")


def check_float32(ops):
    """float32: y, mean and rstd match the references for shapes 1, odd, large and 0 rows"""
    for seed, shape in enumerate(SHAPES):
        x = random(shape, torch.float32, seed)
        weight, bias = random_params(shape[-1], torch.float32, seed)
        got = ops.layer_norm(x, weight, bias, EPS)
        expected = reference(x, weight, bias)
        expect_layer_norm(got, expected, TOLERANCE[torch.float32], f"shape {shape}")


def check_float64(ops):
    """float64 matches the references (so it accumulates in double, not in float)"""
    x = random((257, 515), torch.float64, seed=10)
    weight, bias = random_params(515, torch.float64, seed=10)
    got = ops.layer_norm(x, weight, bias, EPS)
    expect_layer_norm(got, reference(x, weight, bias), TOLERANCE[torch.float64], "float64")


def check_half_types(ops):
    """float16 and bfloat16 match the references (accumulated in float, rounded once)"""
    for seed, dtype in enumerate((torch.float16, torch.bfloat16)):
        # A mean of 3: a sum of a thousand values in bfloat16 itself (8 bits) drifts far from it.
        x = random((33, 1025), dtype, seed=11 + seed, offset=3.0)
        weight, bias = random_params(1025, dtype, seed=11)
        got = ops.layer_norm(x, weight, bias, EPS)
        expect_layer_norm(got, reference(x, weight, bias), TOLERANCE[dtype], str(dtype))


def check_eps_is_inside_the_square_root(ops):
    """rstd = 1 / sqrt(var + eps) with the eps given: constant rows give 1 / sqrt(eps)"""
    x = torch.cat([torch.full((2, 9), 5.0), random((2, 9), torch.float32, seed=12)])
    weight, bias = random_params(9, torch.float32, seed=12)
    for eps in (1e-5, 0.1, 2.0):
        got = ops.layer_norm(x, weight, bias, eps)
        expected = reference(x, weight, bias, eps)
        expect_layer_norm(got, expected, TOLERANCE[torch.float32], f"eps {eps:g}")


def check_rows_far_from_zero(ops):
    """x = 1e4 + N(0, 1): the variance survives (two passes or Welford, not E[x^2] - E[x]^2)"""
    # E[x^2] and E[x]^2 are both ~1e8, where float32's spacing is 8: their difference, the
    # variance of ~1, is lost, often negative (rstd NaN). A plain two-pass float32 sum of 1e4-sized
    # values is still off by ~1e-2 in the mean (its running sum reaches ~1e7, spacing 1), hence
    # the loose tolerances here; the shortcut is off by hundreds.
    loose = {
        torch.float32: (dict(atol=5e-2, rtol=0), 1e-3),
        torch.float64: (dict(atol=1e-9, rtol=0), 1e-9),
    }
    for seed, dtype in enumerate((torch.float32, torch.float64)):
        x = random((64, 1024), dtype, seed=13 + seed, offset=1e4)
        weight, bias = random_params(1024, dtype, seed=13)
        got = ops.layer_norm(x, weight, bias, EPS)
        # The truth, in float64 from the same rounded x, to compare both dtypes against.
        y, mean, rstd = reference(x.double(), weight.double(), bias.double())
        expected = y.to(dtype), mean.to(dtype), rstd.to(dtype)
        tolerance, stats_rtol = loose[dtype]
        expect_layer_norm(got, expected, tolerance, f"{dtype}, 1e4 + N(0, 1)", stats_rtol)


def check_non_contiguous_inputs(ops):
    """transposed x, a strided slice of weight, a bias expanded from one number"""
    x = random((96, 130), torch.float32, seed=15).t()
    weight = random((192,), torch.float32, seed=16)[::2]
    bias = torch.tensor(0.25).expand(96)
    got = ops.layer_norm(x, weight, bias, EPS)
    what = "x.t(), weight[::2], bias.expand(96)"
    expect_layer_norm(got, reference(x, weight, bias), TOLERANCE[torch.float32], what)


def check_result_does_not_depend_on_the_thread_count(ops):
    """1 thread and 8 threads give the same bits (rows are independent: nothing is shared)"""
    x = random((4096, 77), torch.float32, seed=17)
    weight, bias = random_params(77, torch.float32, seed=17)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        serial = ops.layer_norm(x, weight, bias, EPS)
        torch.set_num_threads(8)
        for _ in range(3):
            parallel = ops.layer_norm(x, weight, bias, EPS)
            expect_layer_norm(parallel, serial, dict(atol=0, rtol=0), "8 threads")
    finally:
        torch.set_num_threads(threads)
    expect_layer_norm(serial, reference(x, weight, bias), TOLERANCE[torch.float32], "1 thread")


def check_inputs_are_left_unchanged(ops):
    """x, weight and bias are not modified, and y is a new tensor"""
    x = random((10, 20), torch.float32, seed=18)
    weight, bias = random_params(20, torch.float32, seed=18)
    before = [t.clone() for t in (x, weight, bias)]
    y, _, _ = ops.layer_norm(x, weight, bias, EPS)
    expect(y.data_ptr() != x.data_ptr(), "layer_norm returned x as y: write a new tensor")
    for name, tensor, old in zip(("x", "weight", "bias"), (x, weight, bias), before, strict=True):
        expect_close(tensor, old, atol=0, rtol=0, what=f"{name} after the call")


def check_rejects_bad_inputs(ops):
    """wrong weight or bias shape, mismatched dtypes, integer, 0-dim or empty-row x are refused"""
    x, w, b = torch.randn(3, 4), torch.ones(4), torch.zeros(4)
    cases = [
        (
            x,
            torch.ones(5),
            b,
            r"layer_norm: weight must have shape \[4\] \(x.size\(-1\)\), got \[5\]",
        ),
        (x, torch.ones(1, 4), b, r"layer_norm: weight must have shape \[4\].*got \[1, 4\]"),
        (
            x,
            w,
            torch.zeros(3),
            r"layer_norm: bias must have shape \[4\] \(x.size\(-1\)\), got \[3\]",
        ),
        (x, w.double(), b, r"layer_norm: weight and bias must have x's dtype Float, got Double"),
        (
            x,
            w,
            b.half(),
            r"layer_norm: weight and bias must have x's dtype Float, got Float and Half",
        ),
        (x.long(), w.long(), b.long(), r"layer_norm: x must be a floating-point tensor.*Long"),
        (torch.tensor(1.0), w, b, r"layer_norm: x must have a last dimension"),
        (torch.ones(3, 0), torch.ones(0), torch.ones(0), r"layer_norm: x must have a last dim"),
    ]
    for x_bad, w_bad, b_bad, message in cases:
        expect_error(lambda x=x_bad, w=w_bad, b=b_bad: ops.layer_norm(x, w, b, EPS), message)
