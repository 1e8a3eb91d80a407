"""Nsight Compute's CSV as written by `ncu --csv --metrics ...` (a row per kernel and metric),
read into a dict per kernel: what tune_tiles.py's and profile_reduce_sum_ways.py's --summarize
turn into markdown. Lesson: chapter 5, further/kernel_languages.md and tile_order.md."""

import csv

# Units ncu writes, to microseconds and to megabytes.
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}
TO_MB = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3}


def kernels(lines: list[str]) -> list[dict]:
    """The CSV's quoted lines (header first) -> a dict per kernel in launch order: "name", and
    (value, unit) for each metric name."""
    found: dict[str, dict] = {}
    for row in csv.DictReader(lines):
        k = found.setdefault(row["ID"], {"name": row["Kernel Name"]})
        k[row["Metric Name"]] = (float(row["Metric Value"].replace(",", "")), row["Metric Unit"])
    return list(found.values())
