"""Checks for exercise ch1/errors (the specification: read it before you write errors.cpp).

    make check EX=ch1/errors

`parse_shape("3x4x5") == (3, 4, 5)`, and a malformed shape raises ValueError saying which part
is bad; `shape_dim("3x4", -1) == 4`, and a dim out of range raises IndexError;
`broadcast_shapes("3x1", "4") == (3, 4)` as torch.broadcast_shapes, and shapes that do not
broadcast raise `BroadcastError`, the module's own exception class, a subclass of ValueError.
"""

from __future__ import annotations

import random
import re

import torch
from grading import CheckFailed, expect, expect_error

SOURCE = "errors.cpp"  # the file you write, in this folder
LIBRARY = None  # a pybind11 module: the checks call ops.parse_shape(...)

INT64_MAX = 2**63 - 1


def broadcast_error_class(ops) -> type:
    error = getattr(ops, "BroadcastError", None)
    if not (isinstance(error, type) and issubclass(error, ValueError)):
        raise CheckFailed(
            "the module should have a BroadcastError class, a subclass of ValueError "
            f"(py::register_exception); got {error!r}"
        )
    return error


def check_parse_shape_parses_well_formed_shapes(ops):
    """parse_shape gives a tuple of ints: '3x4x5', '7', '0x1', '007' and '' (a scalar's shape)"""
    cases = {"3x4x5": (3, 4, 5), "7": (7,), "0x1": (0, 1), "007": (7,), "": ()}
    cases["2x" + str(INT64_MAX)] = (2, INT64_MAX)
    for text, expected in cases.items():
        got = ops.parse_shape(text)
        expect(got == expected and type(got) is tuple, f"parse_shape({text!r}): {got!r}")


def check_parse_shape_rejects_malformed_dimensions(ops):
    """a dimension that is not all digits raises ValueError naming it: '3x', '-1', ' 3', '3abc'"""
    cases = [
        ("3x", ""),
        ("x3", ""),
        ("3xx4", ""),
        ("3xa", "a"),
        ("-1", "-1"),
        ("+3", "+3"),
        (" 3", " 3"),
        ("3 ", "3 "),
        ("3.0", "3.0"),
        ("3x4abc", "4abc"),
        ("3X4", "3X4"),
    ]
    for text, bad in cases:
        expect_error(
            lambda text=text: ops.parse_shape(text),
            rf"^parse_shape: bad dimension '{re.escape(bad)}' in '{re.escape(text)}'$",
            error=ValueError,
        )


def check_parse_shape_rejects_too_large_dimensions(ops):
    """a dimension past 2^63 - 1 raises ValueError (not IndexError: it is the value that is bad)"""
    for part in [str(INT64_MAX + 1), "99999999999999999999", "1" + "0" * 40]:
        text = f"2x{part}"
        expect_error(
            lambda text=text: ops.parse_shape(text),
            rf"^parse_shape: dimension '{part}' in '{text}' is too large$",
            error=ValueError,
        )


def check_shape_dim_indexes_like_python(ops):
    """shape_dim(text, dim) is the shape's tuple[dim], negative dims counting from the end"""
    for text in ["5", "3x4", "2x0x7x1"]:
        shape = tuple(int(s) for s in text.split("x"))
        for dim in range(-len(shape), len(shape)):
            got = ops.shape_dim(text, dim)
            expect(got == shape[dim], f"shape_dim({text!r}, {dim}): {shape[dim]}, got {got!r}")


def check_shape_dim_out_of_range_raises_index_error(ops):
    """a dim outside [-ndim, ndim) raises IndexError saying the dim and the number of dims"""
    for text, ndim, dim in [("3x4", 2, 2), ("3x4", 2, -3), ("5", 1, 100), ("", 0, 0)]:
        expect_error(
            lambda text=text, dim=dim: ops.shape_dim(text, dim),
            rf"^shape_dim: dim {dim} is out of range for {ndim} dimensions$",
            error=IndexError,
        )
    # A malformed shape is still a ValueError, whatever the dim.
    expect_error(lambda: ops.shape_dim("3xa", 0), r"bad dimension 'a'", error=ValueError)


def check_broadcast_shapes_matches_torch(ops):
    """broadcast_shapes matches torch.broadcast_shapes: ranks 0 to 4, sizes 0, 1 and others"""
    rng = random.Random(0)
    pairs = [("", ""), ("", "3x4"), ("3x1", "4"), ("1", "0"), ("2x1x5", "7x1"), ("0x1", "1x6")]
    for _ in range(300):
        # A random shape and a suffix of it with some sizes replaced by 1: they broadcast.
        a = [rng.choice([0, 1, 2, 3, 5]) for _ in range(rng.randint(0, 4))]
        b = [rng.choice([size, 1]) for size in a[rng.randint(0, len(a)) :]]
        pairs.append(("x".join(map(str, a)), "x".join(map(str, b))))
    for a_text, b_text in pairs:
        shapes = [tuple(int(s) for s in t.split("x")) if t else () for t in (a_text, b_text)]
        expected = tuple(torch.broadcast_shapes(*shapes))
        for x, y in [(a_text, b_text), (b_text, a_text)]:
            got = ops.broadcast_shapes(x, y)
            expect(
                got == expected and type(got) is tuple,
                f"broadcast_shapes({x!r}, {y!r}): torch says {expected}, got {got!r}",
            )


def check_mismatched_shapes_raise_broadcast_error(ops):
    """shapes that do not broadcast raise BroadcastError (a ValueError) naming both sizes and dim"""
    error = broadcast_error_class(ops)
    cases = [("3x4", "5", 4, 5, 1), ("2x3x4", "5x3x4", 2, 5, 3), ("0", "2", 0, 2, 1)]
    cases.append(("5x2", "4x3x2", 5, 3, 2))
    for a, b, size_a, size_b, i in cases:
        expect_error(
            lambda a=a, b=b: ops.broadcast_shapes(a, b),
            rf"^broadcast_shapes: '{a}' and '{b}' do not broadcast: "
            rf"size {size_a} vs {size_b} at dim -{i}$",
            error=error,
        )
    try:
        ops.broadcast_shapes("3x4", "5")
    except ValueError:
        pass  # except ValueError catches it too: that is what the base class is for
    except Exception as e:
        raise CheckFailed(f"`except ValueError` should catch it; got {type(e).__name__}") from None


def check_parse_errors_are_not_broadcast_errors(ops):
    """a malformed shape passed to broadcast_shapes is a ValueError, not a BroadcastError"""
    error = broadcast_error_class(ops)
    try:
        ops.broadcast_shapes("3x4", "4xq")
    except error:
        raise CheckFailed("a malformed shape raised BroadcastError; it is parse_shape's") from None
    except ValueError as e:
        expect("bad dimension 'q' in '4xq'" in str(e), f"unexpected message {str(e)!r}")
        return
    raise CheckFailed("broadcast_shapes('3x4', '4xq') returned; it should raise ValueError")
