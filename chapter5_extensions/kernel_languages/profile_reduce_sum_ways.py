"""Why reduce_sum's ways differ at 2^28 elements (benchmark_kernel_languages.py measured CUDA C++
at 96% of the floor in bfloat16, torch.compile 93%, Triton 92%, Helion 90%): one call of one
way, float32 then bfloat16, between cudaProfilerStart and Stop, for Nsight Compute; and a table of
what ncu saw, a row per kernel (a way may launch two or three: the partial sums, their sum, a
cast).

    for way in custom_ops nvrtc cuda_core compile triton helion; do
      echo "==$way==" >> ncu.csv
      ncu --csv --clock-control none --profile-from-start off --metrics "$(python \\
        chapter5_extensions/kernel_languages/profile_reduce_sum_ways.py --metrics)" \\
        python chapter5_extensions/kernel_languages/profile_reduce_sum_ways.py --way $way >> ncu.csv
    done
    python chapter5_extensions/kernel_languages/profile_reduce_sum_ways.py --summarize ncu.csv

One process per way: each kernel's name says little (NVRTC's and cuda.core's are the same
kernel), the section a way's rows sit in says which way it was. Lesson: chapter 5,
further/kernel_languages.md; results: docs/perf/h100/kernel_languages_reduce_ncu.md.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHAPTER = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(CHAPTER))  # custom_ops

import ncu_csv  # noqa: E402

ELEMENTS = 2**28
COLS = 1024
WAYS = {  # --way -> the module with its reduce_sum, and the name in the table
    "custom_ops": ("custom_ops", "CUDA C++ (custom_ops)"),
    "nvrtc": ("nvrtc_reduce_sum", "NVRTC"),
    "cuda_core": ("cuda_core_reduce_sum", "cuda.core"),
    "compile": (None, "torch.compile"),
    "triton": ("triton_reduce_sum", "Triton"),
    "helion": ("helion_reduce_sum", "Helion"),
}
# What each column is: time, how busy DRAM was and how much it moved, the launch's shape, how
# many warps were resident, the load instructions (fewer for the same bytes: wider loads), and
# the share of warp cycles spent waiting on a load (long scoreboard).
METRICS = {
    "gpu__time_duration.sum": "µs",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
    "dram__bytes_read.sum": "MB read",
    "launch__grid_size": "blocks",
    "launch__block_size": "threads",
    "launch__registers_per_thread": "registers",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "smsp__sass_inst_executed_op_global_ld.sum": "load instr. (warp)",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": (
        "long-scoreboard stalls per issue"
    ),
}


def run(way: str) -> None:
    """One call per dtype, compiled and warmed up before the profiled range."""
    import torch

    module, _ = WAYS[way]
    if module is None:
        fn = torch.compile(lambda x: torch.sum(x), dynamic=False)
    else:
        if module == "custom_ops":
            import build_inplace

            build_inplace.build_inplace()
        fn = importlib.import_module(module).reduce_sum
    inputs = [
        torch.randn(ELEMENTS // COLS, COLS, device="cuda", dtype=dtype)
        for dtype in (torch.float32, torch.bfloat16)
    ]
    for x in inputs:
        fn(x)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for x in inputs:
        fn(x)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def summarize(report: Path) -> str:
    """The ==way== sections of ncu's CSVs -> a markdown row per kernel, in launch order."""
    sections: dict[str, list[str]] = {}
    way = None
    for line in report.read_text().splitlines():
        if line.startswith("==") and line.endswith("=="):
            way = line.strip("=")
            sections[way] = []
        elif way is not None and line.startswith('"'):
            sections[way].append(line)
    to_us, to_mb = ncu_csv.TO_US, ncu_csv.TO_MB
    out = [
        "| way | dtype | kernel | " + " | ".join(METRICS.values()) + " |",
        "| --- | --- | --- | " + " | ".join("---:" for _ in METRICS) + " |",
    ]
    for way, lines in sections.items():
        # The float32 call's kernels, then the bfloat16 call's: the second call starts where the
        # first call's first kernel comes again, template arguments aside (Helion's bfloat16
        # call adds a third kernel, a cast).
        listed = ncu_csv.kernels(lines)

        def base(k: dict) -> str:
            return k["name"].split("<")[0]

        again = [i for i, k in enumerate(listed) if i and base(k) == base(listed[0])]
        half = again[0] if again else len(listed)
        for i, k in enumerate(listed):
            cells = []
            for metric in METRICS:
                value, unit = k[metric]
                if metric == "gpu__time_duration.sum":
                    cells.append(f"{value * to_us[unit]:.1f}")
                elif metric == "dram__bytes_read.sum":
                    cells.append(f"{value * to_mb[unit]:,.1f}")
                elif value >= 1000:
                    cells.append(f"{value:,.0f}")
                else:
                    cells.append(f"{value:.2f}".rstrip("0").rstrip("."))
            dtype = "float32" if i < half else "bfloat16"
            name = k["name"].split("(")[0][:60]
            out.append(f"| {WAYS[way][1]} | {dtype} | `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--way", choices=WAYS, help="run this way's calls, for ncu")
    parser.add_argument("--metrics", action="store_true", help="print ncu's --metrics list")
    parser.add_argument("--summarize", type=Path, help="the ==way== CSV -> a markdown table")
    args = parser.parse_args(argv)
    if args.metrics:
        print(",".join(METRICS))
    elif args.summarize:
        print(summarize(args.summarize), end="")
    elif args.way:
        run(args.way)
    else:
        parser.print_usage()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
