"""The course's one GPU timer: every benchmark and the exercise grader time CUDA work with it.

    from gpu_timer import Timer
    timer = Timer()
    timer.gpu_ms(lambda: op(x))     # median GPU milliseconds of one call
    timer.measure(lambda: op(x))    # GPU, host and back-to-back milliseconds, as a dict

Identical copies live in chapter2_tensor_api/, chapter3_cuda_kernels/, chapter4_autograd/,
chapter5_extensions/benchmarks/ and tools/, so that each chapter folder runs on its own;
tests/test_repo.py fails if they differ. Lesson: chapter 3, "How the kernels are timed".
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

# Larger than any GPU's L2 (H100: 50 MB), so that writing it evicts whatever the last run left.
FLUSH_BYTES = 256 * 2**20


def event_ms(fn: Callable[[], object]) -> float:
    """GPU milliseconds between two CUDA events around fn(), which includes any wait for the host."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


class Timer:
    """Three times for one call of fn(), each answering a different question:

    gpu_ms   How long the GPU works on one call. CUDA events around the call, the median of
             `runs`. Before each run the L2 cache is flushed (a cold cache, as for a layer whose
             input was written long ago) and the GPU sleeps long enough for the host to queue the
             whole call (4 times the host's time for one call, 2 ms at least, 100 ms at most), so
             the events see the GPU's work and not the host's launch overhead. A run whose host
             time outlasted the sleep anyway is counted in `runs_host_not_hidden`.
    host_ms  The CPU time to issue one call (Python, the dispatcher, autograd, launches), taken
             while the GPU sleeps, so that nothing in the call waits for the GPU.
    loop_ms  Events around `loop` calls in a row, per call (median of 5 loops), with a warm L2:
             what a training loop sees, roughly the larger of the other two.

    The first call is a warm-up (first launch, caching allocator, torch.compile's compilation)
    and is never timed. A wall clock around GPU work would time only the launches: kernels run
    asynchronously, and only events (or a synchronize) see when they end.
    """

    def __init__(self, min_sleep_ms: float = 2.0, max_sleep_ms: float = 100.0) -> None:
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        self.min_sleep_ms, self.max_sleep_ms = min_sleep_ms, max_sleep_ms
        self.calibrate()

    def calibrate(self) -> None:
        """torch.cuda._sleep(cycles) spins the GPU for a number of clock cycles. The first spin of
        a process measured 30 times fewer cycles a millisecond than the ones after it (an H200,
        docs/perf/h100/timer_sleep_calibration.md), and a sleep sized from it ends too soon to
        hide a slow call's host time. So: measured after a warm-up spin, and before each
        measure()."""
        torch.cuda._sleep(2_000_000)
        self.cycles_per_ms = 2_000_000 / event_ms(lambda: torch.cuda._sleep(2_000_000))

    def sleep(self, ms: float) -> None:
        torch.cuda._sleep(int(ms * self.cycles_per_ms))

    def host_ms(self, fn: Callable[[], object], sleep_ms: float = 10.0) -> float:
        """CPU milliseconds to issue fn() while the GPU sleeps, so that no launch waits for a full
        queue. A call that takes the host longer than sleep_ms has the GPU's time added only if
        it synchronizes (.item(), a CPU copy), which is then part of its cost anyway."""
        self.sleep(sleep_ms)
        begin = time.perf_counter()
        fn()
        elapsed = (time.perf_counter() - begin) * 1e3
        torch.cuda.synchronize()
        return elapsed

    def measure(self, fn: Callable[[], object], runs: int = 30, loop: int = 10) -> dict:
        """gpu_ms, host_ms and loop_ms of fn() (see the class), with `runs` and
        `runs_host_not_hidden`; loop=0 leaves loop_ms out."""
        fn()
        torch.cuda.synchronize()
        self.calibrate()
        host = statistics.median(self.host_ms(fn) for _ in range(3))
        sleep_ms = min(max(self.min_sleep_ms, 4 * host), self.max_sleep_ms)
        events, late = [], 0
        for _ in range(runs):
            self.flush.zero_()
            self.sleep(sleep_ms)
            pair = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin = time.perf_counter()
            pair[0].record()
            fn()
            pair[1].record()
            late += (time.perf_counter() - begin) * 1e3 > sleep_ms
            events.append(pair)
        torch.cuda.synchronize()
        result = {
            "gpu_ms": statistics.median(s.elapsed_time(e) for s, e in events),
            "runs": runs,
            "runs_host_not_hidden": late,
            "host_ms": host,
        }
        if loop:

            def back_to_back() -> None:
                for _ in range(loop):
                    fn()

            result["loop_ms"] = statistics.median(event_ms(back_to_back) for _ in range(5)) / loop
        return result

    def gpu_ms(self, fn: Callable[[], object], runs: int = 30) -> float:
        """Median GPU milliseconds of one call of fn(), cold L2, host time hidden."""
        return self.measure(fn, runs=runs, loop=0)["gpu_ms"]

    def measure_in_turns(self, fns: dict, rounds: int = 3, **kwargs) -> dict:
        """measure() of every fn, `rounds` times with the fns taking turns, so that a slow drift of
        the GPU (clocks, temperature) touches all of them alike; per fn the median of its rounds."""
        results: dict = {name: [] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                results[name].append(self.measure(fn, **kwargs))
        merged = {}
        for name, rs in results.items():
            merged[name] = {key: statistics.median(r[key] for r in rs) for key in rs[0]}
            merged[name]["runs"] = sum(r["runs"] for r in rs)
            merged[name]["runs_host_not_hidden"] = sum(r["runs_host_not_hidden"] for r in rs)
        return merged
