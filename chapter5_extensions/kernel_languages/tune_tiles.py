"""Where Triton's and Helion's fused_bias_relu lost 5% to CUDA C++ at 2^28 elements: the tile
each program owns, the order the tiles are numbered in, the warps, and Helion's indexing, swept
at 2^28 elements (float32 and bfloat16), each launch timed in turns with copy_ and the CUDA C++ op;
and one launch of each way for Nsight Compute, which says what the DRAM and the SMs did; and
Helion's own autotuner on the same shape.

    python chapter5_extensions/kernel_languages/tune_tiles.py --out DIR          # the sweep
    ncu --csv --clock-control none --profile-from-start off --metrics <METRICS below> \\
        python chapter5_extensions/kernel_languages/tune_tiles.py --profile > ncu.csv
    python chapter5_extensions/kernel_languages/tune_tiles.py --summarize ncu.csv
    python chapter5_extensions/kernel_languages/tune_tiles.py --autotune         # minutes

The sweep calls the course's kernels as they are, with other launch parameters: Triton's
fused_bias_relu_kernel with other (BLOCK_M, BLOCK_N, num_warps), Helion's kernel function with
other Configs. Timed with gpu_timer.py (median GPU ms of 30 calls, cold L2, three rounds in turns).
Lesson: chapter 5, further/kernel_languages.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
CHAPTER = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(CHAPTER / "benchmarks"))  # gpu_timer
sys.path.insert(0, str(CHAPTER))  # custom_ops, triton_fused_bias_relu

import ncu_csv  # noqa: E402

SCALE = 0.5
COLS = 1024
ELEMENTS = 2**28
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# (BLOCK_M, BLOCK_N, num_warps): tiles of 1,024 to 16,384 elements, 256 or 1,024 columns wide.
# The op's own choice is (8, 256, 4).
TRITON_TILES = [
    (elements // bn, bn, w)
    for bn in (256, 1024)
    for elements in (1024, 2048, 4096, 8192, 16384)
    for w in (4, 8)
    if elements >= bn
]
# Helion: the op's pinned config (8 x 256 tiles numbered along the rows) beside the same tiles in
# Helion's default order (down the columns), wider and taller tiles, and a TMA tensor descriptor
# (Hopper's copy engine) instead of pointer arithmetic.
ALONG_ROWS = {"loop_orders": [[1, 0]]}
HELION_CONFIGS = [
    {"block_sizes": [8, 256], "num_warps": 4, **ALONG_ROWS},
    {"block_sizes": [8, 256], "num_warps": 4},
    {"block_sizes": [32, 256], "num_warps": 8, **ALONG_ROWS},
    {"block_sizes": [32, 256], "num_warps": 8},
    {"block_sizes": [1, 1024], "num_warps": 4},
    {"block_sizes": [2, 1024], "num_warps": 4},
    {"block_sizes": [16, 1024], "num_warps": 8},
    {"block_sizes": [8, 256], "num_warps": 4, "indexing": "tensor_descriptor", **ALONG_ROWS},
    {"block_sizes": [16, 1024], "num_warps": 8, "indexing": "tensor_descriptor"},
]
HAVE_HELION = importlib.util.find_spec("helion") is not None
METRICS = [
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__sass_inst_executed_op_global_ld.sum",
    "smsp__sass_inst_executed_op_global_st.sum",
]


def triton_launch(x, bias, y, bm: int, bn: int, warps: int):
    import triton

    import triton_fused_bias_relu as t

    rows = x.numel() // COLS
    grid = (triton.cdiv(rows, bm) * triton.cdiv(COLS, bn),)
    return lambda: t.fused_bias_relu_kernel[grid](
        x, bias, y, rows, COLS, SCALE, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps
    )


def helion_kernel(config: dict):
    import helion
    import helion_fused_bias_relu as h

    return helion.kernel(config=helion.Config(**config), static_shapes=True)(
        h.fused_bias_relu_kernel.fn
    )


def label(config: dict) -> str:
    bm, bn = config["block_sizes"]
    order = "along rows" if "loop_orders" in config else "down columns"
    indexing = config.get("indexing", "pointer")
    return f"{bm}x{bn}, {config['num_warps']} warps, {order}, {indexing}"


def sweep(dtype_name: str) -> list[dict]:
    import custom_ops
    from gpu_timer import Timer

    dtype = DTYPES[dtype_name]
    x = torch.randn(ELEMENTS // COLS, COLS, device="cuda", dtype=dtype)
    bias = torch.randn(COLS, device="cuda", dtype=dtype)
    y, out = torch.empty_like(x), torch.empty_like(x)
    calls = {("copy_", ""): lambda: out.copy_(x)}
    calls[("CUDA C++", "the op")] = lambda: custom_ops.fused_bias_relu(x, bias, SCALE)
    for bm, bn, w in TRITON_TILES:
        calls[("Triton", f"{bm}x{bn}, {w} warps")] = triton_launch(x, bias, y, bm, bn, w)
    if HAVE_HELION:
        for config in HELION_CONFIGS:
            kernel = helion_kernel(config)
            calls[("Helion", label(config))] = lambda k=kernel: k(x, bias, SCALE)
    # Compile each and check its result before any is timed; a config Helion cannot compile is
    # reported, not timed.
    expected = torch.relu(x.float() * SCALE + bias.float()).to(dtype)
    failed = []
    for (way, what), fn in list(calls.items()):
        if way == "copy_":
            continue
        try:
            result = fn()
        except Exception as e:
            failed.append({"dtype": dtype_name, "way": way, "launch": what, "error": str(e)[:300]})
            del calls[(way, what)]
            continue
        torch.testing.assert_close(y if way == "Triton" else result, expected)
    measured = Timer().measure_in_turns(calls, loop=0)
    floor = measured[("copy_", "")]["gpu_ms"]
    return [
        {
            "dtype": dtype_name,
            "way": way,
            "launch": what,
            "gpu_ms": m["gpu_ms"],
            "of_floor": floor / m["gpu_ms"],
        }
        for (way, what), m in measured.items()
        if way != "copy_"
    ] + failed


def autotune(dtype_name: str) -> dict:
    """Helion's own search (effort "quick") for one shape: how long it takes, what it picks, and
    the picked config timed against the op's pinned one and copy_."""
    import time

    import helion
    import helion_fused_bias_relu as h

    from gpu_timer import Timer

    dtype = DTYPES[dtype_name]
    x = torch.randn(ELEMENTS // COLS, COLS, device="cuda", dtype=dtype)
    bias = torch.randn(COLS, device="cuda", dtype=dtype)
    out = torch.empty_like(x)
    tuned = helion.kernel(static_shapes=True, autotune_effort="quick")(h.fused_bias_relu_kernel.fn)
    start = time.perf_counter()
    tuned(x, bias, SCALE)  # the first call searches
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    config = tuned.bind((x, bias, SCALE))._config
    calls = {
        "copy_": lambda: out.copy_(x),
        "pinned": lambda: h.fused_bias_relu_kernel(x, bias, SCALE),
        "autotuned": lambda: tuned(x, bias, SCALE),
    }
    measured = Timer().measure_in_turns(calls, loop=0)
    floor = measured["copy_"]["gpu_ms"]
    return {
        "dtype": dtype_name,
        "search_s": seconds,
        "config": repr(config),
        **{f"{k}_of_floor": floor / measured[k]["gpu_ms"] for k in ("pinned", "autotuned")},
    }


# What profile() launches, in order (summarize() names ncu's rows with it). copy_ is not here:
# for contiguous tensors of one dtype it is a cudaMemcpy, which ncu does not profile.
PROFILED = [
    "CUDA C++ (custom_ops)",
    "NVRTC",
    "torch.compile",
    "Triton, 8x256, 4 warps (the op)",
    "Triton, 1x1024, 4 warps",
    "Helion, 8x256, 4 warps, along rows (the op)",
    "Helion, 8x256, 4 warps, down columns",
]


def autotune_summary(found: dict) -> str:
    return (
        f"{found['dtype']}: the search took {found['search_s']:.0f} s; pinned config "
        f"{found['pinned_of_floor']:.1%} of the floor, autotuned {found['autotuned_of_floor']:.1%}"
    )


def profile() -> None:
    """One launch of each way at 2^28 float32 elements, between cudaProfilerStart and Stop."""
    import nvrtc_fused_bias_relu

    import custom_ops

    x = torch.randn(ELEMENTS // COLS, COLS, device="cuda")
    bias = torch.randn(COLS, device="cuda")
    y = torch.empty_like(x)
    compiled = torch.compile(lambda x, b: torch.relu(x * SCALE + b), dynamic=False)
    launches = [
        lambda: custom_ops.fused_bias_relu(x, bias, SCALE),
        lambda: nvrtc_fused_bias_relu.fused_bias_relu(x, bias, SCALE),
        lambda: compiled(x, bias),
        *(triton_launch(x, bias, y, *tile) for tile in [(8, 256, 4), (1, 1024, 4)]),
    ]
    if HAVE_HELION:
        for config in HELION_CONFIGS[:2]:
            kernel = helion_kernel(config)
            launches.append(lambda k=kernel: k(x, bias, SCALE))
    for fn in launches:
        fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for fn in launches:
        fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def summarize(report: Path) -> str:
    """ncu's CSV (a row per kernel and metric) -> a markdown row per kernel, in launch order."""
    lines = [line for line in report.read_text().splitlines() if line.startswith('"')]
    to_us, to_mb = ncu_csv.TO_US, ncu_csv.TO_MB
    out = [
        "| way | µs | DRAM % of peak | MB read | MB written | blocks | threads | registers | "
        "occupancy % | load instr. (warp) | store instr. (warp) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, k in zip(PROFILED, ncu_csv.kernels(lines), strict=False):

        def m(name, k=k):
            return k[name][0]

        us = m("gpu__time_duration.sum") * to_us[k["gpu__time_duration.sum"][1]]
        read = m("dram__bytes_read.sum") * to_mb[k["dram__bytes_read.sum"][1]]
        written = m("dram__bytes_write.sum") * to_mb[k["dram__bytes_write.sum"][1]]
        cells = [
            f"{us:.1f}",
            f"{m('dram__throughput.avg.pct_of_peak_sustained_elapsed'):.1f}",
            f"{read:,.0f}",
            f"{written:,.0f}",
            f"{m('launch__grid_size'):,.0f}",
            f"{m('launch__block_size'):.0f}",
            f"{m('launch__registers_per_thread'):.0f}",
            f"{m('sm__warps_active.avg.pct_of_peak_sustained_active'):.1f}",
            f"{m('smsp__sass_inst_executed_op_global_ld.sum'):,.0f}",
            f"{m('smsp__sass_inst_executed_op_global_st.sum'):,.0f}",
        ]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def to_markdown(result: dict) -> str:
    head = result["header"]
    lines = [
        "# fused_bias_relu's forward at 2^28 elements: tiles, warps and indexing",
        "",
        f"Written by `chapter5_extensions/kernel_languages/tune_tiles.py --out`: {head['device']}, "
        f"torch {head['torch']}, {head['date']}. GPU ms (median of 30, cold L2, every launch and "
        "copy_ in turns, middle of 3 rounds) and the fraction of the copy floor.",
        "",
        "| way | launch | " + " | ".join(DTYPES) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in DTYPES) + " |",
    ]
    keys = list(dict.fromkeys((r["way"], r["launch"]) for r in result["rows"]))
    for way, what in keys:
        cells = [
            f"{r['gpu_ms']:.4f} ({r['of_floor']:.1%})" if "gpu_ms" in r else "failed"
            for d in DTYPES
            for r in result["rows"]
            if (r["way"], r["launch"], r["dtype"]) == (way, what, d)
        ]
        lines.append(f"| {way} | {what} | " + " | ".join(cells) + " |")
    errors = {r["error"].splitlines()[0] for r in result["rows"] if "error" in r}
    lines += ["", *(f"- Failed: {e}" for e in sorted(errors))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write kernel_languages_tiles.{md,json} here")
    parser.add_argument("--profile", action="store_true", help="one launch each, for ncu")
    parser.add_argument("--summarize", type=Path, help="ncu's CSV -> a markdown table")
    parser.add_argument("--autotune", action="store_true", help="Helion's own search, float32")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize), end="")
        return 0
    if not torch.cuda.is_available():
        print(
            "tune_tiles.py needs a CUDA GPU; its results: docs/perf/h100/kernel_languages_tiles.md"
        )
        return 2
    import build_inplace

    build_inplace.build_inplace()
    if args.profile:
        profile()
        return 0
    if args.autotune:
        found = autotune("float32")
        print(json.dumps(found, indent=1))
        print(autotune_summary(found))
        return 0
    result = {
        "header": {
            "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "date": datetime.date.today().isoformat(),
        },
        "rows": [row for d in DTYPES for row in sweep(d)],
    }
    text = to_markdown(result)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kernel_languages_tiles.md").write_text(text)
        (args.out / "kernel_languages_tiles.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
