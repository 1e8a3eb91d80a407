"""Where a step of the tensor-core persistent forward (csrc/cuda/lstm_persistent_tc.cu) waits, seen
with Nsight Compute's warp-stall sampling (further/lstm_layer_bounds.md, "Why it still loses").

    ncu -k regex:lstm_forward_persistent_tc --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
        --section SourceCounters -f -o tc \
        python chapter5_extensions/benchmarks/profile_lstm_tc.py 64 8 512      # T B H, float16
    ncu --import tc.ncu-rep --print-summary none      # duration, issued and eligible warps
    ncu --import tc.ncu-rep --page source --csv --print-source sass > tc.csv
    python chapter5_extensions/benchmarks/profile_lstm_tc.py --stalls tc.csv  # where warps wait

Run with T B H (all three, or none for 64 8 512), the script makes three inference forwards of
custom_ops.LSTM in float16, which take the tensor-core kernel where it runs by default (H a
multiple of 128 up to 1024, B <= 32 and B x H <= 16384); ncu profiles the second. With --stalls
it reads the SASS page ncu wrote and prints the instructions that collected the most stall samples,
with the instructions just before each: a warp's stall is sampled at the instruction it cannot
issue yet, so what it waits for is usually a few lines above (a barrier, a load, a fence).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STALLS = "Warp Stall Sampling (All Samples)"


def run_forward(steps: int, batch: int, hidden: int) -> None:
    """Three inference forwards at (T, B, H) in float16: the kernel for ncu to profile."""
    import torch

    sys.path.insert(0, str(HERE.parent))  # the chapter folder: build_inplace, custom_ops
    import build_inplace

    build_inplace.build_inplace()
    import custom_ops

    model = custom_ops.LSTM(hidden, hidden, device="cuda", dtype=torch.float16).eval()
    x = torch.randn(steps, batch, hidden, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        for _ in range(3):
            model(x)
    torch.cuda.synchronize()


def top_stalls(sass_csv: Path, top: int = 6, before: int = 10) -> str:
    """The `top` SASS lines with the most stall samples, each with the `before` lines above it."""
    rows = list(csv.reader(sass_csv.open()))
    header = next(i for i, row in enumerate(rows) if "Source" in row and STALLS in row)
    columns = rows[header]
    source, stalls = columns.index("Source"), columns.index(STALLS)
    executed = columns.index("Instructions Executed")
    lines = [row for row in rows[header + 1 :] if len(row) > stalls]

    def count(value: str) -> float:
        return float(value.replace(",", "") or 0)

    total = sum(count(row[stalls]) for row in lines) or 1.0
    ranked = sorted(range(len(lines)), key=lambda i: -count(lines[i][stalls]))[:top]
    shown = sorted({j for i in ranked for j in range(max(0, i - before), i + 1)})
    out = [f"{int(total)} stall samples; share, times executed, SASS:"]
    for k, j in enumerate(shown):
        if k == 0 or j != shown[k - 1] + 1:
            out.append("")
        share = 100 * count(lines[j][stalls]) / total
        out.append(f"{share:5.1f}%  {lines[j][executed]:>7}  {lines[j][source].strip()[:80]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", nargs="*", type=int, help="T B H (default 64 8 512)")
    parser.add_argument(
        "--stalls", type=Path, help="ncu's SASS page as CSV: print where warps wait"
    )
    args = parser.parse_args(argv)
    if args.stalls:
        print(top_stalls(args.stalls))
        return 0
    if args.shape and len(args.shape) != 3:
        parser.error("give T B H, all three, or none (64 8 512)")
    run_forward(*(args.shape or [64, 8, 512]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
