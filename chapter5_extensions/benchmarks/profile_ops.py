"""Where the time of a model using custom_ops goes, seen with torch.profiler and NVTX ranges
(chapter 5, further/profiling.md, "Profiling a model that uses the ops").

    python chapter5_extensions/benchmarks/profile_ops.py                # table per op, on CUDA if there is one
    python chapter5_extensions/benchmarks/profile_ops.py --out DIR      # also DIR/profile_ops.json, a trace
    nsys profile -t cuda,nvtx -o lstm python chapter5_extensions/benchmarks/profile_ops.py   # Nsight Systems

The same sequence (T = 16 steps, B = 8, H = 256) goes through an LSTM twice, forward and backward:
as a Python loop of custom_ops.LSTMCell, one op call per step, and as custom_ops.LSTM, one op for
the whole sequence. record_function names each half in the profiler's table and trace; the NVTX
ranges name the same halves on Nsight Systems' timeline. The Chrome trace opens in
https://ui.perfetto.dev (or chrome://tracing).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the chapter folder: build_inplace, custom_ops

from benchmark_lstm import cell_loop  # noqa: E402  (a Python loop of a cell, as written by hand)

STEPS, BATCH, HIDDEN = 16, 8, 256


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write profile_ops.json (a Chrome trace) here")
    parser.add_argument("--rows", type=int, default=14, help="rows of the table")
    args = parser.parse_args(argv)
    import build_inplace

    build_inplace.build_inplace()
    import custom_ops

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    cell = custom_ops.LSTMCell(HIDDEN, HIDDEN, device=device)
    layer = custom_ops.LSTM(HIDDEN, HIDDEN, device=device)
    x = torch.randn(STEPS, BATCH, HIDDEN, device=device, requires_grad=True)
    runs = {
        "cell loop": lambda: cell_loop(cell)(x).sum().backward(),
        "layer": lambda: layer(x)[0].sum().backward(),
    }
    for run in runs.values():  # warm-up: the first calls pay for cuBLAS handles and allocations
        run()
    if device == "cuda":
        torch.cuda.synchronize()

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for name, run in runs.items():
            # The profiler sees record_function; Nsight Systems sees the NVTX range.
            if device == "cuda":
                torch.cuda.nvtx.range_push(name)
            with record_function(name):
                run()
                if device == "cuda":
                    torch.cuda.synchronize()
            if device == "cuda":
                torch.cuda.nvtx.range_pop()

    sort_by = "cuda_time_total" if device == "cuda" else "cpu_time_total"
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"{where}; torch {torch.__version__}; {datetime.date.today().isoformat()}")
    print(f"T = {STEPS}, B = {BATCH}, H = I = {HIDDEN}, float32, forward + backward, each once\n")
    print(prof.key_averages().table(sort_by=sort_by, row_limit=args.rows, max_name_column_width=48))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(args.out / "profile_ops.json"))
        print(f"trace: {args.out / 'profile_ops.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
