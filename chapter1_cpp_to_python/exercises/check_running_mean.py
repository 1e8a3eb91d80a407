"""Checks for exercise ch1/running_mean (the specification: read it before you write
running_mean.cpp).

    make check EX=ch1/running_mean

`RunningMean(name)` keeps the mean of the values added by `add(x)` and `add_many(xs)`; `merge(other)`
adds what another one has seen. `count` and `mean` (NaN before the first value) are read-only
properties, `name` is read-write (never empty), and repr() reads
`RunningMean(name='loss', count=4, mean=2.5)`, the mean printed as Python's f"{mean:g}" would.
"""

from __future__ import annotations

import math
import random
import statistics

from grading import CheckFailed, expect, expect_error

SOURCE = "running_mean.cpp"  # the file you write, in this folder
LIBRARY = None  # a pybind11 module: the checks call ops.RunningMean(...)

EPS = 2.0**-52  # float64's machine epsilon


def random_values(count: int, seed: int, scale: float = 100.0) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(-scale, scale) for _ in range(count)]


def expect_mean(got: float, values: list[float], what: str) -> None:
    expected = statistics.fmean(values)
    # An update per value, each rounding once: n * eps * max|x| bounds the drift, whether the
    # mean is kept (mean += (x - mean) / n) or computed from a running sum.
    tolerance = 4 * len(values) * EPS * max(abs(v) for v in values)
    expect(
        isinstance(got, float) and abs(got - expected) <= tolerance,
        f"{what}: mean of {len(values)} values should be {expected!r}, got {got!r} "
        f"(allowed: {tolerance:.2g})",
    )


def expect_count(got: object, expected: int, what: str) -> None:
    expect(got == expected, f"{what}: count should be {expected}, got {got!r}")


def check_count_and_mean_after_add(ops):
    """count and mean match statistics.fmean after add() of 1, 2, 7 and 10,001 values"""
    for seed, n in enumerate([1, 2, 7, 10_001]):
        values = random_values(n, seed)
        stats = ops.RunningMean("loss")
        for v in values:
            stats.add(v)
        expect_count(stats.count, n, f"after {n} add()")
        expect_mean(stats.mean, values, f"after {n} add()")


def check_add_many_equals_adding_one_at_a_time(ops):
    """add_many(xs) gives the same count and mean as add() of each x, and [] changes nothing"""
    values = random_values(1001, seed=10)
    one_by_one, at_once = ops.RunningMean("a"), ops.RunningMean("b")
    for v in values:
        one_by_one.add(v)
    at_once.add_many(values[:500])
    at_once.add_many([])
    at_once.add_many(values[500:])
    expect_count(at_once.count, one_by_one.count, "add_many")
    expect(
        at_once.mean == one_by_one.mean,
        f"add_many: mean {at_once.mean!r}, add() one at a time: {one_by_one.mean!r}",
    )


def check_new_instance_has_no_values(ops):
    """a new RunningMean has count 0 and mean NaN"""
    stats = ops.RunningMean("empty")
    expect_count(stats.count, 0, "a new RunningMean")
    expect(math.isnan(stats.mean), f"a new RunningMean: mean should be nan, got {stats.mean!r}")


def check_count_and_mean_are_read_only(ops):
    """assigning count or mean raises AttributeError and changes nothing"""
    stats = ops.RunningMean("loss")
    stats.add_many([1.0, 2.0])
    for attribute in ("count", "mean"):
        expect(
            isinstance(getattr(type(stats), attribute, None), property),
            f"RunningMean.{attribute} should be a property (def_property_readonly)",
        )
        expect_error(lambda a=attribute: setattr(stats, a, 5), r"", error=AttributeError)
    expect_count(stats.count, 2, "after the failed assignments")
    expect(stats.mean == 1.5, f"after the failed assignments: mean should be 1.5, got {stats.mean}")


def check_name_is_read_write_and_never_empty(ops):
    """name can be read and assigned; an empty name raises ValueError, in __init__ or later"""
    stats = ops.RunningMean("train")
    expect(stats.name == "train", f"name should be 'train', got {getattr(stats, 'name', None)!r}")
    stats.name = "valid"
    expect(stats.name == "valid", f"after stats.name = 'valid', name is {stats.name!r}")
    expect_error(lambda: setattr(stats, "name", ""), r"name must not be empty", error=ValueError)
    expect(stats.name == "valid", f"a refused name changed it to {stats.name!r}")
    expect_error(lambda: ops.RunningMean(""), r"name must not be empty", error=ValueError)


def check_repr(ops):
    """repr() reads RunningMean(name='loss', count=4, mean=2.5), the mean formatted as by :g"""
    cases = [([], "nan"), ([1.0, 2.0, 3.0, 4.0], "2.5"), ([0.0, 0.0, 1.0], "0.333333")]
    cases.append(([1234567.0], "1.23457e+06"))
    for values, mean_text in cases:
        stats = ops.RunningMean("loss")
        stats.add_many(values)
        expected = f"RunningMean(name='loss', count={len(values)}, mean={mean_text})"
        expect(repr(stats) == expected, f"repr should be {expected!r}, got {repr(stats)!r}")
    stats.name = "renamed"
    expect("name='renamed'" in repr(stats), f"repr after a rename: {repr(stats)!r}")


def check_merge(ops):
    """a.merge(b) makes a as if it had seen b's values too; b is unchanged; empty sides work"""
    left_values, right_values = random_values(300, seed=20), random_values(77, seed=21, scale=1e3)
    left, right = ops.RunningMean("left"), ops.RunningMean("right")
    left.add_many(left_values)
    right.add_many(right_values)
    left.merge(right)
    expect_count(left.count, 377, "left.merge(right)")
    expect_mean(left.mean, left_values + right_values, "left.merge(right)")
    expect_count(right.count, 77, "right, after left.merge(right)")
    expect_mean(right.mean, right_values, "right, after left.merge(right)")

    empty = ops.RunningMean("empty")
    left.merge(empty)
    expect_count(left.count, 377, "merging an empty RunningMean")
    expect_mean(left.mean, left_values + right_values, "merging an empty RunningMean")
    empty.merge(right)
    expect_count(empty.count, 77, "an empty RunningMean merging one with 77 values")
    expect_mean(empty.mean, right_values, "an empty RunningMean merging one with 77 values")


def check_instances_are_independent(ops):
    """50 instances fed in turns each keep their own count and mean"""
    rng = random.Random(30)
    instances = [ops.RunningMean(f"stats{i}") for i in range(50)]
    seen: list[list[float]] = [[] for _ in instances]
    for _ in range(2000):
        i = rng.randrange(len(instances))
        value = rng.uniform(-1, 1) + i  # a different mean per instance
        instances[i].add(value)
        seen[i].append(value)
    for i, (stats, values) in enumerate(zip(instances, seen, strict=True)):
        if not values:
            raise CheckFailed("the seed left an instance without values; pick another")
        expect(stats.name == f"stats{i}", f"instance {i}: name {stats.name!r}")
        expect_count(stats.count, len(values), f"instance {i}")
        expect_mean(stats.mean, values, f"instance {i}")
