"""Chapter 2's measurements on the CPU: the three fused_bias_relu versions against eager PyTorch,
torch.compile and a copy of the same bytes; what a second thread buys; dispatch overhead;
(B, T, F) @ (F, H) four ways.

    python chapter2_tensor_api/benchmark.py                # about a minute on 2 cores
    python chapter2_tensor_api/benchmark.py --quick --no-compile   # seconds
    python chapter2_tensor_api/benchmark.py --out DIR      # also writes DIR/chapter2_cpu.{json,md}

Timings: torch.utils.benchmark (warm-up, then the median of blocked runs), random inputs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path

import torch
from torch.utils import benchmark as tb

import load_chapter2


def median_s(fn, min_run_time: float) -> float:
    fn()  # warm-up: first-call allocations and, for torch.compile, compilation
    return (
        tb.Timer(stmt="fn()", globals={"fn": fn})
        .blocked_autorange(min_run_time=min_run_time)
        .median
    )


def minor_faults_per_call(fn, calls: int = 10) -> float:
    """Page faults the kernel served while fn ran, per call. A minor fault is the first touch of
    a page the process was given but never used: the OS must find, zero and map 4 KiB."""
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def fused_bias_relu_table(ext, quick: bool, use_compile: bool) -> list[dict]:
    cols = 1024
    exponents = range(10, 17, 2) if quick else range(10, 25, 2)
    scale = 0.5
    eager = lambda x, b: torch.relu(x * scale + b)  # noqa: E731
    compiled = torch.compile(eager) if use_compile else None
    rows = []
    for e in exponents:
        numel = 2**e
        x = torch.randn(numel // cols, cols)
        bias = torch.randn(cols)
        out = torch.empty_like(x)
        bytes_moved = 2 * x.numel() * x.element_size()  # read x once, write out once
        # The floor is copy_ into a buffer that already exists: the same bytes read and written,
        # nothing else. clone does the same copy into a fresh allocation, as every op here does;
        # the gap between the two is page faults (lesson: "Where the time goes on a CPU").
        cases = {
            "copy_ into existing out": lambda: out.copy_(x),
            "clone (alloc + copy)": lambda: x.clone(),
            "eager PyTorch": lambda: eager(x, bias),
            "v1 ATen ops": lambda: ext.fused_bias_relu_v1_aten(x, bias, scale),
            "v2 loop": lambda: ext.fused_bias_relu_v2_loop(x, bias, scale),
            "v3 parallel": lambda: ext.fused_bias_relu_v3_parallel(x, bias, scale),
        }
        if compiled is not None:
            cases["torch.compile"] = lambda: compiled(x, bias)
        min_time = 0.05 if quick else 0.3
        times = {name: median_s(fn, min_time) for name, fn in cases.items()}
        for name, t in times.items():
            rows.append(
                {
                    "numel": numel,
                    "case": name,
                    "us": t * 1e6,
                    "GB/s": bytes_moved / t / 1e9,
                    "of_floor": times["copy_ into existing out"] / t,
                    "faults_per_call": minor_faults_per_call(cases[name]),
                }
            )
    # Non-contiguous input: the raw loops copy it first (x.contiguous()); what that costs.
    x = torch.randn(cols, 2 ** (exponents[-1] if quick else 22) // cols).t()
    bias = torch.randn(x.shape[-1])
    for name, fn in {
        "v3 parallel, transposed x": lambda: ext.fused_bias_relu_v3_parallel(x, bias, scale),
        "v3 parallel, x.contiguous() first": lambda: ext.fused_bias_relu_v3_parallel(
            x.contiguous(), bias, scale
        ),
        "v3 parallel, already contiguous": (
            lambda xc: lambda: ext.fused_bias_relu_v3_parallel(xc, bias, scale)
        )(x.contiguous()),
        "eager PyTorch, transposed x": lambda: eager(x, bias),
    }.items():
        rows.append(
            {"numel": x.numel(), "case": name, "us": median_s(fn, 0.05 if quick else 0.3) * 1e6}
        )
    return rows


MALLOC_PROBE = """
import resource, sys
import torch
from torch.utils import benchmark as tb
sys.path.insert(0, {chapter!r})
import load_chapter2
ext = load_chapter2.load_chapter2()
x, bias = torch.randn({rows}, 1024), torch.randn(1024)
for name, fn in {{
    "clone": lambda: x.clone(),
    "eager PyTorch": lambda: torch.relu(x * 0.5 + bias),
    "v3 parallel": lambda: ext.fused_bias_relu_v3_parallel(x, bias, 0.5),
}}.items():
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        fn()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10
    seconds = tb.Timer("fn()", globals={{"fn": fn}}).blocked_autorange(min_run_time=0.3).median
    print(name, seconds, faults, sep="\t")
"""


def malloc_table(quick: bool) -> list[dict]:
    """The same ops with glibc's defaults, and with freed memory kept in the heap for reuse instead
    of handed back to the OS (so the next allocation does not fault it in again)."""
    rows = 256 if quick else 16384
    settings = {
        "glibc defaults": {},
        "heap kept (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_)": {
            "MALLOC_MMAP_THRESHOLD_": "4294967296",
            "MALLOC_TRIM_THRESHOLD_": "8589934592",
        },
    }
    chapter = str(Path(__file__).resolve().parent)
    result = []
    for setting, extra in settings.items():
        done = subprocess.run(
            [sys.executable, "-c", MALLOC_PROBE.format(rows=rows, chapter=chapter)],
            env={**os.environ, **extra},
            capture_output=True,
            text=True,
            check=True,
        )
        for line in done.stdout.splitlines():
            if line.count("\t") != 2:
                continue  # the loader's progress lines
            case, seconds, faults = line.split("\t")
            result.append(
                {
                    "numel": rows * 1024,
                    "malloc": setting,
                    "case": case,
                    "us": float(seconds) * 1e6,
                    "faults_per_call": float(faults),
                }
            )
    return result


def dispatch_table(ext, quick: bool) -> list[dict]:
    batch = 64 if quick else 256
    rows = []
    for n in [1, 2, 4, 8, 16, 32, 64] + ([] if quick else [128]):
        a, b = torch.randn(batch, n, n), torch.randn(batch, n, n)
        loop = median_s(lambda: ext.matmul_loop(a, b), 0.05 if quick else 0.2)
        batched = median_s(lambda: ext.matmul_batched(a, b), 0.05 if quick else 0.2)
        one = median_s(lambda: torch.mm(a[0], b[0]), 0.05 if quick else 0.2)
        rows.append(
            {
                "n": n,
                "batch": batch,
                "loop_us_per_matrix": loop / batch * 1e6,
                "batched_us_per_matrix": batched / batch * 1e6,
                "one_mm_us": one * 1e6,
            }
        )
    return rows


def threads_table(ext, quick: bool) -> list[dict]:
    """What torch's other threads buy: v3, and torch's own exp and mm for comparison, timed with
    one intra-op thread and with all of them. `threads used` is how many threads v3's
    at::parallel_for really ran on (1 for a module compiled without -fopenmp)."""
    most = torch.get_num_threads()
    rows = []
    sizes = [65_536, 1_048_576] if quick else [65_536, 1_048_576, 4_194_304]
    for numel in sizes:
        x, bias = torch.randn(numel // 1024, 1024), torch.randn(1024)
        a = torch.randn(256, 256) if quick else torch.randn(1024, 1024)
        cases = {
            "v3 parallel": lambda: ext.fused_bias_relu_v3_parallel(x, bias, 1.0),
            "torch.exp (ATen's parallel loop)": lambda: torch.exp(x),
        }
        if numel == sizes[-1]:
            cases[f"torch.mm {tuple(a.shape)} @ {tuple(a.shape)} (BLAS)"] = lambda: a @ a
        for case, fn in cases.items():
            times = {}
            for threads in (1, most):
                torch.set_num_threads(threads)
                times[threads] = median_s(fn, 0.05 if quick else 0.3)
            torch.set_num_threads(most)
            rows.append(
                {
                    "numel": numel,
                    "case": case,
                    "us_1_thread": times[1] * 1e6,
                    "us_all_threads": times[most] * 1e6,
                    "threads": most,
                    "threads_used": ext.parallel_for_thread_count(64)
                    if case == "v3 parallel"
                    else None,
                }
            )
    return rows


def nd_at_2d_table(quick: bool) -> list[dict]:
    B, T, F, H = (8, 32, 128, 128) if quick else (32, 128, 512, 512)
    x, w = torch.randn(B, T, F), torch.randn(F, H)
    x_time_major = torch.randn(T, B, F).transpose(0, 1)  # same shape as x, not contiguous
    cases = {
        "torch.matmul(x, w)": lambda: torch.matmul(x, w),
        "x.view(B*T, F) @ w, view back": lambda: (x.view(B * T, F) @ w).view(B, T, H),
        "torch.bmm(x, w.expand(B, F, H))": lambda: torch.bmm(x, w.expand(B, F, H)),
        "torch.matmul(x_noncontig, w)": lambda: torch.matmul(x_time_major, w),
    }
    flops = 2 * B * T * F * H
    return [
        {
            "case": name,
            "shape": f"({B},{T},{F}) @ ({F},{H})",
            "us": (t := median_s(fn, 0.05 if quick else 0.3)) * 1e6,
            "GFLOP/s": flops / t / 1e9,
        }
        for name, fn in cases.items()
    ]


def to_markdown(result: dict) -> str:
    lines = [
        f"{result['machine']}; torch {result['torch']}, {result['threads']} threads; {result['date']}.",
        "",
    ]
    lines += [
        "| elements (f32) | case | µs | GB/s | of copy_ | page faults per call |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in result["fused_bias_relu"]:
        if "GB/s" in r:
            lines.append(
                f"| {r['numel']:,} | {r['case']} | {r['us']:.1f} | {r['GB/s']:.1f} "
                f"| {r['of_floor']:.0%} | {r['faults_per_call']:,.0f} |"
            )
        else:
            lines.append(f"| {r['numel']:,} | {r['case']} | {r['us']:.1f} | | | |")
    lines += [
        "",
        "| n | loop of mm, µs per matrix | one bmm, µs per matrix | one mm call, µs |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for r in result["dispatch"]:
        lines.append(
            f"| {r['n']} | {r['loop_us_per_matrix']:.2f} | {r['batched_us_per_matrix']:.2f} | {r['one_mm_us']:.2f} |"
        )
    most = result["threads"]
    lines += [
        "",
        f"| elements (f32) | case | 1 thread, µs | {most} threads, µs | speed-up | "
        "threads parallel_for used |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in result["threads_table"]:
        used = "" if r["threads_used"] is None else r["threads_used"]
        lines.append(
            f"| {r['numel']:,} | {r['case']} | {r['us_1_thread']:.1f} | {r['us_all_threads']:.1f} "
            f"| {r['us_1_thread'] / r['us_all_threads']:.2f}x | {used} |"
        )
    lines += ["", "| (B, T, F) @ (F, H) | µs | GFLOP/s |", "| --- | ---: | ---: |"]
    for r in result["nd_at_2d"]:
        lines.append(f"| `{r['case']}` {r['shape']} | {r['us']:.0f} | {r['GFLOP/s']:.1f} |")
    lines += [
        "",
        "| elements (f32) | glibc malloc | case | µs | page faults per call |",
        "| ---: | --- | --- | ---: | ---: |",
    ]
    for r in result["malloc"]:
        lines.append(
            f"| {r['numel']:,} | {r['malloc']} | {r['case']} | {r['us']:.0f} "
            f"| {r['faults_per_call']:,.0f} |"
        )
    return "\n".join(lines)


def machine() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument(
        "--no-compile", action="store_true", help="skip torch.compile (slow to compile)"
    )
    parser.add_argument("--out", type=Path, help="write chapter2_cpu.json and .md here")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    ext = load_chapter2.load_chapter2()
    result = {
        "machine": machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "fused_bias_relu": fused_bias_relu_table(ext, args.quick, not args.no_compile),
        "threads_table": threads_table(ext, args.quick),
        "dispatch": dispatch_table(ext, args.quick),
        "nd_at_2d": nd_at_2d_table(args.quick),
        "malloc": malloc_table(args.quick),
    }
    table = to_markdown(result)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter2_cpu.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "chapter2_cpu.md").write_text(table + "\n")
    return result


if __name__ == "__main__":
    main()
