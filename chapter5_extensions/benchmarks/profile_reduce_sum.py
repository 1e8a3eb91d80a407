"""Why torch.compile's generated sum is faster than reduce_sum at some sizes: one launch of each sum
(custom_ops.reduce_sum, torch.sum, and torch.compile(torch.sum)) at 2^10, 2^16, 2^20 and 2^24
float32 elements, for Nsight Compute to measure, and a markdown table of what it measured
(lesson: "What it costs (H100)").

    ncu --csv --clock-control none --profile-from-start off --metrics <METRICS below> \\
        python chapter5_extensions/benchmarks/profile_reduce_sum.py > ncu.csv
    python chapter5_extensions/benchmarks/profile_reduce_sum.py --summarize ncu.csv > reduce_sum_ncu.md
    python chapter5_extensions/benchmarks/profile_reduce_sum.py --timeline     # the GPU's timeline, 2^24

Only the launches between torch.cuda.profiler.start() and stop() are profiled: not the build,
nor torch.compile's autotuning. ncu times each kernel alone (it replays it), so its durations
leave out what a sequence of launches adds: the gap before each kernel, and the memset that zeroes
reduce_sum's block counter. benchmark.py measures those.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

SIZES = [10, 16, 20, 24]  # log2 of the number of float32 elements
METRICS = [
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__grid_size",
    "launch__block_size",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
]
COLUMNS = {  # metric -> column of the table
    "gpu__time_duration.sum": "µs",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "launch__grid_size": "blocks",
    "launch__block_size": "threads a block",
    "launch__registers_per_thread": "registers",
}


def run() -> None:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import build_inplace

    build_inplace.build_inplace()
    import custom_ops

    compiled = torch.compile(torch.sum, dynamic=False)
    inputs = [torch.randn(2**k, device="cuda") for k in SIZES]
    for x in inputs:  # compile and autotune each size before profiling starts
        compiled(x), custom_ops.reduce_sum(x), torch.sum(x)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    # torch.sum's one kernel (reduce_kernel) opens each size: summarize() relies on that order.
    for x in inputs:
        torch.sum(x)
        custom_ops.reduce_sum(x)
        compiled(x)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def timeline() -> None:
    """What the GPU runs for one call of each sum at 2^24 elements, as the benchmark times it:
    after a 256 MB buffer is written (the cold-L2 flush, which leaves L2 full of dirty lines) and a
    2 ms spin, then the call; torch.profiler's CUDA activity, each operation's time and the gap
    before it (last of three calls)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import build_inplace

    build_inplace.build_inplace()
    import custom_ops

    x = torch.randn(2**24, device="cuda")
    flush = torch.empty(2**26, device="cuda")
    compiled = torch.compile(torch.sum, dynamic=False)
    sums = {"custom_ops.reduce_sum": custom_ops.reduce_sum, "torch.compile": compiled}
    sums["torch.sum"] = torch.sum
    for f in sums.values():
        f(x)
    torch.cuda.synchronize()
    for name, f in sums.items():
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                flush.zero_()
                torch.cuda._sleep(2_000_000)
                f(x)
            torch.cuda.synchronize()
        events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        events.sort(key=lambda e: e.time_range.start)
        print(name)
        end = None
        for e in events[-4:]:
            gap = "" if end is None else f" gap {e.time_range.start - end:.1f} us"
            print(f"   {e.name[:50]:50s} {e.time_range.end - e.time_range.start:8.1f} us{gap}")
            end = e.time_range.end


def kernel_label(name: str) -> str:
    if "reduce_kernel" in name:
        return "torch.sum (reduce_kernel)"
    if "sum_kernel" in name:
        return "custom_ops.reduce_sum (sum_kernel)"
    if name.startswith("triton"):
        return f"torch.compile ({name.split('(')[0].strip()})"
    return name[:60]


def summarize(report: Path) -> str:
    """ncu's CSV (a row per kernel and metric) -> a markdown row per kernel, by size."""
    lines = [line for line in report.read_text().splitlines() if line.startswith('"')]
    kernels: dict[str, dict] = {}  # by ID, in launch order (dicts keep insertion order)
    for row in csv.DictReader(lines):
        k = kernels.setdefault(row["ID"], {"name": row["Kernel Name"]})
        k[row["Metric Name"]] = (row["Metric Value"].replace(",", ""), row["Metric Unit"])
    out = [
        "| elements | kernel | " + " | ".join(COLUMNS.values()) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in COLUMNS) + " |",
    ]
    to_us = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}
    size = -1
    for k in kernels.values():
        if "reduce_kernel" in k["name"]:
            size += 1  # torch.sum's kernel opens each size (run())
        value, unit = k["gpu__time_duration.sum"]
        values = [f"{float(value) * to_us[unit]:.2f}"] + [k[m][0] for m in list(COLUMNS)[1:]]
        out.append(f"| 2^{SIZES[size]} | {kernel_label(k['name'])} | " + " | ".join(values) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--summarize":
        print(summarize(Path(sys.argv[2])), end="")
    elif sys.argv[1:] == ["--timeline"]:
        timeline()
    else:
        run()
