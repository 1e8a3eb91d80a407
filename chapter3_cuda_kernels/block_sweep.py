"""Chapter 3's block-size and block-shape sweep on a CUDA GPU, with each launch's theoretical
occupancy: fused_bias_relu_v3 (1-D) with 32 to 1024 threads a block, and sum_columns (2-D) with
blocks of 32x8, 16x16, 8x32, 32x32, 64x4 and a few more, on 2^28 float32 elements.

    python chapter3_cuda_kernels/block_sweep.py                     # ~20 s on an H100 (+ build)
    python chapter3_cuda_kernels/block_sweep.py --log2-numel 16     # seconds: the test's size
    python chapter3_cuda_kernels/block_sweep.py --out docs/perf/h100  # chapter3_block_sweep.{json,md,png}
    python chapter3_cuda_kernels/block_sweep.py --plot-from DIR/chapter3_block_sweep.json  # the PNG again, no GPU

Lesson: chapter 3, "Block size and shape: what occupancy predicts". Timed with gpu_timer.py, the
course's one GPU timer (cold L2, the host hidden behind a GPU sleep, median of CUDA events), every
configuration taking turns with copy_ of the same tensor, the memory floor.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch
from matplotlib.figure import Figure

import load_chapter3
import plot_style
from gpu_timer import Timer

BLOCK_SIZES = [32, 64, 128, 256, 512, 1024]  # fused_bias_relu_v3's default: 256
# (columns, row lanes). sum_columns' default is 32 x 8: a warp reads 32 neighbouring columns.
BLOCK_SHAPES = [(32, 8), (16, 16), (8, 32), (4, 64), (32, 32), (64, 4), (32, 1), (128, 8)]
COLS = 4096  # sum_columns' input: (2^k / 4096, 4096), the shape of chapter 3's benchmark


def occupancy(blocks_per_sm: int, threads: int) -> float:
    """Theoretical occupancy: the threads resident on an SM over the most it can hold (2048 on an
    H100). It counts what fits, not what runs fast: the measured columns say that."""
    most = torch.cuda.get_device_properties().max_threads_per_multi_processor
    return blocks_per_sm * threads / most


def sweep_block_sizes(ext, timer: Timer, numel: int) -> list[dict]:
    """fused_bias_relu_v3 on (numel / 1024, 1024) float32, once per block size."""
    x = torch.randn(numel // 1024, 1024, device="cuda")
    bias = torch.randn(1024, device="cuda")
    out = torch.empty_like(x)
    expected = torch.relu(x * 0.5 + bias)
    cases = {"copy_": lambda: out.copy_(x)}
    for threads in BLOCK_SIZES:
        torch.testing.assert_close(ext.fused_bias_relu_v3(x, bias, 0.5, threads=threads), expected)
        cases[threads] = lambda threads=threads: ext.fused_bias_relu_v3(x, bias, 0.5, threads)
    times = timer.measure_in_turns(cases, rounds=3, loop=0)
    bytes_moved = 2 * x.numel() * x.element_size()  # x read, out written: a copy's bytes
    copy_ms = times["copy_"]["gpu_ms"]
    rows = [{"threads": "copy_", "us": copy_ms * 1e3, "GB/s": bytes_moved / copy_ms / 1e6}]
    for threads in BLOCK_SIZES:
        ms = times[threads]["gpu_ms"]
        blocks_per_sm = ext.fused_bias_relu_v3_blocks_per_sm(x, threads)
        rows.append(
            {
                "threads": threads,
                "blocks_per_sm": blocks_per_sm,
                "occupancy": occupancy(blocks_per_sm, threads),
                "us": ms * 1e3,
                "GB/s": bytes_moved / ms / 1e6,
                "of_copy": copy_ms / ms,
            }
        )
    return rows


def sweep_block_shapes(ext, timer: Timer, numel: int) -> list[dict]:
    """sum_columns on (numel / 4096, 4096) float32, once per block shape; x.sum(0) beside it."""
    x = torch.randn(numel // COLS, COLS, device="cuda")
    copy = torch.empty_like(x)
    # Float accumulation in any order is within rows * 2^-24 * max|x| of the exact sum.
    tolerance = dict(rtol=1e-5, atol=8 * x.shape[0] * 2.0**-24 * x.abs().max().item())
    expected = x.sum(0, dtype=torch.float64).float()
    cases = {"copy_": lambda: copy.copy_(x), "x.sum(0)": lambda: x.sum(0)}
    for bx, by in BLOCK_SHAPES:
        torch.testing.assert_close(ext.sum_columns(x, bx, by), expected, **tolerance)
        cases[(bx, by)] = lambda bx=bx, by=by: ext.sum_columns(x, bx, by)
    times = timer.measure_in_turns(cases, rounds=3, loop=0)
    bytes_read = x.numel() * x.element_size()
    # A copy moves twice the bytes a sum reads: the floor for the sum is copy_'s bandwidth.
    copy_gbps = 2 * bytes_read / times["copy_"]["gpu_ms"] / 1e6
    rows = [{"block": "copy_", "us": times["copy_"]["gpu_ms"] * 1e3, "GB/s": copy_gbps}]
    for case, t in times.items():
        if case == "copy_":
            continue
        row = {"block": case if isinstance(case, str) else f"{case[0]}x{case[1]}"}
        if not isinstance(case, str):
            blocks_per_sm = ext.sum_columns_blocks_per_sm(x, *case)
            row |= {
                "threads": case[0] * case[1],
                "blocks_per_sm": blocks_per_sm,
                "occupancy": occupancy(blocks_per_sm, case[0] * case[1]),
            }
        gbps = bytes_read / t["gpu_ms"] / 1e6
        rows.append(row | {"us": t["gpu_ms"] * 1e3, "GB/s": gbps, "of_copy": gbps / copy_gbps})
    return rows


def to_markdown(result: dict) -> str:
    numel = result["numel"]
    lines = [
        f"{result['gpu']}; torch {result['torch']}, CUDA {result['cuda']}; {result['date']}.",
        "Median of CUDA-event timings with a cold L2, the cases taking turns (3 rounds of 30).",
        "Occupancy: theoretical, from cudaOccupancyMaxActiveBlocksPerMultiprocessor.",
        "",
        f"fused_bias_relu_v3, float32, ({numel // 1024}, 1024) = 2^{numel.bit_length() - 1} "
        "elements; GB/s counts x read and out written:",
        "",
        "| threads a block | blocks per SM | occupancy | µs | GB/s | of copy_ |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["block_sizes"]:
        if r["threads"] == "copy_":
            lines.append(f"| copy_ | | | {r['us']:,.1f} | {r['GB/s']:,.0f} | 100% |")
        else:
            lines.append(
                f"| {r['threads']} | {r['blocks_per_sm']} | {r['occupancy']:.0%} | "
                f"{r['us']:,.1f} | {r['GB/s']:,.0f} | {r['of_copy']:.0%} |"
            )
    lines += [
        "",
        f"sum_columns, float32, ({numel // COLS}, {COLS}); block = columns x row lanes; GB/s counts "
        "x read; of copy_: of copy_'s bandwidth:",
        "",
        "| block | threads | blocks per SM | occupancy | µs | GB/s | of copy_ |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["block_shapes"]:
        if "threads" in r:
            fit = f"{r['threads']} | {r['blocks_per_sm']} | {r['occupancy']:.0%}"
        else:
            fit = " |  | "
        of_copy = f"{r['of_copy']:.0%}" if "of_copy" in r else "100%"
        lines.append(f"| {r['block']} | {fit} | {r['us']:,.1f} | {r['GB/s']:,.0f} | {of_copy} |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> Figure:
    """GB/s of each configuration as a bar, copy_'s as a dashed line, the theoretical occupancy
    under each bar's name: fused_bias_relu_v3's block sizes above, sum_columns' shapes below."""
    fig = plot_style.figure(height=8)
    panels = [  # rows (copy_ first), the column that names a row, title, x axis
        (result["block_sizes"], "threads", "fused_bias_relu_v3, float32", "threads a block"),
        (result["block_shapes"], "block", "sum_columns, float32", "block: columns x row lanes"),
    ]
    for ax, (rows, key, title, xlabel) in zip(fig.subplots(2, 1), panels, strict=True):
        copy, *rows = rows
        labels = [
            f"{r[key]}\n{r['occupancy']:.0%}" if "occupancy" in r else f"{r[key]}\n" for r in rows
        ]
        # x.sum(0), PyTorch's own, in the second colour: the bars of one colour are ours.
        colors = [plot_style.COLORS[0 if "occupancy" in r else 1] for r in rows]
        ax.bar(labels, [r["GB/s"] for r in rows], color=colors, width=0.6)
        ax.axhline(copy["GB/s"], **plot_style.REFERENCE)
        ax.annotate(
            f"copy_: {copy['GB/s']:,.0f} GB/s",
            (1, copy["GB/s"]),
            xycoords=("axes fraction", "data"),
            xytext=(0, 6),
            textcoords="offset points",
            ha="right",
        )
        plot_style.zero_based_y(ax, "GB/s")
        ax.set_ylim(top=1.15 * copy["GB/s"])  # room for copy_'s label above its line
        ax.grid(axis="x", visible=False)
        ax.set_title(title, loc="left")
        ax.set_xlabel(f"{xlabel} (below: theoretical occupancy)")
    fig.suptitle(f"{result['gpu']}, torch {result['torch']}, {result['date']}")
    plot_style.save(fig, path)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2-numel", type=int, default=28, help="2^k elements (12 at least)")
    parser.add_argument("--out", type=Path, help="write chapter3_block_sweep.{md,json,png} here")
    parser.add_argument(
        "--plot-from",
        type=Path,
        help="only redraw the plot from an earlier run's JSON, as a PNG beside it (no GPU)",
    )
    args = parser.parse_args(argv)
    if args.plot_from:
        plot(json.loads(args.plot_from.read_text()), args.plot_from.with_suffix(".png"))
        return 0
    if not torch.cuda.is_available():
        print("block_sweep.py needs a CUDA GPU (torch.cuda.is_available() is False); nothing to")
        print("measure here. The lesson's table was measured on one (docs/perf/h100/).")
        return 0
    numel = 2 ** max(args.log2_numel, 12)
    torch.manual_seed(0)
    ext = load_chapter3.load_chapter3()
    timer = Timer()
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.date.today().isoformat(),
        "numel": numel,
        "block_sizes": sweep_block_sizes(ext, timer, numel),
        "block_shapes": sweep_block_shapes(ext, timer, numel),
    }
    table = to_markdown(result)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter3_block_sweep.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "chapter3_block_sweep.md").write_text(table)
        plot(result, args.out / "chapter3_block_sweep.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
