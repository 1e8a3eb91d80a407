"""Two ops written each way the course shows: fused_bias_relu's forward (y = relu(x * scale +
bias), elementwise) and reduce_sum (the sum of all elements), as CUDA C++ in the package
(custom_ops), NVRTC in process (through torch and through cuda.core), Triton, Helion, CuTe DSL
(fused_bias_relu only; Helion and CuTe DSL where installed), and what PyTorch does itself (eager,
torch.compile). Per op and way: GPU time and the fraction of the copy floor at 2^20, 2^24 and 2^28
elements in float32 and bfloat16, back to back, the first call's time in a new process with empty
caches (cold) and with the caches of a first run (warm), the lines of kernel code, and whether
autograd, torch.compile(fullgraph=True), torch.export, CUDA graphs and CPU tensors work.

    python chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --out DIR   # a GPU
    python chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --plot-from DIR/kernel_languages.json
    python chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --markdown-from DIR/kernel_languages.json
    python chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --ops reduce_sum --out DIR2
    python chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --merge A.json B.json --out DIR

Timed with gpu_timer.py, the course's one GPU timer (chapter5_extensions/benchmarks/): median GPU
ms of 30 calls, cold L2, the ways of one size taking turns, three rounds; and back to back, 10
calls in a row, with the host's time per call. Floor: the bytes the op must move at the
bandwidth of a copy_ of x. Lesson: chapter 5, further/kernel_languages.md.
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
# fused_bias_relu's forward (memory-bound, elementwise) and reduce_sum (a reduction to one number).
OPS = ("fused_bias_relu", "reduce_sum")
WAYS = ["eager PyTorch", "torch.compile", "CUDA C++ (custom_ops)", "NVRTC", "Triton"]
# cuda.core is in requirements.txt; Helion and CuTe DSL are optional (their files say how to
# install them). Each is measured where it is installed; CuTe DSL for fused_bias_relu only.
if importlib.util.find_spec("cuda.core") is not None:
    WAYS.insert(4, "cuda.core")
if importlib.util.find_spec("helion") is not None:
    WAYS.append("Helion")
if importlib.util.find_spec("cutlass") is not None:
    WAYS.append("CuTe DSL")
ONLY_FOR = {"CuTe DSL": "fused_bias_relu"}


def ways(op: str) -> list[str]:
    """The ways this run measures for `op`."""
    return [way for way in WAYS if ONLY_FOR.get(way, op) == op]


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


def eager_sum(x):
    return torch.sum(x)


def make_way(op: str, way: str):
    """The way's op, called as fn(x, bias) (fused_bias_relu) or fn(x) (reduce_sum), its modules
    imported only now: each import is part of what a cold start pays."""
    if way == "eager PyTorch":
        return eager if op == "fused_bias_relu" else eager_sum
    if way == "torch.compile":
        return torch.compile(eager if op == "fused_bias_relu" else eager_sum, dynamic=False)
    if op == "fused_bias_relu":
        if way == "CUDA C++ (custom_ops)":
            import custom_ops

            return lambda x, bias: custom_ops.fused_bias_relu(x, bias, SCALE)
        module = {
            "NVRTC": "nvrtc_fused_bias_relu",
            "cuda.core": "cuda_core_fused_bias_relu",
            "Triton": "triton_fused_bias_relu",
            "Helion": "helion_fused_bias_relu",
            "CuTe DSL": "cute_fused_bias_relu",
        }[way]
        fn = importlib.import_module(module).fused_bias_relu
        return lambda x, bias: fn(x, bias, SCALE)
    module = {
        "CUDA C++ (custom_ops)": "custom_ops",
        "NVRTC": "nvrtc_reduce_sum",
        "cuda.core": "cuda_core_reduce_sum",
        "Triton": "triton_reduce_sum",
        "Helion": "helion_reduce_sum",
    }[way]
    return importlib.import_module(module).reduce_sum


def make_inputs(op: str, elements: int, dtype: torch.dtype, device: str = "cuda") -> tuple:
    x = torch.randn(elements // COLS, COLS, device=device, dtype=dtype)
    return (x, torch.randn(COLS, device=device, dtype=dtype)) if op == "fused_bias_relu" else (x,)


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


def kernel_lines(op: str) -> dict:
    """The device code each way asks its author to write."""
    import inspect

    cuda = (CHAPTER / "csrc" / "cuda" / f"{op}.cu").read_text()
    if op == "fused_bias_relu":
        import triton_fused_bias_relu as t

        cuda_cpp = c_function(cuda, "__global__ void fused_bias_relu_kernel(")
        triton = inspect.getsource(t.opmath.fn) + inspect.getsource(t.fused_bias_relu_kernel.fn)
        python = inspect.getsource(eager)
        helion = ("helion_fused_bias_relu", "fused_bias_relu_kernel")
    else:
        import triton_reduce_sum as t

        cuda_cpp = "\n".join(
            c_function(cuda, signature)
            for signature in ("acc_t warp_sum(", "acc_t block_sum(", "sum_kernel(const scalar_t*")
        )
        triton = inspect.getsource(t.partial_sums_kernel.fn) + inspect.getsource(
            t.sum_partials_kernel.fn
        )
        python = inspect.getsource(eager_sum)
        helion = ("helion_reduce_sum", "partial_sums")
    # The NVRTC kernel's file and the helpers it shares with the other NVRTC kernel.
    nvrtc_lines = code_lines(
        (HERE / "nvrtc_common.cuh").read_text() + (HERE / f"{op}_nvrtc.cu").read_text()
    )
    lines = {
        "eager PyTorch": code_lines(python),
        "torch.compile": code_lines(python),
        "CUDA C++ (custom_ops)": code_lines(cuda_cpp),
        "NVRTC": nvrtc_lines,
        # The same file: what differs is the Python that compiles and launches it.
        "cuda.core": nvrtc_lines,
        "Triton": code_lines(triton),
    }
    if "Helion" in WAYS:
        kernel = getattr(importlib.import_module(helion[0]), helion[1])
        lines["Helion"] = code_lines(inspect.getsource(kernel.fn))
    if "CuTe DSL" in ways(op):  # the @cute.kernel, and the @cute.jit function that launches it
        cute = importlib.import_module("cute_fused_bias_relu")
        lines["CuTe DSL"] = code_lines(
            inspect.getsource(cute.fused_bias_relu_kernel)
            + inspect.getsource(cute.fused_bias_relu_host)
        )
    return lines


# ---- what works ---------------------------------------------------------------------------------


def works(fn) -> str:
    try:
        fn()
        torch.cuda.synchronize()
        return "yes"
    except Exception as e:  # the first line of why, for the table
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return "no: " + (why if len(why) <= 200 else why[:199] + "…")


def features(op: str, way: str) -> dict:
    fn = make_way(op, way)
    args = make_inputs(op, 64 * COLS, torch.float32)

    class Model(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)

    def autograd():
        leaves = [a.clone().requires_grad_() for a in args]
        torch.autograd.grad(fn(*leaves).sum(), leaves)

    def compiled():
        torch._dynamo.reset()
        torch.compile(Model(), fullgraph=True)(*args)

    def graph():
        expected = fn(*args)  # also compiles and loads outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = fn(*args)
        g.replay()
        # The replay against the same op called directly: a sum in another order than torch.sum's
        # would differ from it in the last bits, and that is not what this column asks.
        torch.testing.assert_close(y, expected, rtol=0, atol=0)

    return {
        "autograd": works(autograd),
        "compile": works(compiled),
        "export": works(lambda: torch.export.export(Model(), args)),
        "graphs": works(graph),
        "cpu": works(lambda: fn(*(a.cpu() for a in args))),
    }


# ---- cold and warm starts -----------------------------------------------------------------------


def probe(op: str, way: str) -> float:
    """In this (new) process: seconds from nothing of the way imported to its first result, the
    CUDA context and the inputs made before the clock starts."""
    args = make_inputs(op, 2**20, torch.float32)
    torch.cuda.synchronize()
    start = time.perf_counter()
    make_way(op, way)(*args)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def nvcc_seconds(op: str) -> float:
    """CUDA C++ cold: nvcc on csrc/cuda/<op>.cu with the package build's own command (ninja's
    record of it), into a scratch file. The link and import after it are the warm time."""
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
    entry = next(e for e in commands if e["file"].endswith(f"cuda/{op}.cu"))
    with tempfile.TemporaryDirectory() as scratch:
        command = re.sub(r"-o \S+", f"-o {scratch}/out.o", entry["command"])
        start = time.perf_counter()
        subprocess.run(command, shell=True, check=True, cwd=entry["directory"])
        return time.perf_counter() - start


def start_times(op: str, way: str) -> dict:
    """Cold: empty Triton, Inductor and Helion caches (NVRTC and cuda.core keep none here). Warm:
    the same caches again."""
    if way == "eager PyTorch":
        return {"cold_s": None, "warm_s": None}
    with tempfile.TemporaryDirectory() as caches:
        env = {
            **os.environ,
            "TRITON_CACHE_DIR": f"{caches}/triton",
            "TORCHINDUCTOR_CACHE_DIR": f"{caches}/inductor",
            "HELION_CACHE_DIR": f"{caches}/helion",
            "CUTE_DSL_CACHE_DIR": f"{caches}/cute",
        }
        command = [sys.executable, __file__, "--probe", op, way]

        def run() -> float:
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            return float(out.stdout.strip().splitlines()[-1])

        cold = run()
        warm = run()
    if way == "CUDA C++ (custom_ops)":
        cold = nvcc_seconds(op) + warm
    return {"cold_s": cold, "warm_s": warm}


# ---- GPU time -----------------------------------------------------------------------------------


def one_size(timer, op: str, fns: dict, dtype_name: str, e: int) -> list[dict]:
    """Every way on one tensor of 2^e elements, taking turns with a copy_ of it. The floor:
    fused_bias_relu reads x and writes y, the bytes copy_ moves, in copy_'s time; reduce_sum only
    reads x, half of them, in half that time."""
    args = make_inputs(op, 2**e, DTYPES[dtype_name])
    x = args[0]
    out = torch.empty_like(x)
    calls = {way: (lambda fn=fn: fn(*args)) for way, fn in fns.items()}
    calls["copy_"] = lambda: out.copy_(x)
    measured = timer.measure_in_turns(calls, loop=10)
    share = 1.0 if op == "fused_bias_relu" else 0.5
    moved = share * 2 * x.numel() * x.element_size()
    floor_ms = share * measured["copy_"]["gpu_ms"]
    return [
        {
            "op": op,
            "way": way,
            "dtype": dtype_name,
            "elements": 2**e,
            "gpu_ms": measured[way]["gpu_ms"],
            "loop_ms": measured[way]["loop_ms"],
            "host_ms": measured[way]["host_ms"],
            "gbps": moved / measured[way]["gpu_ms"] / 1e6,
            "of_floor": floor_ms / measured[way]["gpu_ms"],
            "copy_gbps": 2 * x.numel() * x.element_size() / measured["copy_"]["gpu_ms"] / 1e6,
        }
        for way in fns
    ]


def bandwidth_rows(timer, ops: list[str]) -> list[dict]:
    rows = []
    for op in ops:
        for dtype_name in DTYPES:
            for e in EXPONENTS:
                torch._dynamo.reset()  # a graph per size, as a model with static shapes gets
                fns = {way: make_way(op, way) for way in ways(op)}
                rows += one_size(timer, op, fns, dtype_name, e)
    return rows


# ---- output -------------------------------------------------------------------------------------


def to_markdown(result: dict) -> str:
    head = result["header"]

    def measured(op: str) -> list[str]:  # the ways this result has for op, Helion or not
        return list(dict.fromkeys(r["way"] for r in result["rows"] if r.get("op", op) == op))

    lines = [
        "# Two ops, every way to write them: fused_bias_relu's forward and reduce_sum",
        "",
        f"Written by `chapter5_extensions/kernel_languages/benchmark_kernel_languages.py --out`: "
        f"{head['device']}, torch {head['torch']}, Triton {head['triton']}, CUDA "
        f"{head['cuda']}, {head['date']}. GPU ms (median of 30, cold L2, the ways taking turns, "
        "middle of 3 rounds) and, in brackets, the fraction of the floor: the bytes the op must "
        "move (fused_bias_relu: read x, write y; reduce_sum: read x) at the bandwidth of `copy_` "
        "of x.",
    ]
    sizes = [f"2^{e}" for e in EXPONENTS]

    def table(op: str, cell) -> list[str]:
        out = [
            "",
            "| way | dtype | " + " | ".join(sizes) + " |",
            "| --- | --- | " + " | ".join("---:" for _ in sizes) + " |",
        ]
        for way in measured(op):
            for dtype in DTYPES:
                cells = [
                    cell(r)
                    for e in EXPONENTS
                    for r in result["rows"]
                    if (r["op"], r["way"], r["dtype"], r["elements"]) == (op, way, dtype, 2**e)
                ]
                out.append(f"| {way} | {dtype} | " + " | ".join(cells) + " |")
        return out

    for op in result["starts"]:  # the ops measured
        # Back to back first: what a loop of calls pays. GPU time beside it: what the kernel costs.
        lines += [
            "",
            f"## {op}",
            "",
            "Back to back: ms per call of 10 calls in a row (median of 5 loops, warm L2: what a "
            "loop of calls pays, launches included), and in brackets the host's µs for one call "
            "issued alone.",
        ]
        lines += table(op, lambda r: f"{r['loop_ms']:.4f} ({r['host_ms'] * 1e3:.0f} µs)")
        lines += ["", "GPU time:"]
        lines += table(op, lambda r: f"{r['gpu_ms']:.4f} ({r['of_floor']:.0%})")
        lines += [
            "",
            "| way | cold start, s | warm start, s | kernel lines | "
            + " | ".join(FEATURES.values())
            + " |",
            "| --- | ---: | ---: | ---: | --- | --- | --- | --- | --- |",
        ]
        for way in measured(op):
            s = result["starts"][op][way]
            f = result["features"][op][way]

            def seconds(v):
                return "" if v is None else f"{v:.2f}"

            lines.append(
                f"| {way} | {seconds(s['cold_s'])} | {seconds(s['warm_s'])} | "
                f"{result['lines'][op][way]} | "
                + " | ".join(f[k].split(":")[0] for k in FEATURES)
                + " |"
            )
        refusals = [
            f"{way}, {FEATURES[k]}: {f.split(': ', 1)[1]}"
            for way in measured(op)
            for k, f in result["features"][op][way].items()
            if f.startswith("no: ")
        ]
        lines += ["", *(f"- No: {r}" for r in refusals)]
    first_op = next(iter(result["starts"]))
    copy = {
        (r["dtype"], r["elements"]): r["copy_gbps"] for r in result["rows"] if r["op"] == first_op
    }
    lines += [
        "",
        f"copy_ of x, GB/s (read and write), in the {first_op} rows: "
        + "; ".join(f"{d} 2^{e}: {copy[(d, 2**e)]:,.0f}" for d in DTYPES for e in EXPONENTS)
        + ".",
        "",
        "Cold: a new process, empty Triton, Inductor, Helion and CuTe DSL caches, from importing the "
        "way to its first result on 2^20 float32 elements (the CUDA context made before); for CUDA C++ "
        "nvcc on `csrc/cuda/<op>.cu` with the build's own command, plus the warm "
        "time. Warm: the same in a second process with the caches the first left (NVRTC and "
        "cuda.core keep none: they compile again). Kernel lines: the device code without blank and "
        "comment lines (CUDA C++: the `__global__` template and, for reduce_sum, its two "
        "`__device__` helpers; NVRTC and cuda.core: the same whole `.cu` file; Triton: the "
        "`@triton.jit` functions; "
        "Helion: the `@helion.kernel` function; CuTe DSL: the `@cute.kernel` and the `@cute.jit` "
        "function that tiles and launches it; PyTorch: the Python function).",
        "",
    ]
    return "\n".join(lines)


def plot(result: dict, path: Path):
    """The fraction of the floor against elements, a panel per op and dtype, a line per way."""
    ops = list(dict.fromkeys(r.get("op", "fused_bias_relu") for r in result["rows"]))
    ways = list(dict.fromkeys(r["way"] for r in result["rows"]))
    fig = plot_style.figure(height=4.0 * len(ops))
    axes = fig.subplots(len(ops), len(DTYPES), sharey=True, squeeze=False)
    for row_axes, op in zip(axes, ops, strict=True):
        for ax, dtype in zip(row_axes, DTYPES, strict=True):
            for way in ways:
                rows = [
                    r
                    for r in result["rows"]
                    if (r.get("op", "fused_bias_relu"), r["way"], r["dtype"]) == (op, way, dtype)
                ]
                if rows:
                    ax.plot([r["elements"] for r in rows], [r["of_floor"] for r in rows], label=way)
            ax.axhline(1.0, label="copy_ (floor)", **plot_style.REFERENCE)
            ax.set_title(f"{op}, {dtype}")
            plot_style.log2_axis(ax, "x", [2**e for e in EXPONENTS])
        plot_style.zero_based_y(row_axes[0], "fraction of the floor")
    plot_style.legend_below(fig, ncols=3)
    plot_style.save(fig, path)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write kernel_languages.{md,json,png} here")
    parser.add_argument("--plot-from", type=Path, help="redraw the PNG from a JSON, no GPU")
    parser.add_argument("--markdown-from", type=Path, help="rewrite the .md from a JSON, no GPU")
    parser.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS), help="only these")
    parser.add_argument(
        "--merge", nargs="+", type=Path, help="one result of runs with other --ops (with --out)"
    )
    parser.add_argument("--probe", nargs=2, help=argparse.SUPPRESS)  # op, way: in a new process
    args = parser.parse_args(argv)
    if args.merge:
        # Two runs of one machine and day, one op each (a run of both ops is near the device
        # tool's 10 minutes a command): the first run's header, both runs' rows.
        runs = [json.loads(path.read_text()) for path in args.merge]
        result = {"header": runs[0]["header"], "rows": [r for run in runs for r in run["rows"]]}
        for key in ("starts", "lines", "features"):
            result[key] = {op: v for run in runs for op, v in run[key].items()}
        write(result, args.out)
        return 0
    if args.markdown_from:
        result = json.loads(args.markdown_from.read_text())
        args.markdown_from.with_suffix(".md").write_text(to_markdown(result))
        return 0
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
        print(probe(*args.probe))
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
        "starts": {op: {way: start_times(op, way) for way in ways(op)} for op in args.ops},
        "lines": {op: kernel_lines(op) for op in args.ops},
        "features": {op: {way: features(op, way) for way in ways(op)} for op in args.ops},
        "rows": bandwidth_rows(Timer(), args.ops),
    }
    write(result, args.out)
    return 0


def write(result: dict, out: Path | None) -> None:
    """Print the table; with an --out folder, also write it, the JSON and the plot there."""
    if out:  # the measurements first: nothing after them can lose them
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernel_languages.json").write_text(json.dumps(result, indent=1) + "\n")
    text = to_markdown(result)
    print(text)
    if out:
        (out / "kernel_languages.md").write_text(text)
        plot(result, out / "kernel_languages.png")


if __name__ == "__main__":
    sys.exit(main())
