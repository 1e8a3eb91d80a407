"""Chapter 4's measurements on a CUDA GPU: forward + backward of fused_bias_relu against eager
PyTorch, torch.compile and the bytes floor; the LSTM cell against torch.nn.LSTMCell.

    python chapter4_autograd/benchmark.py                      # about a minute on an H100
    python chapter4_autograd/benchmark.py --quick --no-compile # seconds
    python chapter4_autograd/benchmark.py --out DIR            # DIR/chapter4_cuda.{md,json}

Three numbers per case. GPU ms: the median of CUDA-event timings, each run with a cold L2 and
the GPU kept asleep first, long enough for the host to queue all of the run's kernels (5 ms, or
4 times the host's time for one call when that is longer, as on a busy machine, up to 100 ms),
so the events see the GPU's work and not the host's; runs where the host was slower anyway are
counted. Host ms: the CPU time to issue one
forward + backward (Python, autograd, launches), measured while the GPU sleeps. Back-to-back ms:
CUDA events around 20 calls in a row (median of 5 such loops), what a training loop gets, limited
by the slower of the two.
The bytes floor is what forward and backward must move at least (forward: read x, write y;
backward: read grad_y and y, write grad_x: five tensors), divided by the bandwidth of a copy_
measured at the same size.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path

import torch

import functions


def event_ms(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


class Timer:
    """GPU, host and back-to-back milliseconds of fn() (see the module's docstring)."""

    def __init__(self, sleep_ms: float = 5.0) -> None:
        self.flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
        # torch.cuda._sleep counts GPU clock cycles: find how many make sleep_ms.
        cycles_per_ms = 1_000_000 / event_ms(lambda: torch.cuda._sleep(1_000_000))
        self.sleep_cycles = int(sleep_ms * cycles_per_ms)
        self.sleep_ms = sleep_ms

    def measure(self, fn, runs: int = 30, loop: int = 20) -> dict:
        fn()
        torch.cuda.synchronize()
        first_host_ms = []
        for _ in range(3):
            begin = time.perf_counter()
            fn()
            first_host_ms.append((time.perf_counter() - begin) * 1e3)
            torch.cuda.synchronize()
        # 4 times the host's time, within [5 ms, 100 ms]: a long sleep per run adds up fast.
        sleep_ms = min(max(self.sleep_ms, 4 * statistics.median(first_host_ms)), 100.0)
        sleep_cycles = int(self.sleep_cycles * sleep_ms / self.sleep_ms)
        events, host_ms = [], []
        for _ in range(runs):
            self.flush.zero_()
            torch.cuda._sleep(sleep_cycles)
            pair = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin = time.perf_counter()  # CPU work only: the GPU is asleep while fn() issues
            pair[0].record()
            fn()
            pair[1].record()
            host_ms.append((time.perf_counter() - begin) * 1e3)
            events.append(pair)
        torch.cuda.synchronize()
        host = statistics.median(host_ms)

        def back_to_back() -> None:
            for _ in range(loop):
                fn()

        return {
            "gpu_ms": statistics.median(s.elapsed_time(e) for s, e in events),
            # A run the host took longer to issue than the GPU slept: its GPU time includes
            # waiting for the host.
            "runs_host_not_hidden": sum(ms > sleep_ms for ms in host_ms),
            "host_ms": host,
            "loop_ms": statistics.median(event_ms(back_to_back) for _ in range(5)) / loop,
        }


def fused_rows(timer: Timer, row_exponents, use_compile: bool) -> list[dict]:
    cols, scale = 4096, 0.5

    def eager(x, bias):
        return torch.relu(x * scale + bias)

    rows = []
    for e in row_exponents:
        x = torch.randn(2**e, cols, device="cuda", requires_grad=True)
        bias = torch.randn(cols, device="cuda", requires_grad=True)
        grad_y = torch.randn(2**e, cols, device="cuda")
        out = torch.empty_like(x)
        copy_ms = timer.measure(lambda: out.copy_(x))["gpu_ms"]
        floor_ms = 5 / 2 * copy_ms  # five tensors' worth of bytes; a copy moves two

        def forward_backward(f):
            return lambda: torch.autograd.grad(f(x, bias), (x, bias), grad_y)

        cases = {
            "eager PyTorch": forward_backward(eager),
            "ours (autograd.Function)": forward_backward(
                lambda x, b: functions.fused_bias_relu(x, b, scale)
            ),
            "ours (C++ autograd::Function)": forward_backward(
                lambda x, b: functions.ext.fused_bias_relu_cpp_autograd(x, b, scale)
            ),
        }
        if use_compile:
            torch._dynamo.reset()
            cases["torch.compile"] = forward_backward(torch.compile(eager, dynamic=False))
        for name, fn in cases.items():
            times = timer.measure(fn)
            rows.append(
                {
                    "shape": [2**e, cols],
                    "case": name,
                    **times,
                    "floor_ms": floor_ms,
                    "of_floor": times["gpu_ms"] / floor_ms,
                }
            )
    return rows


def lstm_rows(timer: Timer, quick: bool) -> list[dict]:
    rows = []
    for batch in [8, 1024] if not quick else [8]:
        torch.manual_seed(0)
        reference = torch.nn.LSTMCell(512, 512, device="cuda")
        ours = functions.LSTMCell(512, 512, device="cuda")
        ours.load_state_dict(reference.state_dict())
        x = torch.randn(batch, 512, device="cuda", requires_grad=True)
        state = (torch.randn(batch, 512, device="cuda"), torch.randn(batch, 512, device="cuda"))
        for name, cell in {"torch.nn.LSTMCell": reference, "ours": ours}.items():

            def step(cell=cell):
                h, c = cell(x, state)
                return torch.autograd.grad(h.sum() + c.sum(), (x, *cell.parameters()))

            rows.append({"batch": batch, "case": name, **timer.measure(step)})
    return rows


def to_markdown(result: dict) -> str:
    lines = [
        f"{result['gpu']}; torch {result['torch']}, CUDA {result['cuda']}; {result['date']}.",
        "Forward + backward. GPU: median of CUDA-event timings, cold L2, host hidden; host: CPU",
        "time to issue one call; back to back: per call, 20 calls in a row (median of 5).",
        "",
        "| x (float32) | case | GPU ms | host ms | back to back ms | bytes floor, ms "
        "| GPU / floor |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["fused_bias_relu"]:
        shape = f"({r['shape'][0]:,}, {r['shape'][1]:,})"
        lines.append(
            f"| {shape} | {r['case']} | {r['gpu_ms']:.3f} | {r['host_ms']:.3f} "
            f"| {r['loop_ms']:.3f} | {r['floor_ms']:.3f} | {r['of_floor']:.2f} |"
        )
    lines += [
        "",
        "| LSTM cell, 512 → 512, float32 | case | GPU ms | host ms | back to back ms |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for r in result["lstm"]:
        lines.append(
            f"| batch {r['batch']} | {r['case']} | {r['gpu_ms']:.3f} | {r['host_ms']:.3f} "
            f"| {r['loop_ms']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--out", type=Path, help="write chapter4_cuda.{md,json} here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmark.py needs a CUDA GPU (torch.cuda.is_available() is False); the tables in")
        print("the lesson were measured on one (see docs/perf/h100/).")
        return 2
    torch.manual_seed(0)
    timer = Timer()
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.date.today().isoformat(),
        "fused_bias_relu": fused_rows(
            timer, [8, 10] if args.quick else [8, 12, 16], not args.no_compile
        ),
        "lstm": lstm_rows(timer, args.quick),
    }
    table = to_markdown(result)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter4_cuda.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "chapter4_cuda.md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
