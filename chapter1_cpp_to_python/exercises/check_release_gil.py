"""Checks for exercise ch1/release_gil (the specification: read it before you write
release_gil.cpp).

    make check EX=ch1/release_gil

`count_primes(n, *, on_progress=None, report_every=100000)` returns the number of primes below n.
While it computes, other Python threads must keep running: it releases the GIL. If on_progress is
given, it is called as on_progress(k, primes <= k) at every k < n that is a multiple of
report_every, and an exception raised there stops the count and reaches the caller.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from grading import CheckFailed, expect, expect_error

SOURCE = "release_gil.cpp"  # the file you write, in this folder
LIBRARY = None  # a pybind11 module: the checks call ops.count_primes(...)

# Some 0.4 s of trial division on the 2-core CI machine, more under load: long next to the 5 ms
# after which Python asks a thread to give up the GIL, and next to the OS's time slices.
WORK_SIZE = 1_500_000


def primes_up_to(n: int) -> list[int]:
    """is_prime[k] for k in 0..n, by the sieve of Eratosthenes: the reference."""
    is_prime = [False, False] + [True] * max(n - 1, 0)
    for p in range(2, int(n**0.5) + 1):
        if is_prime[p]:
            is_prime[p * p :: p] = [False] * len(range(p * p, n + 1, p))
    return is_prime[: n + 1]


def count_below(n: int) -> int:
    return sum(primes_up_to(n - 1)) if n > 2 else 0


def check_counts_primes(ops):
    """count_primes(n) is the number of primes below n, for n = 0, 1, 2, 3, 100, 7919 and 10^5"""
    for n in [0, 1, 2, 3, 4, 100, 7919, 7920, 100_000]:
        got = ops.count_primes(n)
        expect(got == count_below(n), f"count_primes({n}): expected {count_below(n)}, got {got}")


def check_rejects_bad_arguments(ops):
    """a negative n or a report_every < 1 raises ValueError"""
    expect_error(lambda: ops.count_primes(-1), r"count_primes: n must be >= 0", error=ValueError)
    expect_error(
        lambda: ops.count_primes(10, report_every=0),
        r"count_primes: report_every must be >= 1",
        error=ValueError,
    )


def longest_stall(ops, **kwargs: object) -> tuple[float, float, int]:
    """Run count_primes(WORK_SIZE, **kwargs) in a thread while this thread spins in a Python loop.
    Returns the call's duration, the longest time within it that this thread did not advance,
    and the call's result."""
    span: dict[str, object] = {}

    def call() -> None:
        span["start"] = time.perf_counter()
        span["result"] = ops.count_primes(WORK_SIZE, **kwargs)
        span["end"] = time.perf_counter()

    worker = threading.Thread(target=call)
    ticks = [time.perf_counter()]
    worker.start()
    while worker.is_alive():
        now = time.perf_counter()
        if now - ticks[-1] > 0.0005:  # one stamp per half millisecond is enough to see a stall
            ticks.append(now)
    worker.join()
    if "end" not in span:
        raise CheckFailed(f"count_primes({WORK_SIZE}) raised instead of returning")
    start, end = span["start"], span["end"]
    # This thread can only run Python code while it holds the GIL: if count_primes keeps it,
    # nothing is stamped between start and end, and the stall is the whole call.
    inside = [start, *(t for t in ticks if start < t < end), end]
    stall = max(later - earlier for earlier, later in itertools.pairwise(inside))
    return end - start, stall, span["result"]


def check_other_threads_run_meanwhile(ops):
    """another Python thread keeps running while count_primes computes (it releases the GIL)"""
    expected = count_below(WORK_SIZE)
    for kwargs in [{}, {"on_progress": lambda k, count: None, "report_every": 50_000}]:
        duration, stall, result = longest_stall(ops, **kwargs)
        shown = f"count_primes({WORK_SIZE}{''.join(f', {k}=...' for k in kwargs)})"
        expect(result == expected, f"{shown}: expected {expected}, got {result}")
        expect(
            stall < 0.5 * duration,
            f"while {shown} ran for {duration * 1e3:.0f} ms in one thread, a Python loop in "
            f"another stood still for {stall * 1e3:.0f} ms: the call holds the GIL",
        )


def recorder() -> tuple[list[tuple[int, int]], Callable[[int, int], None]]:
    """A callback that records its calls, and the list it records them in."""
    calls: list[tuple[int, int]] = []
    return calls, lambda k, count: calls.append((k, count))


def check_reports_progress(ops):
    """on_progress(k, primes <= k) is called at each multiple k of report_every below n"""
    is_prime = primes_up_to(2000)
    for n, every in [(1000, 100), (12, 1), (1001, 1000), (999, 1000), (2000, 7)]:
        calls, on_progress = recorder()
        result = ops.count_primes(n, on_progress=on_progress, report_every=every)
        expected = [(k, sum(is_prime[: k + 1])) for k in range(2, n) if k % every == 0]
        shown = f"count_primes({n}, report_every={every})"
        expect(result == count_below(n), f"{shown} returned {result}, not {count_below(n)}")
        expect(
            calls == expected,
            f"{shown}: on_progress should be called {len(expected)} times, first with "
            f"{expected[:3]}; it was called {len(calls)} times, first with {calls[:3]}",
        )


class StopCounting(Exception):
    pass


def check_exception_in_callback_stops_the_count(ops):
    """an exception raised by on_progress stops count_primes and reaches its caller as it was"""
    calls: list[int] = []

    def on_progress(k: int, count: int) -> None:
        calls.append(k)
        if k >= 300:
            raise StopCounting(f"stop at {k}")

    try:
        ops.count_primes(10_000, on_progress=on_progress, report_every=100)
    except StopCounting as e:
        expect(str(e) == "stop at 300", f"the exception's message changed to {str(e)!r}")
        expect(calls == [100, 200, 300], f"on_progress was called at {calls}, not [100, 200, 300]")
        return
    except Exception as e:
        raise CheckFailed(f"expected StopCounting, got {type(e).__name__}: {e}") from None
    raise CheckFailed(f"count_primes returned although on_progress raised (calls: {calls[:5]})")
