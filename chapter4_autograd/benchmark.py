"""Chapter 4's measurements on a CUDA GPU: forward + backward of fused_bias_relu against eager
PyTorch, torch.compile and the bytes floor; the LSTM cell against torch.nn.LSTMCell.

    python chapter4_autograd/benchmark.py                      # about a minute on an H100
    python chapter4_autograd/benchmark.py --quick --no-compile # seconds
    python chapter4_autograd/benchmark.py --out DIR            # DIR/chapter4_cuda.{md,json}

Timing as in chapter 3: CUDA events, L2 flushed and the GPU kept busy before each run, median.
The bytes floor is what forward and backward must move at least (forward: read x, write y;
backward: read grad_y and y, write grad_x: five tensors), divided by the bandwidth of a copy_
measured at the same size.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
from pathlib import Path

import torch

import functions


class Timer:
    """Median GPU time of fn() in milliseconds, each run with a cold L2 and a GPU already busy."""

    def __init__(self) -> None:
        self.flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")

    def median_ms(self, fn, runs: int = 30) -> float:
        fn()
        torch.cuda.synchronize()
        events = []
        for _ in range(runs):
            self.flush.zero_()
            torch.cuda._sleep(200_000)
            pair = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            pair[0].record()
            fn()
            pair[1].record()
            events.append(pair)
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in events)


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
        copy_ms = timer.median_ms(lambda: out.copy_(x))
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
            ms = timer.median_ms(fn)
            rows.append(
                {
                    "shape": [2**e, cols],
                    "case": name,
                    "ms": ms,
                    "floor_ms": floor_ms,
                    "of_floor": ms / floor_ms,
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

            rows.append({"batch": batch, "case": name, "ms": timer.median_ms(step)})
    return rows


def to_markdown(result: dict) -> str:
    lines = [
        f"{result['gpu']}; torch {result['torch']}, CUDA {result['cuda']}; {result['date']}.",
        "Forward + backward, median of CUDA-event timings with a cold L2.",
        "",
        "| x (float32) | case | ms | bytes floor, ms | time / floor |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for r in result["fused_bias_relu"]:
        shape = f"({r['shape'][0]:,}, {r['shape'][1]:,})"
        lines.append(
            f"| {shape} | {r['case']} | {r['ms']:.3f} | {r['floor_ms']:.3f} | {r['of_floor']:.2f} |"
        )
    lines += ["", "| LSTM cell, 512 → 512, float32 | case | ms |", "| --- | --- | ---: |"]
    for r in result["lstm"]:
        lines.append(f"| batch {r['batch']} | {r['case']} | {r['ms']:.3f} |")
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
