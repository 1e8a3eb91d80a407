"""Checks for exercise ch1/keyword_args (the specification: read it before you write
keyword_args.cpp).

    make check EX=ch1/keyword_args

Python must see `clamp_scale(values: list[float], factor: float = 2.0, *, lo: float = -inf,
hi: float = inf) -> list[float]`, returning [min(max(v * factor, lo), hi) for v in values], with a
docstring; lo and hi can only be passed by name.
"""

from __future__ import annotations

import math
import random
import re

import torch
from grading import CheckFailed, expect, expect_close, expect_error

SOURCE = "keyword_args.cpp"  # the file you write, in this folder
LIBRARY = None  # a pybind11 module: the checks call ops.clamp_scale(...)


def reference(
    values: list[float], factor: float = 2.0, *, lo: float = -math.inf, hi: float = math.inf
) -> list[float]:
    return [min(max(v * factor, lo), hi) for v in values]


def describe_call(args: tuple, kwargs: dict) -> str:
    show = lambda v: f"[{len(v)} floats]" if isinstance(v, list) and len(v) > 3 else repr(v)  # noqa: E731
    shown = [show(a) for a in args] + [f"{k}={show(v)}" for k, v in kwargs.items()]
    return f"clamp_scale({', '.join(shown)})"


def call(ops, *args: object, **kwargs: object) -> object:
    """ops.clamp_scale(*args, **kwargs); a TypeError (the binding does not accept this call) is
    reported with the call and the signature pybind11 offers, without the values passed."""
    try:
        return ops.clamp_scale(*args, **kwargs)
    except TypeError as e:
        offered = re.search(r"1\. (\(.*\) -> .*)", str(e))
        raise CheckFailed(
            f"{describe_call(args, kwargs)} raised TypeError: the binding accepts only "
            f"clamp_scale{offered.group(1) if offered else '(?)'}"
        ) from None


def expect_same_list(got: object, expected: list[float], what: str) -> None:
    expect(isinstance(got, list), f"{what}: expected a list, got {type(got).__name__}")
    # Both sides compute v * factor and then one max and one min in float64: the same bits.
    as_tensor = lambda values: torch.tensor(values, dtype=torch.float64).reshape(-1)  # noqa: E731
    expect_close(as_tensor(got), as_tensor(expected), atol=0, rtol=0, what=what)


def expect_call_gives(ops, expected: list[float], *args: object, **kwargs: object) -> None:
    """ops.clamp_scale(*args, **kwargs) returns `expected`; a failure names the call with the
    values passed, as describe_call shows them."""
    expect_same_list(call(ops, *args, **kwargs), expected, describe_call(args, kwargs))


def random_values(count: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(-10, 10) for _ in range(count)]


def check_all_arguments_given_by_name(ops):
    """clamp_scale(values=..., factor=..., lo=..., hi=...) matches the Python reference"""
    values = random_values(1001, seed=0)
    for factor, lo, hi in [(3.0, -5.0, 7.5), (-0.5, -1.0, 1.0), (1.0, 2.0, 2.0)]:
        expected = reference(values, factor, lo=lo, hi=hi)
        expect_call_gives(ops, expected, values=values, factor=factor, lo=lo, hi=hi)


def check_defaults(ops):
    """factor defaults to 2.0, lo to -inf and hi to +inf, each on its own"""
    values = random_values(257, seed=1)
    expect_call_gives(ops, reference(values), values)
    expect_call_gives(ops, reference(values, 0.5), values, 0.5)
    expect_call_gives(ops, reference(values, lo=0.0), values, lo=0.0)
    expect_call_gives(ops, reference(values, hi=1.0), values, hi=1.0)
    big = [1e308, -1e308]  # times 2 overflows to +-inf: no finite default bound may clip it
    expect_call_gives(ops, [math.inf, -math.inf], big)


def check_lo_and_hi_are_keyword_only(ops):
    """lo and hi passed by position raise TypeError, as `def f(values, factor=2.0, *, lo, hi)`"""
    values = random_values(5, seed=2)
    for args in [(values, 2.0, -1.0, 1.0), (values, 2.0, -1.0)]:
        try:
            ops.clamp_scale(*args)
        except TypeError:
            continue
        raise CheckFailed(
            f"{describe_call(args, {})} returned: lo and hi must be keyword-only (py::kw_only())"
        )
    expect_call_gives(ops, reference(values, 2.0, lo=-1.0, hi=1.0), values, 2.0, lo=-1.0, hi=1.0)


def check_docstring_names_the_arguments_and_says_what_it_does(ops):
    """help(clamp_scale) shows the names, the defaults, the `*` and a description"""
    doc = ops.clamp_scale.__doc__ or ""
    lines = doc.strip().splitlines()
    signature = lines[0] if lines else ""
    # pybind11 writes the first line; the type names differ between its versions, so only the
    # names, defaults and the `*` are checked here.
    pattern = r"clamp_scale\(values: .*, factor: .* = 2\.0, \*, lo: .* = -inf, hi: .* = inf\)"
    expect(
        re.search(pattern, signature) is not None,
        f"the signature line should read like clamp_scale(values: list[float], factor: float = "
        f"2.0, *, lo: float = -inf, hi: float = inf) -> list[float]; got {signature!r}",
    )
    description = " ".join(line.strip() for line in lines[1:]).strip()
    expect(
        len(description) >= 10,
        f"give clamp_scale a docstring (m.def's third argument); got {description!r}",
    )


def check_empty_list_gives_empty_list(ops):
    """an empty list gives an empty list (with and without bounds)"""
    expect_call_gives(ops, [], [])
    expect_call_gives(ops, [], [], 3.0, lo=-1.0, hi=1.0)


def check_returns_a_new_list(ops):
    """the caller's list is left as it was"""
    values = random_values(17, seed=3)
    before = list(values)
    out = call(ops, values, 3.0, lo=-1.0, hi=1.0)
    expect(out is not values and values == before, "clamp_scale changed its input list")


def check_rejects_lo_above_hi(ops):
    """lo > hi raises ValueError naming the function and both bounds"""
    expect_error(
        lambda: call(ops, [1.0], lo=2.0, hi=1.0),
        r"clamp_scale: lo must be <= hi, got lo=2.0+, hi=1.0+",
        error=ValueError,
    )
