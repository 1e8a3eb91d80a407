"""The exercises' grading library: what a `check_<exercise>.py` file uses, and the runner that
`tools/check_exercise.py` (`make check EX=ch3/gelu`) calls.

A check file is a list of functions named `check_*`. Each takes the built exercise (`ops`) and,
if it has a `device` parameter, runs once on "cpu" and once on "cuda" (skipped, with the reason,
without a GPU). A check passes by returning; it fails by raising `CheckFailed` with a message a
learner can act on: `expect_close` says where the first wrong element is and what it should be,
`expect_error` which message was expected. Any other exception fails the check with its type and
first lines, never a raw traceback. An optional `benchmark(ops)` runs on a GPU and returns
`Bandwidth` results, each graded against the exercise's target fraction of `copy_` bandwidth.
"""

from __future__ import annotations

import inspect
import os
import re
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

import gpu_timer  # tools/gpu_timer.py, the same file as the chapters' (tests/test_repo.py)


class CheckFailed(AssertionError):
    """A check's verdict: what was expected and what came back."""


class Skip(Exception):
    """A check that cannot run here (it says why), such as a GPU-only check on a laptop."""


def cuda_skip_reason() -> str | None:
    if torch.version.cuda is None:
        return "no CUDA: this torch is a CPU-only build"
    if not torch.cuda.is_available():
        return "no CUDA device here (CUDA checks and the benchmark run on a GPU machine)"
    return None


def needs_cuda(*, large: bool = False) -> None:
    """Skip the calling check, with the reason, where there is no GPU. A `large` check (gigabytes
    of data) is also skipped under `check_exercise.py --small`, the run for compute-sanitizer."""
    reason = cuda_skip_reason()
    if reason:
        raise Skip(reason)
    if large and os.environ.get("EXERCISE_CHECK_SMALL") == "1":
        raise Skip("a large check, skipped under --small")


def _format_value(value: torch.Tensor) -> str:
    item = value.item()
    return f"{item:.6g}" if isinstance(item, float) else str(item)


def expect_close(
    got: object,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    what: str = "output",
) -> None:
    """Fail unless `got` is a tensor with `expected`'s shape, dtype and device whose every element
    is within atol + rtol * |expected| (NaN where expected is NaN). The message names the first
    wrong element: its index, the expected and the returned value, and how many are wrong."""
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{what}: expected a tensor, got {type(got).__name__}")
    for prop in ("shape", "dtype", "device"):
        want, have = getattr(expected, prop), getattr(got, prop)
        if prop == "shape":
            want, have = tuple(want), tuple(have)
        if want != have:
            raise CheckFailed(f"{what}: expected {prop} {want}, got {have}")
    if expected.numel() == 0:
        return
    got_c, expected_c = got.detach().cpu(), expected.detach().cpu()
    if got_c.is_floating_point() and got_c.dtype not in (torch.float32, torch.float64):
        got_c, expected_c = got_c.float(), expected_c.float()
    close = torch.isclose(got_c, expected_c, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return
    wrong = (~close).nonzero()
    index = tuple(int(i) for i in wrong[0])
    shown = index if len(index) != 1 else f"[{index[0]}]"
    raise CheckFailed(
        f"{what}: {len(wrong)} of {expected.numel()} elements differ; first at index {shown}: "
        f"expected {_format_value(expected_c[index])}, got {_format_value(got_c[index])} "
        f"(allowed: atol {atol:g} + rtol {rtol:g} * |expected|), shape {tuple(expected.shape)}"
    )


def expect_error(call: Callable[[], object], match: str, *, error: type = RuntimeError) -> None:
    """Fail unless `call()` raises `error` whose message contains the regular expression `match`
    (the exercise's TORCH_CHECK, written with the op's name, the argument and what was wrong)."""
    try:
        call()
    except error as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
        if not re.search(match, str(e)):
            raise CheckFailed(
                f"expected a {error.__name__} matching {match!r}, got: {first_line!r}"
            ) from None
        return
    except Exception as e:
        raise CheckFailed(
            f"expected a {error.__name__} matching {match!r}, got {type(e).__name__}: {e}"
        ) from None
    raise CheckFailed(f"expected a {error.__name__} matching {match!r}; the call returned")


def expect(condition: bool, message: str) -> None:
    """Fail with `message` unless `condition` holds (for checks that are not about values)."""
    if not condition:
        raise CheckFailed(message)


# ---- the benchmark ------------------------------------------------------------------------------


@dataclass
class Bandwidth:
    """One benchmark row: the op's time and bandwidth next to a copy_ of the same bytes."""

    label: str
    ms: float
    gbps: float
    copy_gbps: float
    target: float

    @property
    def fraction(self) -> float:
        return self.gbps / self.copy_gbps

    @property
    def ok(self) -> bool:
        return self.fraction >= self.target


_timer = None


def cuda_time_ms(fn: Callable[[], object]) -> float:
    """Median GPU time of fn() in ms, timed as the chapters' benchmarks time theirs (gpu_timer.py:
    CUDA events, cold L2, host hidden, warm-up first), so a target met here is met there."""
    global _timer
    if _timer is None:
        _timer = gpu_timer.Timer()
    return _timer.gpu_ms(fn)


def measure_bandwidth(
    label: str, fn: Callable[[], object], *, bytes_moved: int, target: float
) -> Bandwidth:
    """Time fn (which reads and writes `bytes_moved` bytes of global memory in all) and the floor:
    `copy_` between two buffers of bytes_moved / 2 bytes each, which moves the same bytes."""
    half = bytes_moved // 2
    src = torch.empty(half, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = cuda_time_ms(lambda: dst.copy_(src))
    ms = cuda_time_ms(fn)
    return Bandwidth(label, ms, bytes_moved / ms / 1e6, bytes_moved / copy_ms / 1e6, target)


# ---- the runner ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str = ""


def _describe(fn: Callable, device: str | None) -> str:
    doc = inspect.getdoc(fn)
    name = doc.splitlines()[0].rstrip(".") if doc else fn.__name__.removeprefix("check_")
    return f"{name} [{device}]" if device else name


# The learner's source files (the checker adds them): an error raised in one is shown there.
LEARNER_FILES: set[str] = set()


def _explain(error: BaseException) -> str:
    if isinstance(error, CheckFailed):
        return str(error)
    text = str(error).replace("(scroll up for stack trace)", "")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    text = " / ".join(lines[:3]) if lines else ""
    # Where it happened: the last frame in the learner's file, else in the check file.
    frames = traceback.extract_tb(error.__traceback__)
    mine = [f for f in frames if f.filename in LEARNER_FILES]
    checks = [f for f in frames if "/exercises/check_" in f.filename]
    at = (mine or checks or [None])[-1]
    where = f" (at {Path(at.filename).name}:{at.lineno}, in {at.name})" if at else ""
    return f"{type(error).__name__}: {text}{where}"


def run_checks(
    check_module: ModuleType, ops: object, before: Callable[[str], None] = lambda name: None
) -> Iterator[Outcome]:
    """Run every check_* of the module in file order, on each device it asks for, yielding each
    verdict as it comes; `before(name)` is called as each check starts."""
    no_cuda = cuda_skip_reason()
    checks = [
        fn
        for name, fn in vars(check_module).items()
        if name.startswith("check_") and inspect.isfunction(fn)
    ]
    checks.sort(key=lambda fn: fn.__code__.co_firstlineno)
    for fn in checks:
        takes_device = "device" in inspect.signature(fn).parameters
        for device in ("cpu", "cuda") if takes_device else (None,):
            name = _describe(fn, device)
            if device == "cuda" and no_cuda:
                yield Outcome(name, "SKIP", no_cuda)
                continue
            before(name)
            try:
                fn(ops, torch.device(device)) if takes_device else fn(ops)
                if device == "cuda":
                    torch.cuda.synchronize()  # an asynchronous kernel fault belongs to this check
                yield Outcome(name, "PASS")
            except Skip as e:
                yield Outcome(name, "SKIP", str(e))
            except Exception as e:
                yield Outcome(name, "FAIL", _explain(e))


def run_benchmark(check_module: ModuleType, ops: object) -> list[Outcome]:
    """The exercise's benchmark on a GPU, graded against its bandwidth target."""
    benchmark = getattr(check_module, "benchmark", None)
    if benchmark is None:
        return []
    reason = cuda_skip_reason()
    if reason:
        return [Outcome("benchmark", "SKIP", reason)]
    try:
        rows = benchmark(ops)
    except Exception as e:
        return [Outcome("benchmark", "FAIL", _explain(e))]
    outcomes = []
    for row in rows:
        detail = (
            f"{row.ms:.4f} ms, {row.gbps:,.0f} GB/s = {row.fraction:.0%} of copy_ "
            f"({row.copy_gbps:,.0f} GB/s); target {row.target:.0%}"
        )
        outcomes.append(Outcome(f"fast: {row.label}", "PASS" if row.ok else "FAIL", detail))
    return outcomes
