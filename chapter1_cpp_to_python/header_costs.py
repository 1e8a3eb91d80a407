"""What a torch header costs to compile: a file of one #include, parsed by the compiler, per header.

    python chapter1_cpp_to_python/header_costs.py --out DIR   # ~10 min on 2 cores; DIR/chapter1_header_costs.md

Each file is compiled with `-fsyntax-only` and the flags `load()` passes (torch's include paths,
-std=c++17), 3 times; the table gives the medians. Lesson: chapter 1, "Narrow headers".
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import include_paths

HERE = Path(__file__).resolve().parent
FUSED_BIAS_RELU = HERE.parent / "chapter2_tensor_api" / "fused_bias_relu.cpp"
RUNS = 3


def fused_bias_relu_includes() -> str:
    """The #define and #include <...> lines of chapter 2's fused_bias_relu.cpp, as it has them."""
    lines = FUSED_BIAS_RELU.read_text().splitlines()
    return "\n".join(line for line in lines if re.match(r"#(define|include <)", line))


# (row label, source file text), most expensive first.
SOURCES = {
    "`<torch/extension.h>`": "#include <torch/extension.h>",
    "`<ATen/ATen.h>`": "#include <ATen/ATen.h>",
    "`<torch/python.h>`": "#include <torch/python.h>",
    "`<torch/library.h>`": "#include <torch/library.h>",
    "`<torch/csrc/utils/pybind.h>` (pybind11 + the tensor caster)": "#include <torch/csrc/utils/pybind.h>",
    "`<ATen/core/Tensor.h>` (at::Tensor and its methods)": "#include <ATen/core/Tensor.h>",
    "chapter 2's `fused_bias_relu.cpp`: its defines and `#include <...>` lines": fused_bias_relu_includes(),
    "`<pybind11/pybind11.h>` (chapter 1's `addone.cpp`)": "#include <pybind11/pybind11.h>",
}


def compiler() -> str:
    return os.environ.get("CXX", "c++")  # what torch.utils.cpp_extension runs


def flags() -> list[str]:
    """The flags load() passes to the compiler, less -fPIC and the module name."""
    paths = [*include_paths(), sysconfig.get_paths()["include"]]
    return ["-std=c++17", "-DTORCH_API_INCLUDE_EXTENSION_H", *(f"-isystem{p}" for p in paths)]


def preprocessed_lines(source: Path) -> int:
    """Non-blank lines the compiler sees once every #include is pasted in."""
    out = subprocess.run(
        [compiler(), *flags(), "-E", "-P", str(source)], capture_output=True, text=True, check=True
    ).stdout
    return sum(1 for line in out.splitlines() if line.strip())


def compile_seconds(source: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one `-fsyntax-only` compile. CPU (user + system) counts only the
    compiler's own work, so it moves less than wall time when others share the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([compiler(), *flags(), "-fsyntax-only", str(source)], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, flags=re.M)
    cpu = model.group(1).strip() if model else platform.processor() or "unknown CPU"
    version = subprocess.run([compiler(), "--version"], capture_output=True, text=True).stdout
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"Machine: {cpu}, {os.cpu_count()} cores (load average {load} at the start); "
        f"torch {torch.__version__}, Python {sys.version.split()[0]}, "
        f"{version.splitlines()[0]}; {datetime.date.today().isoformat()}."
    )


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write DIR/chapter1_header_costs.md as well")
    args = parser.parse_args(argv)
    header = [
        machine(),
        "",
        f"`{compiler()} -fsyntax-only -std=c++17` with torch's include paths, on a file that holds "
        f"only the includes named; median of {RUNS} runs. CPU s is the compiler's user + system "
        "time.",
        "",
        "| includes | lines after preprocessing | wall s | CPU s |",
        "| --- | ---: | ---: | ---: |",
    ]
    print("\n".join(header), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, text) in enumerate(SOURCES.items()):
            source = Path(tmp) / f"header{i}.cpp"
            source.write_text(text + "\n")
            runs = [compile_seconds(source) for _ in range(RUNS)]
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            rows.append(f"| {label} | {preprocessed_lines(source):,} | {wall:.1f} | {cpu:.1f} |")
            print(rows[-1], flush=True)
    table = "\n".join([*header, *rows])
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter1_header_costs.md").write_text(table + "\n")
    return table


if __name__ == "__main__":
    main()
