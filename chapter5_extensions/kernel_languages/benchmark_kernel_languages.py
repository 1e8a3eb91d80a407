"""One op, fused_bias_relu's forward (y = relu(x * scale + bias)), written each way the course
shows: CUDA C++ in the package (custom_ops), NVRTC in process, Triton, and what PyTorch does
itself (eager, torch.compile). Per way: GPU time and the fraction of the copy floor at 2^20,
2^24 and 2^28 elements in float32 and bfloat16, the first call's time in a new process with empty
caches (cold) and with the caches of a first run (warm), the lines of kernel code, and whether
autograd, torch.compile(fullgraph=True), torch.export, CUDA graphs and CPU tensors work.

    python chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --out DIR   # a GPU
    python chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --plot-from DIR/kernel_languages.json

Timed with gpu_timer.py, the course's one GPU timer (chapter5_extensions/benchmarks/): median GPU
ms of 30 calls, cold L2, the ways of one size taking turns, three rounds; and back to back, 10
calls in a row, with the host's time per call. Floor: reading x and
writing y at the bandwidth of a copy_ of x. Lesson: chapter 5, further/kernel_languages.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
CHAPTER = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(CHAPTER / "benchmarks"))  # gpu_timer, plot_style
sys.path.insert(0, str(CHAPTER))  # custom_ops, triton_fused_bias_relu

import plot_style  # noqa: E402

SCALE = 0.5
COLS = 1024  # x is (n / 1024, 1024): rows of 4 KiB in float32, 16-byte aligned
EXPONENTS = (20, 24, 28)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
WAYS = ["eager PyTorch", "torch.compile", "CUDA C++ (custom_ops)", "NVRTC", "Triton"]
# Helion is optional (helion_fused_bias_relu.py says how to install it): measured where it is.
if importlib.util.find_spec("helion") is not None:
    WAYS.append("Helion")
# What each way is tried with, and the column that says whether it worked.
FEATURES = {
    "autograd": "autograd",
    "compile": "compile (fullgraph)",
    "export": "export",
    "graphs": "CUDA graphs",
    "cpu": "CPU tensors",
}


def eager(x, bias):
    return torch.relu(x * SCALE + bias)


def make_way(way: str):
    """The way's fused_bias_relu(x, bias), its modules imported only now: each import is part of
    what a cold start pays."""
    if way == "eager PyTorch":
        return eager
    if way == "torch.compile":
        return torch.compile(eager, dynamic=False)
    if way == "CUDA C++ (custom_ops)":
        import custom_ops

        return lambda x, bias: custom_ops.fused_bias_relu(x, bias, SCALE)
    if way == "NVRTC":
        import nvrtc_fused_bias_relu

        return lambda x, bias: nvrtc_fused_bias_relu.fused_bias_relu(x, bias, SCALE)
    if way == "Triton":
        import triton_fused_bias_relu

        return lambda x, bias: triton_fused_bias_relu.fused_bias_relu(x, bias, SCALE)
    if way == "Helion":
        import helion_fused_bias_relu

        return lambda x, bias: helion_fused_bias_relu.fused_bias_relu(x, bias, SCALE)
    raise ValueError(f"no way {way!r}; the ways: {WAYS}")


# ---- lines of kernel code -----------------------------------------------------------------------


def code_lines(text: str) -> int:
    """Lines that are neither blank nor only a comment (// or #)."""
    return sum(1 for line in text.splitlines() if line.strip() and not re.match(r"\s*(//|#)", line))


def c_function(text: str, signature: str) -> str:
    """The C++ function whose definition starts with `signature` (its template line included),
    through the brace that closes it."""
    start = text.index(signature)
    start = text.rfind("template", 0, start)
    depth, i = 0, text.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start : i + 1]
        i += 1


def kernel_lines() -> dict:
    """The device code each way asks its author to write for the forward."""
    import inspect

    import triton_fused_bias_relu as tfbr

    cuda_cpp = (CHAPTER / "csrc" / "cuda" / "fused_bias_relu.cu").read_text()
    triton = inspect.getsource(tfbr.opmath.fn) + inspect.getsource(tfbr.fused_bias_relu_kernel.fn)
    lines = {}
    if "Helion" in WAYS:
        import helion_fused_bias_relu

        source = inspect.getsource(helion_fused_bias_relu.fused_bias_relu_kernel.fn)
        lines["Helion"] = code_lines(source)
    return lines | {
        "CUDA C++ (custom_ops)": code_lines(
            c_function(cuda_cpp, "__global__ void fused_bias_relu_kernel(")
        ),
        "NVRTC": code_lines((HERE / "fused_bias_relu_nvrtc.cu").read_text()),
        "Triton": code_lines(triton),
        "torch.compile": code_lines(inspect.getsource(eager)),
        "eager PyTorch": code_lines(inspect.getsource(eager)),
    }


# ---- what works ---------------------------------------------------------------------------------


def works(fn) -> str:
    try:
        fn()
        torch.cuda.synchronize()
        return "yes"
    except Exception as e:  # the first line of why, for the table
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return "no: " + (why if len(why) <= 200 else why[:199] + "…")


def features(way: str) -> dict:
    op = make_way(way)
    x = torch.randn(64, 256, device="cuda")
    bias = torch.randn(256, device="cuda")

    class Model(torch.nn.Module):
        def forward(self, x, bias):
            return op(x, bias)

    def autograd():
        xg, bg = x.clone().requires_grad_(), bias.clone().requires_grad_()
        torch.autograd.grad(op(xg, bg).sum(), (xg, bg))

    def compiled():
        torch._dynamo.reset()
        torch.compile(Model(), fullgraph=True)(x, bias)

    def graph():
        op(x, bias)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = op(x, bias)
        g.replay()
        torch.testing.assert_close(y, eager(x, bias))

    return {
        "autograd": works(autograd),
        "compile": works(compiled),
        "export": works(lambda: torch.export.export(Model(), (x, bias))),
        "graphs": works(graph),
        "cpu": works(lambda: op(x.cpu(), bias.cpu())),
    }


# ---- cold and warm starts -----------------------------------------------------------------------


def probe(way: str) -> float:
    """In this (new) process: seconds from nothing of the way imported to its first result, the
    CUDA context and the inputs made before the clock starts."""
    x = torch.randn(2**20 // COLS, COLS, device="cuda")
    bias = torch.randn(COLS, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    make_way(way)(x, bias)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def nvcc_seconds() -> float:
    """CUDA C++ cold: nvcc on csrc/cuda/fused_bias_relu.cu with the package build's own command
    (ninja's record of it), into a scratch file. The link and import after it are the warm time."""
    ninja = Path(sys.executable).parent / "ninja"
    build_dir = CHAPTER / "build" / "objects"
    commands = json.loads(
        subprocess.run(
            [str(ninja) if ninja.exists() else "ninja", "-C", str(build_dir), "-t", "compdb"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    entry = next(e for e in commands if e["file"].endswith("cuda/fused_bias_relu.cu"))
    with tempfile.TemporaryDirectory() as scratch:
        command = re.sub(r"-o \S+", f"-o {scratch}/out.o", entry["command"])
        start = time.perf_counter()
        subprocess.run(command, shell=True, check=True, cwd=entry["directory"])
        return time.perf_counter() - start


def start_times(way: str) -> dict:
    """Cold: empty Triton, Inductor and Helion caches (NVRTC keeps none). Warm: the same caches
    again."""
    if way == "eager PyTorch":
        return {"cold_s": None, "warm_s": None}
    with tempfile.TemporaryDirectory() as caches:
        env = {
            **os.environ,
            "TRITON_CACHE_DIR": f"{caches}/triton",
            "TORCHINDUCTOR_CACHE_DIR": f"{caches}/inductor",
            "HELION_CACHE_DIR": f"{caches}/helion",
        }
        command = [sys.executable, __file__, "--probe", way]

        def run() -> float:
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            return float(out.stdout.strip().splitlines()[-1])

        cold = run()
        warm = run()
    if way == "CUDA C++ (custom_ops)":
        cold = nvcc_seconds() + warm
    return {"cold_s": cold, "warm_s": warm}


# ---- GPU time -----------------------------------------------------------------------------------


def one_size(timer, fns: dict, dtype_name: str, e: int) -> list[dict]:
    """Every way on one tensor of 2^e elements, taking turns with a copy_ of it (the floor)."""
    dtype = DTYPES[dtype_name]
    x = torch.randn(2**e // COLS, COLS, device="cuda", dtype=dtype)
    bias = torch.randn(COLS, device="cuda", dtype=dtype)
    out = torch.empty_like(x)
    calls = {way: (lambda fn=fn: fn(x, bias)) for way, fn in fns.items()}
    calls["copy_"] = lambda: out.copy_(x)
    measured = timer.measure_in_turns(calls, loop=10)
    moved = 2 * x.numel() * x.element_size()  # read x, write y
    floor_ms = measured["copy_"]["gpu_ms"]
    return [
        {
            "way": way,
            "dtype": dtype_name,
            "elements": 2**e,
            "gpu_ms": measured[way]["gpu_ms"],
            "loop_ms": measured[way]["loop_ms"],
            "host_ms": measured[way]["host_ms"],
            "gbps": moved / measured[way]["gpu_ms"] / 1e6,
            "of_floor": floor_ms / measured[way]["gpu_ms"],
            "copy_gbps": moved / floor_ms / 1e6,
        }
        for way in WAYS
    ]


def bandwidth_rows(timer) -> list[dict]:
    rows = []
    for dtype_name in DTYPES:
        for e in EXPONENTS:
            torch._dynamo.reset()  # a graph per size, as a model with static shapes gets
            rows += one_size(timer, {way: make_way(way) for way in WAYS}, dtype_name, e)
    return rows


# ---- output -------------------------------------------------------------------------------------


def to_markdown(result: dict) -> str:
    head = result["header"]
    lines = [
        "# One op, every way to write it: fused_bias_relu's forward",
        "",
        f"Written by `chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --out`: "
        f"{head['device']}, torch {head['torch']}, Triton {head['triton']}, CUDA "
        f"{head['cuda']}, {head['date']}. GPU ms (median of 30, cold L2, the ways taking turns, "
        "middle of 3 rounds) and, in brackets, the fraction of the floor: reading x and writing y "
        "at the bandwidth of `copy_` of x.",
        "",
    ]
    sizes = [f"2^{e}" for e in EXPONENTS]
    lines += [
        "| way | dtype | " + " | ".join(sizes) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in sizes) + " |",
    ]
    for way in WAYS:
        for dtype in DTYPES:
            cells = [
                f"{r['gpu_ms']:.4f} ({r['of_floor']:.0%})"
                for e in EXPONENTS
                for r in result["rows"]
                if r["way"] == way and r["dtype"] == dtype and r["elements"] == 2**e
            ]
            lines.append(f"| {way} | {dtype} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Back to back: ms per call of 10 calls in a row (median of 5 loops, warm L2: what a loop "
        "of calls pays, launches included), and in brackets the host's µs to issue one call.",
        "",
        "| way | dtype | " + " | ".join(sizes) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in sizes) + " |",
    ]
    for way in WAYS:
        for dtype in DTYPES:
            cells = [
                f"{r['loop_ms']:.4f} ({r['host_ms'] * 1e3:.0f} µs)"
                for e in EXPONENTS
                for r in result["rows"]
                if r["way"] == way and r["dtype"] == dtype and r["elements"] == 2**e
            ]
            lines.append(f"| {way} | {dtype} | " + " | ".join(cells) + " |")
    copy = {
        (r["dtype"], r["elements"]): r["copy_gbps"] for r in result["rows"] if r["way"] == WAYS[0]
    }
    lines += [
        "",
        "copy_ of x, GB/s (read and write): "
        + "; ".join(f"{d} 2^{e}: {copy[(d, 2**e)]:,.0f}" for d in DTYPES for e in EXPONENTS)
        + ".",
        "",
        "| way | cold start, s | warm start, s | kernel lines | "
        + " | ".join(FEATURES.values())
        + " |",
        "| --- | ---: | ---: | ---: | --- | --- | --- | --- | --- |",
    ]
    for way in WAYS:
        s = result["starts"][way]
        f = result["features"][way]

        def seconds(v):
            return "" if v is None else f"{v:.2f}"

        lines.append(
            f"| {way} | {seconds(s['cold_s'])} | {seconds(s['warm_s'])} | "
            f"{result['lines'][way]} | " + " | ".join(f[k].split(":")[0] for k in FEATURES) + " |"
        )
    refusals = [
        f"{way}, {FEATURES[k]}: {f.split(': ', 1)[1]}"
        for way in WAYS
        for k, f in result["features"][way].items()
        if f.startswith("no: ")
    ]
    lines += ["", *(f"- No: {r}" for r in refusals)]
    lines += [
        "",
        "Cold: a new process, empty Triton, Inductor and Helion caches, from importing the way to its "
        "first result on 2^20 float32 elements (the CUDA context made before); for CUDA C++ "
        "nvcc on `csrc/cuda/fused_bias_relu.cu` with the build's own command, plus the warm "
        "time. Warm: the same in a second process with the caches the first left (NVRTC keeps "
        "none: it compiles again). Kernel lines: the forward's device code without blank and "
        "comment lines (CUDA C++: the `__global__` template; NVRTC: its whole `.cu` file; "
        "Triton: the `@triton.jit` functions; Helion: the `@helion.kernel` function; PyTorch: the "
        "Python function).",
        "",
    ]
    return "\n".join(lines)


def plot(result: dict, path: Path):
    """The fraction of the floor against elements, a panel per dtype, a line per way."""
    fig = plot_style.figure(height=4.5)
    axes = fig.subplots(1, len(DTYPES), sharey=True)
    for ax, dtype in zip(axes, DTYPES, strict=True):
        for way in WAYS:
            rows = [r for r in result["rows"] if r["way"] == way and r["dtype"] == dtype]
            ax.plot([r["elements"] for r in rows], [r["of_floor"] for r in rows], label=way)
        ax.axhline(1.0, label="copy_ (floor)", **plot_style.REFERENCE)
        ax.set_title(dtype)
        plot_style.log2_axis(ax, "x", [2**e for e in EXPONENTS])
    plot_style.zero_based_y(axes[0], "fraction of the floor")
    plot_style.legend_below(fig, ncols=3)
    plot_style.save(fig, path)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write kernel_languages.{md,json,png} here")
    parser.add_argument("--plot-from", type=Path, help="redraw the PNG from a JSON, no GPU")
    parser.add_argument("--probe", help=argparse.SUPPRESS)  # one first call, in a new process
    args = parser.parse_args(argv)
    if args.plot_from:
        plot(json.loads(args.plot_from.read_text()), args.plot_from.with_suffix(".png"))
        return 0
    if not torch.cuda.is_available():
        print("benchmark_kernel_languages.py needs a CUDA GPU (torch.cuda.is_available() is")
        print(
            "False); the page's tables were measured on one (docs/perf/h100/kernel_languages.md)."
        )
        return 2
    if args.probe:
        print(probe(args.probe))
        return 0
    import triton

    import build_inplace
    from gpu_timer import Timer

    build_inplace.build_inplace()  # custom_ops's build, and its build.ninja for nvcc_seconds()
    result = {
        "header": {
            "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "cuda": torch.version.cuda,
            "date": datetime.date.today().isoformat(),
        },
        "starts": {way: start_times(way) for way in WAYS},
        "lines": kernel_lines(),
        "features": {way: features(way) for way in WAYS},
        "rows": bandwidth_rows(Timer()),
    }
    text = to_markdown(result)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kernel_languages.md").write_text(text)
        (args.out / "kernel_languages.json").write_text(json.dumps(result, indent=1) + "\n")
        plot(result, args.out / "kernel_languages.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
