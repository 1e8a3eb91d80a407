"""Turn Nsight Compute's text report (from profile_kernels.py under ncu) into one markdown table:
a line per kernel, the handful of numbers the lesson reads (one-block helper launches left out).

    python chapter3_cuda_kernels/ncu_summary.py ncu_report.txt > chapter3_ncu.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

COLUMNS = {
    "Duration": "µs",
    "DRAM Throughput": "DRAM % of peak",
    "Compute (SM) Throughput": "SM % of peak",
    "smsp__inst_executed.sum": "warp instructions",
    "Achieved Occupancy": "occupancy %",
    "Warp Cycles Per Issued Instruction": "cycles between issues",
    "Grid Size": "blocks",
    "Registers Per Thread": "registers",
}
KERNEL = re.compile(r"^\s*void (?:[\w:<>]+::)?(\w+)<(.*)>\(.*\) \(\d+, \d+, \d+\)x")
# torch.compile's Triton kernels have no template arguments: `triton_poi_fused_... (8192, 1, 1)x`.
TRITON_KERNEL = re.compile(r"^\s*(triton_\w+) \(\d+, \d+, \d+\)x")


def summarize(report: str) -> str:
    rows: list[dict] = []
    for line in report.splitlines():
        if match := KERNEL.match(line):
            name, arguments = match.groups()
            # Our kernels' template arguments say the dtype and vector width; PyTorch's run to
            # hundreds of characters of lambda types, and only the name helps there.
            rows.append({"kernel": f"{name}<{arguments}>" if len(arguments) < 30 else name})
        elif match := TRITON_KERNEL.match(line):
            # The same generated name for each dtype: number the repeats in launch order.
            name = match.group(1)
            repeats = sum(r["kernel"].startswith(name) for r in rows)
            rows.append({"kernel": f"{name} #{repeats + 1}" if repeats else name})
        elif rows:
            for metric in COLUMNS:
                fields = line.split()
                if line.strip().startswith(metric + " ") and fields:
                    rows[-1].setdefault(metric, fields[-1])
    header = ["kernel", *COLUMNS.values()]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * len(COLUMNS)]
    for row in rows:
        if row.get("Grid Size") == "1":
            continue  # a one-block helper launch (the zero fill of an atomic sum's accumulator)
        cells = [f"`{row['kernel']}`", *(row.get(metric, "") for metric in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(summarize(Path(sys.argv[1]).read_text()), end="")
