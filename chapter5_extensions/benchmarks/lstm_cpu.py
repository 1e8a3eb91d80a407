"""custom_ops.LSTM against nn.LSTM on the CPU: forward and backward of one layer, float32.

    python chapter5_extensions/benchmarks/lstm_cpu.py              # prints the table (a minute)
    python chapter5_extensions/benchmarks/lstm_cpu.py --out DIR    # also DIR/lstm_cpu.md

The CPU work is synchronous, so torch.utils.benchmark's wall-clock timer is the right one here
(no GPU events needed). The two layers take turns, loaded with the same weights. Lesson: chapter 5,
part 2, "On a CPU".
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
from pathlib import Path

import torch
import torch.utils.benchmark as benchmark

CHAPTER = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHAPTER))  # build_inplace and the package

import build_inplace  # noqa: E402

# (T, B, H): the lesson's CPU shapes, input size = H.
SHAPES = [(64, 8, 128), (64, 32, 256)]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


CALLS = 10  # per turn and per layer: both pay the same number of calls
TURNS = 5


def fwd_bwd_ms(layer: torch.nn.Module, x: torch.Tensor) -> float:
    """Milliseconds per forward and backward, averaged over CALLS calls in a row."""

    def step() -> None:
        layer(x)[0].sum().backward()

    step()  # warm-up: the first call allocates
    threads = torch.get_num_threads()
    timer = benchmark.Timer(stmt="step()", globals={"step": step}, num_threads=threads)
    return timer.timeit(CALLS).median * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write lstm_cpu.md here")
    args = parser.parse_args(argv)
    build_inplace.build_inplace()
    import custom_ops

    torch.manual_seed(0)
    rows = [
        "| T, B, H | custom_ops.LSTM ms | nn.LSTM ms | ours / nn.LSTM |",
        "| --- | ---: | ---: | ---: |",
    ]
    for t, b, h in SHAPES:
        reference = torch.nn.LSTM(h, h)
        ours = custom_ops.LSTM(h, h)
        ours.load_state_dict(reference.state_dict())
        x = torch.randn(t, b, h, requires_grad=True)
        times = {"ours": [], "nn.LSTM": []}
        for _ in range(TURNS):  # in turns, so that a slow spell of the machine hits both
            times["ours"].append(fwd_bwd_ms(ours, x))
            times["nn.LSTM"].append(fwd_bwd_ms(reference, x))
        mine, theirs = statistics.median(times["ours"]), statistics.median(times["nn.LSTM"])
        rows.append(f"| {t}, {b}, {h} | {mine:.1f} | {theirs:.1f} | {mine / theirs:.2f} |")
    machine = (
        f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"{datetime.date.today().isoformat()}"
    )
    table = "\n".join(rows)
    print(f"forward + backward of one LSTM layer, float32, on the CPU ({machine})\n\n{table}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "lstm_cpu.md").write_text(
            "# custom_ops.LSTM against nn.LSTM on the CPU\n\n"
            f"Forward and backward of one layer, float32, input size H; the median of {TURNS} "
            f"turns of each layer, each turn {CALLS} calls in a row, written by `chapter5_extensions/benchmarks/lstm_cpu.py` on {machine}.\n\n"
            f"{table}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
