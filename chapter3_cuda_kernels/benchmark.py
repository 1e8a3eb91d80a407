"""Chapter 3's measurements on a CUDA GPU: every kernel version against eager PyTorch,
torch.compile, torch.sum and the memory floor (a copy_ of the same bytes), 2^10 to 2^28 elements.

    python chapter3_cuda_kernels/benchmark.py                      # ~3 minutes on an H100
    python chapter3_cuda_kernels/benchmark.py --quick --no-compile # seconds
    python chapter3_cuda_kernels/benchmark.py --out DIR            # DIR/chapter3_cuda.{md,json,png}
    python chapter3_cuda_kernels/benchmark.py --plot-from DIR/chapter3_cuda.json  # the PNG again, no GPU

Timing: gpu_timer.py, the course's one GPU timer (CUDA events around one call, L2 flushed, the
host's launch hidden behind a GPU sleep, warm-up first, the median of 30 runs). GB/s counts the
bytes an op must move: x read and out written for the elementwise op, x read for a sum.
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

SUMS = load_chapter3.SUM_VERSIONS


def elementwise_rows(ext, timer: Timer, exponents, dtype, use_compile: bool) -> list[dict]:
    cols, scale = 1024, 0.5

    def eager(x, bias):
        return torch.relu(x * scale + bias)

    rows = []
    for e in exponents:
        numel = 2**e
        x = torch.randn(numel // cols, cols, device="cuda", dtype=dtype)
        bias = torch.randn(cols, device="cuda", dtype=dtype)
        out = torch.empty_like(x)
        # A kernel compiled for exactly this size (dynamic=False), from an empty cache: no symbolic
        # shapes in the kernel and no other sizes' variants for the guards to check first.
        torch._dynamo.reset()
        compiled = torch.compile(eager, dynamic=False) if use_compile else None
        cases = {
            "copy_": lambda: out.copy_(x),
            "eager": lambda: eager(x, bias),
            "v1": lambda: ext.fused_bias_relu_v1(x, bias, scale),
            "v2": lambda: ext.fused_bias_relu_v2(x, bias, scale),
            "v3": lambda: ext.fused_bias_relu_v3(x, bias, scale),
            "v4": lambda: ext.fused_bias_relu_v4(x, bias, scale),
            "v4 on v2's grid": lambda: ext.fused_bias_relu_v4_gpu_sized_grid(x, bias, scale),
        }
        if compiled is not None:
            cases["torch.compile"] = lambda: compiled(x, bias)
        bytes_moved = 2 * x.numel() * x.element_size()
        times = {name: timer.gpu_ms(fn) for name, fn in cases.items()}
        for name, ms in times.items():
            rows.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "numel": numel,
                    "case": name,
                    "us": ms * 1e3,
                    "GB/s": bytes_moved / (ms * 1e-3) / 1e9,
                    "of_copy": times["copy_"] / ms,
                }
            )
    return rows


LAYOUT_VERSIONS = {
    "v2": "fused_bias_relu_v2",
    "v3": "fused_bias_relu_v3",
    "v4": "fused_bias_relu_v4",
    "v4 on v2's grid": "fused_bias_relu_v4_gpu_sized_grid",
}


def layout_rows(ext, timer: Timer, exponent: int) -> list[dict]:
    """v2 to v4 where 16-byte vectors do not fit: x[1:] starts 4 bytes past a 16-byte boundary
    (v3 and v4 drop to one element per load), and rows of 1,023 floats are not whole vectors (v4
    drops to one element per load; v3 keeps its vectors, which run on across rows)."""
    numel = 2**exponent
    rows = []
    for cols in (1024, 1023):
        base = torch.randn(numel + cols, device="cuda")
        bias = torch.randn(cols, device="cuda")
        count = numel // cols * cols
        views = {"aligned": base[:count], "x[1:]": base[1 : count + 1]}
        for layout, flat in views.items():
            x = flat.view(-1, cols)
            for version, name in LAYOUT_VERSIONS.items():
                op = getattr(ext, name)
                ms = timer.gpu_ms(lambda op=op, x=x: op(x, bias, 0.5))
                rows.append(
                    {
                        "numel": count,
                        "cols": cols,
                        "layout": layout,
                        "case": version,
                        "us": ms * 1e3,
                        "GB/s": 8 * count / ms / 1e6,
                    }
                )
    return rows


def layouts_markdown(rows: list[dict]) -> list[str]:
    lines = [
        "fused_bias_relu v2 to v4, float32, where 16-byte vectors fit or not: µs (GB/s):",
        "",
        f"| elements | columns | x | {' | '.join(LAYOUT_VERSIONS)} |",
        "| ---: | ---: | --- |" + " ---: |" * len(LAYOUT_VERSIONS),
    ]
    for key in dict.fromkeys((r["numel"], r["cols"], r["layout"]) for r in rows):
        by_case = {r["case"]: r for r in rows if (r["numel"], r["cols"], r["layout"]) == key}
        cells = [f"{by_case[c]['us']:,.1f} ({by_case[c]['GB/s']:,.0f})" for c in LAYOUT_VERSIONS]
        numel, cols, layout = key
        lines.append(f"| {numel:,} | {cols:,} | {layout} | {' | '.join(cells)} |")
    return [*lines, ""]


def sum_rows(ext, timer: Timer, exponents) -> list[dict]:
    rows = []
    for e in exponents:
        numel = 2**e
        x = torch.randn(numel, device="cuda")
        out = torch.empty_like(x)
        copy_ms = timer.gpu_ms(lambda: out.copy_(x))
        copy_bandwidth = 2 * 4 * numel / copy_ms  # bytes per ms
        cases = {"torch.sum": lambda: torch.sum(x)}
        cases |= {name: (lambda f: lambda: f(x))(getattr(ext, name)) for name in SUMS}
        times = {
            name: timer.gpu_ms(fn, runs=10 if "v0" in name else 30) for name, fn in cases.items()
        }
        for name, ms in times.items():
            rows.append(
                {
                    "numel": numel,
                    "case": name,
                    "us": ms * 1e3,
                    "GB/s": 4 * numel / ms / 1e6,
                    "of_copy_bandwidth": 4 * numel / ms / copy_bandwidth,
                    "of_torch_sum": times["torch.sum"] / ms,
                }
            )
    return rows


def sum_columns_rows(ext, timer: Timer, quick: bool) -> list[dict]:
    shapes = (
        [(1024, 1024), (4096, 256)]
        if quick
        else [(65536, 4096), (4096, 65536), (2**20, 256), (256, 2**20)]
    )
    rows = []
    for shape in shapes:
        x = torch.randn(shape, device="cuda")
        for name, fn in {
            "x.sum(0)": lambda: x.sum(0),
            "sum_columns": lambda: ext.sum_columns(x),
        }.items():
            ms = timer.gpu_ms(fn)
            rows.append(
                {"shape": shape, "case": name, "us": ms * 1e3, "GB/s": 4 * x.numel() / ms / 1e6}
            )
    return rows


def gbps(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def size_table(rows: list[dict], cases: list[str], cell, caption: str) -> list[str]:
    """One line per size (2^k elements), one column per case; cell(row) formats a measurement.
    The caption, what a cell holds, comes first: it belongs to the table below it."""
    lines = [
        f"Cells: {caption}.",
        "",
        f"| elements | {' | '.join(cases)} |",
        "| ---: | " + " | ".join("---:" for _ in cases) + " |",
    ]
    for numel in sorted({r["numel"] for r in rows}):
        by_case = {r["case"]: r for r in rows if r["numel"] == numel}
        cells = [cell(by_case[c]) if c in by_case else "" for c in cases]
        lines.append(f"| 2^{numel.bit_length() - 1} | {' | '.join(cells)} |")
    return [*lines, ""]


def to_markdown(result: dict) -> str:
    lines = [
        f"{result['gpu']}; torch {result['torch']}, CUDA {result['cuda']}; {result['date']}.",
        "Median of CUDA-event timings with a cold L2; sizes as 2^k elements.",
        "",
    ]
    element_cases = ["copy_", "eager", "torch.compile", "v1", "v2", "v3", "v4", "v4 on v2's grid"]
    for dtype in ("float32", "bfloat16"):
        rows = [r for r in result["elementwise"] if r["dtype"] == dtype]
        cases = [c for c in element_cases if any(r["case"] == c for r in rows)]
        lines += [f"fused_bias_relu, {dtype}, (2^k / 1024, 1024):", ""]
        lines += size_table(
            rows,
            cases,
            lambda r: f"{gbps(r['GB/s'])} ({r['of_copy']:.0%})",
            "GB/s (fraction of copy_ of the same bytes)",
        )
        lines += size_table(rows, cases, lambda r: f"{r['us']:,.1f}", "µs")
    lines += layouts_markdown(result["layouts"])
    lines += ["sum of all elements, float32:", ""]
    sum_cases = ["torch.sum", *SUMS]
    sums = result["sums"]
    lines += size_table(
        sums,
        sum_cases,
        lambda r: f"{gbps(r['GB/s'])} ({r['of_torch_sum']:.0%})",
        "GB/s (fraction of torch.sum's time)",
    )
    lines += size_table(sums, sum_cases, lambda r: f"{r['us']:,.1f}", "µs")
    lines += size_table(
        sums,
        sum_cases,
        lambda r: f"{r['of_copy_bandwidth']:.0%}",
        "bytes read per second, as a fraction of copy_'s bandwidth at that size",
    )
    lines += [
        "sum over leading dimensions, float32:",
        "",
        "| shape | case | µs | GB/s |",
        "| --- | --- | ---: | ---: |",
    ]
    for r in result["sum_columns"]:
        lines.append(f"| {tuple(r['shape'])} | {r['case']} | {r['us']:,.1f} | {r['GB/s']:,.0f} |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> Figure:
    """GB/s against size, float32: fused_bias_relu's versions above, the sums below, each beside
    its yardstick (copy_ of the same bytes, torch.sum) drawn dashed, each with its legend."""
    fig = plot_style.figure(height=9.5)
    elementwise = [r for r in result["elementwise"] if r["dtype"] == "float32"]
    element_cases = ["eager", "torch.compile", "v1", "v2", "v3", "v4", "v4 on v2's grid"]
    panels = [
        (elementwise, "copy_", element_cases, "fused_bias_relu, float32", 4),
        (result["sums"], "torch.sum", SUMS, "sum, float32", 2),
    ]
    for panel, (rows, yardstick, cases, title, ncols) in zip(
        fig.subfigures(2, 1), panels, strict=True
    ):
        ax = panel.subplots()
        for case in [yardstick, *cases]:
            points = sorted((r["numel"], r["GB/s"]) for r in rows if r["case"] == case)
            if points:
                style = plot_style.REFERENCE if case == yardstick else {}
                ax.plot(*zip(*points, strict=True), label=case.removeprefix("sum_"), **style)
        plot_style.log2_axis(ax, "x", sorted({r["numel"] for r in rows}))
        ax.set_xlabel("elements")
        plot_style.zero_based_y(ax, "GB/s")
        ax.set_title(title, loc="left")
        plot_style.legend_below(panel, ncols)
    fig.suptitle(f"{result['gpu']}, torch {result['torch']}, {result['date']}")
    plot_style.save(fig, path)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 2^20, seconds")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--out", type=Path, help="write chapter3_cuda.{md,json,png} here")
    parser.add_argument(
        "--layouts-only",
        action="store_true",
        help="only the table of layouts (aligned, x[1:], 1,023 columns); --out writes "
        "chapter3_layouts.{md,json}",
    )
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
        print("benchmark.py needs a CUDA GPU (torch.cuda.is_available() is False); the tables in")
        print("the lesson were measured on one (see docs/perf/h100/).")
        return 2
    torch.manual_seed(0)
    ext = load_chapter3.load_chapter3()
    timer = Timer()
    exponents = range(10, 21, 2) if args.quick else range(10, 29, 2)
    if args.layouts_only:
        rows = layout_rows(ext, timer, exponents[-1])
        header = f"{torch.cuda.get_device_name()}; torch {torch.__version__}, CUDA "
        header += f"{torch.version.cuda}; {datetime.date.today().isoformat()}."
        table = "\n".join([header, "Median of CUDA-event timings with a cold L2.", ""])
        table += "\n" + "\n".join(layouts_markdown(rows))
        print(table)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "chapter3_layouts.json").write_text(json.dumps(rows, indent=2) + "\n")
            (args.out / "chapter3_layouts.md").write_text(table)
        return 0
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "elementwise": [
            *elementwise_rows(ext, timer, exponents, torch.float32, not args.no_compile),
            *elementwise_rows(ext, timer, exponents, torch.bfloat16, not args.no_compile),
        ],
        "layouts": layout_rows(ext, timer, exponents[-1]),
        "sums": sum_rows(ext, timer, exponents),
        "sum_columns": sum_columns_rows(ext, timer, args.quick),
    }
    table = to_markdown(result)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter3_cuda.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "chapter3_cuda.md").write_text(table)
        plot(result, args.out / "chapter3_cuda.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
