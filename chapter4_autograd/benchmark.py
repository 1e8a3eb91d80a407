"""Chapter 4's measurements on a CUDA GPU: forward + backward of fused_bias_relu against eager
PyTorch, torch.compile and the bytes floor; the LSTM cell against torch.nn.LSTMCell.

    python chapter4_autograd/benchmark.py                      # about a minute on an H100
    python chapter4_autograd/benchmark.py --quick --no-compile # seconds
    python chapter4_autograd/benchmark.py --out DIR            # DIR/chapter4_cuda.{md,json}

Three numbers per case, all from gpu_timer.py (the course's one GPU timer): GPU ms, the median
of CUDA-event timings of one call with a cold L2 and the host's launches hidden behind a GPU
sleep (5 ms at least); host ms, the CPU time to issue one forward + backward (Python, autograd,
launches); back-to-back ms, 20 calls in a row per call, what a training loop gets.
The bytes floor is what forward and backward must move at least (forward: read x, write y;
backward: read grad_y and y, write grad_x: five tensors), divided by the bandwidth of a copy_
measured at the same size.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch

import functions
from gpu_timer import Timer


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
        copy_ms = timer.gpu_ms(lambda: out.copy_(x))
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
            times = timer.measure(fn, loop=20)
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

            rows.append({"batch": batch, "case": name, **timer.measure(step, loop=20)})
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
    timer = Timer(min_sleep_ms=5.0)
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
