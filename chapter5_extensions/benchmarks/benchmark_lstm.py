"""The whole LSTM layer on a CUDA GPU: custom_ops.LSTM against cuDNN's torch.nn.LSTM, a Python loop
of torch.nn.LSTMCell and that loop with the cell compiled (chapter 5, "A whole LSTM layer").

    python chapter5_extensions/benchmarks/benchmark_lstm.py                 # a few minutes on an H100
    python chapter5_extensions/benchmarks/benchmark_lstm.py --quick         # small shapes, seconds
    python chapter5_extensions/benchmarks/benchmark_lstm.py --out DIR       # DIR/lstm_layer.{md,json,png}
    python chapter5_extensions/benchmarks/benchmark_lstm.py --profile       # where ours spends its time
    python chapter5_extensions/benchmarks/benchmark_lstm.py --plot-from DIR/lstm_layer.json  # the PNG again, no GPU

Timed with gpu_timer.py, the course's one GPU timer: GPU ms is the median of CUDA-event timings
with a cold L2 and the host's work queued ahead (what the GPU needs); back to back is events around
calls in a row (what a training loop sees when the host is the slower side). "fwd" runs under
torch.no_grad() (inference); "fwd+bwd" is the forward and torch.autograd.grad of every input and
parameter. Every implementation runs with PyTorch's defaults: float32 products on TF32 tensor cores
in cuDNN's RNN and in ours (torch.backends.cudnn.rnn.fp32_precision = "tf32"), in full float32 in
nn.LSTMCell (torch.backends.cuda.matmul.fp32_precision = "ieee"); the "TF32 off" rows turn the
RNN flag off for both.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import sys
from pathlib import Path

import torch
from matplotlib.figure import Figure

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the chapter folder: build_inplace, custom_ops

import plot_style  # noqa: E402  (the course's one plot style)
from gpu_timer import Timer, event_ms  # noqa: E402  (the course's one GPU timer)

CASES = [(64, 8, 512), (64, 64, 1024), (256, 64, 1024), (64, 4096, 1024)]
QUICK_CASES = [(16, 8, 128), (16, 64, 256)]
SWEEP_BATCHES = [1, 4, 16, 64, 256, 1024, 4096]  # T = 64, H = I = 1024, float32, fwd+bwd
# --persistent-sweep: where the persistent kernel beats the step loop (T = 64, H = I).
PERSISTENT_BATCHES = [1, 2, 4, 8, 16, 32, 64]
PERSISTENT_HIDDEN = [256, 512, 1024]
PERSISTENT = "CUSTOM_OPS_LSTM_PERSISTENT"  # "0": the step loop; "1": persistent where it fits


def cell_loop(cell):
    """h_1 .. h_T of a Python loop of `cell` over x (T, B, I): how an LSTM is written by hand."""

    def run(x):
        h = c = x.new_zeros(x.shape[1], cell.hidden_size)
        outputs = []
        for x_t in x:
            h, c = cell(x_t, (h, c))
            outputs.append(h)
        return torch.stack(outputs)

    return run


def implementations(hidden: int, dtype, use_compile: bool) -> dict:
    """name -> (model, call): call(x) returns the output sequence (T, B, H)."""
    import custom_ops

    torch.manual_seed(0)
    factory = dict(device="cuda", dtype=dtype)
    # Built in place, not moved with .to(dtype): cuDNN wants its weights in one flat buffer and
    # otherwise copies them into one on every call (its "not part of single contiguous chunk"
    # warning), which would time a copy that a real model does not make.
    cudnn = torch.nn.LSTM(hidden, hidden, **factory)
    ours = custom_ops.LSTM(hidden, hidden, **factory)
    ours.load_state_dict(cudnn.state_dict())
    cell = torch.nn.LSTMCell(hidden, hidden, **factory)
    impls = {
        "ours": (ours, lambda x: ours(x)[0]),
        "cuDNN nn.LSTM": (cudnn, lambda x: cudnn(x)[0]),
        "loop of nn.LSTMCell": (cell, cell_loop(cell)),
    }
    if use_compile:
        torch._dynamo.reset()
        compiled_cell = torch.compile(cell, dynamic=False)
        impls["loop of compiled nn.LSTMCell"] = (cell, cell_loop(compiled_cell))
    return impls


class FirstOutput(torch.nn.Module):
    """An LSTM module that returns only y: what torch.cuda.make_graphed_callables takes."""

    def __init__(self, lstm) -> None:
        super().__init__()
        self.lstm = lstm

    def forward(self, x):
        return self.lstm(x)[0]


def graphed(model, x, grad_y, params):
    """(forward, forward_backward) replayed from CUDA graphs: the host launches one graph per
    pass instead of every kernel of every step. The forward is captured under no_grad; the
    forward+backward through make_graphed_callables, which graphs both directions."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):  # warm-up off the capture: cuBLAS and cuDNN pick and cache kernels
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        model(x)
    x_grad = x.clone().requires_grad_()
    module = torch.cuda.make_graphed_callables(FirstOutput(model), (x_grad,))
    return graph.replay, fwd_bwd(module, x_grad, [x_grad, *params], grad_y)


def no_tf32(call):
    def run(x):
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            return call(x)

    return run


def fwd_bwd(call, x, inputs, grad_y):
    """The forward of call(x) and the gradients of `inputs`, not accumulated into .grad."""

    def run():
        torch.autograd.grad(call(x), inputs, grad_y)

    return run


def timed(timer: Timer, fn) -> dict:
    """Timer.measure with fewer runs for calls of many milliseconds (the Python loops at large
    batch take hundreds): about two seconds of runs per row."""
    fn()
    ms = event_ms(fn)
    runs = int(min(30, max(3, 2000 / max(ms, 1e-3))))
    return timer.measure(fn, runs=runs, loop=10 if ms < 5 else 1)


def rows_for(timer: Timer, steps: int, batch: int, hidden: int, dtype, use_compile: bool):
    impls = implementations(hidden, dtype, use_compile)
    if dtype == torch.float32:
        for name in ("ours", "cuDNN nn.LSTM"):
            model, call = impls[name]
            impls[f"{name}, TF32 off"] = (model, no_tf32(call))
    x = torch.randn(steps, batch, hidden, device="cuda", dtype=dtype)
    x_grad = x.clone().requires_grad_()
    grad_y = torch.randn(steps, batch, hidden, device="cuda", dtype=dtype)
    passes = {}
    for name, (model, call) in impls.items():
        params = list(model.parameters())

        def forward(call=call):
            with torch.no_grad():
                call(x)

        passes[name] = {"fwd": forward, "fwd+bwd": fwd_bwd(call, x_grad, [x_grad, *params], grad_y)}
        if "compiled" in name:  # the compiled loop: fwd+bwd only (each pass compiles anew)
            del passes[name]["fwd"]
    # Graphs keep their memory in private pools; at T*B*H = 2^28 four of them do not fit in
    # 80 GB, and there the GPU's work dwarfs the host's launches anyway.
    graph_names = ("ours", "cuDNN nn.LSTM") if steps * batch * hidden <= 2**25 else ()
    for name in graph_names:
        model = impls[name][0]
        try:
            forward, forward_backward = graphed(model, x, grad_y, list(model.parameters()))
        except RuntimeError as error:  # say so, and go on without the row
            print(f"  {name} could not be captured in a CUDA graph: {str(error)[:200]}")
            continue
        passes[f"{name}, CUDA graph"] = {"fwd": forward, "fwd+bwd": forward_backward}
    for name, fns in passes.items():
        for pass_name, fn in fns.items():
            m = timed(timer, fn)
            yield {
                "case": f"T={steps} B={batch} H={hidden}",
                "T": steps,
                "B": batch,
                "H": hidden,
                "dtype": str(dtype).removeprefix("torch."),
                "pass": pass_name,
                "impl": name,
                "gpu_ms": m["gpu_ms"],
                "loop_ms": m["loop_ms"],
                "host_ms": m["host_ms"],
                "runs": m["runs"],
                "runs_host_not_hidden": m["runs_host_not_hidden"],
            }
            print(
                f"  {steps:4d} {batch:5d} {hidden:5d} {dtype} {pass_name:8s} {name:34s} "
                f"{m['gpu_ms']:9.3f} ms  (back to back {m['loop_ms']:.3f}, host "
                f"{m['host_ms']:.3f})",
                flush=True,
            )


def with_path(path: str, fn):
    """fn run with CUSTOM_OPS_LSTM_PERSISTENT set to path (the op reads it on every call)."""

    def run():
        before = os.environ.get(PERSISTENT)
        os.environ[PERSISTENT] = path
        try:
            return fn()
        finally:
            if before is None:
                del os.environ[PERSISTENT]
            else:
                os.environ[PERSISTENT] = before

    return run


def persistent_kernels(fn) -> str:
    """Which passes of fn() ran as a persistent kernel: "fwd+bwd", "fwd", "bwd" or "none"."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = " ".join(e.name for e in prof.events())
    ran = [
        p
        for p, kernel in (("fwd", "forward"), ("bwd", "backward"))
        if f"lstm_{kernel}_persistent" in names
    ]
    return "+".join(ran) if ran else "none"


def persistent_sweep(timer: Timer) -> list[dict]:
    """fwd+bwd of custom_ops.LSTM with each path, T = 64, H = I, at small batches."""
    import custom_ops

    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for hidden in PERSISTENT_HIDDEN:
            torch.manual_seed(0)
            model = custom_ops.LSTM(hidden, hidden, device="cuda", dtype=dtype)
            for batch in PERSISTENT_BATCHES:
                x = torch.randn(64, batch, hidden, device="cuda", dtype=dtype, requires_grad=True)
                grad_y = torch.randn_like(x)
                call = fwd_bwd(FirstOutput(model), x, [x, *model.parameters()], grad_y)
                row = {"H": hidden, "B": batch, "dtype": str(dtype).removeprefix("torch.")}
                for path, name in (("1", "persistent"), ("0", "step loop")):
                    fn = with_path(path, call)
                    m = timed(timer, fn)
                    row[name] = {"gpu_ms": m["gpu_ms"], "loop_ms": m["loop_ms"]}
                row["ran"] = persistent_kernels(with_path("1", call))
                row["default"] = persistent_kernels(call)
                rows.append(row)
                print(
                    f"  H={hidden:5d} B={batch:3d} {row['dtype']:8s} persistent "
                    f"{row['persistent']['gpu_ms']:.3f} / {row['persistent']['loop_ms']:.3f} ms, "
                    f"step loop {row['step loop']['gpu_ms']:.3f} / "
                    f"{row['step loop']['loop_ms']:.3f} ms (ran: {row['ran']}, by default: "
                    f"{row['default']})",
                    flush=True,
                )
    return rows


def persistent_table(rows: list[dict]) -> list[str]:
    lines = [
        "The persistent kernel against the step loop, fwd+bwd, T = 64, H = I "
        "(GPU ms / back-to-back ms; `ran`: the passes that fit the persistent kernel; "
        "`default`: what runs with CUSTOM_OPS_LSTM_PERSISTENT unset):",
        "",
        "| H | B | dtype | persistent | step loop | loop / persistent (GPU) | ran | default |",
        "| ---: | ---: | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        p, s = r["persistent"], r["step loop"]
        lines.append(
            f"| {r['H']} | {r['B']} | {r['dtype']} | {p['gpu_ms']:.3f} / {p['loop_ms']:.3f} "
            f"| {s['gpu_ms']:.3f} / {s['loop_ms']:.3f} | {s['gpu_ms'] / p['gpu_ms']:.2f} "
            f"| {r['ran']} | {r['default']} |"
        )
    return lines


def profile(steps: int = 64, batch: int = 64, hidden: int = 1024, dtype=torch.float32) -> str:
    """Where one fwd+bwd call of ours spends the GPU's time, by kernel kind, and the host's."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    import custom_ops

    factory = dict(device="cuda", dtype=dtype)
    model = custom_ops.LSTM(hidden, hidden, **factory)
    x = torch.randn(steps, batch, hidden, **factory, requires_grad=True)
    grad_y = torch.randn(steps, batch, hidden, **factory)

    def call():
        torch.autograd.grad(model(x)[0], [x, *model.parameters()], grad_y)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    kinds: dict[str, list[float]] = {}
    launches: list[float] = []  # the host's time in each launch call (runtime or driver API)
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            if "launchkernel" in e.name.lower():
                launches.append(e.cpu_time_total / 1e3)
            continue
        name = e.name.lower()
        if "lstm_step" in name:
            kind = "fused pointwise step kernels"
        elif any(k in name for k in ("gemm", "xmma", "cutlass", "sm90", "cublas")):
            kind = "cuBLAS GEMMs"
        else:
            kind = "other (" + e.name[:40] + ")"
        kinds.setdefault(kind, []).append(e.device_time_total / 1e3)
    lines = [
        f"One fwd+bwd call of custom_ops.LSTM, T={steps} B={batch} H=I={hidden}, "
        f"{str(dtype).removeprefix('torch.')}, "
        f"{torch.cuda.get_device_name()}:",
        "",
        "| kernels | launches | GPU ms |",
        "| --- | ---: | ---: |",
    ]
    for kind, times in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| {kind} | {len(times)} | {sum(times):.3f} |")
    total = sum(sum(t) for t in kinds.values())
    lines.append(f"| all kernels | {sum(len(t) for t in kinds.values())} | {total:.3f} |")
    lines += [
        "",
        f"The host spent {sum(launches):.3f} ms in {len(launches)} kernel-launch calls "
        f"({1e3 * sum(launches) / max(len(launches), 1):.1f} us each, under the profiler).",
    ]
    return "\n".join(lines) + "\n"


def summary_table(result: dict) -> list[str]:
    """Forward + backward only, one row per shape and dtype: GPU ms / back-to-back ms of each
    implementation, and GPU ms of the CUDA-graph rows (the lesson quotes this table)."""
    lines = [
        "Forward + backward, GPU ms / back-to-back ms (CUDA-graph columns: GPU ms):",
        "",
        "| T, B, H | dtype | ours | cuDNN `nn.LSTM` | loop of `nn.LSTMCell` | ours, CUDA graph "
        "| cuDNN, CUDA graph |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    table: dict = {}
    for r in result["rows"]:
        if r["pass"] == "fwd+bwd":
            table.setdefault((r["T"], r["B"], r["H"], r["dtype"]), {})[r["impl"]] = r

    def ms(v: float) -> str:  # three significant digits, trailing zeros kept: 2.30, 27.1, 278
        return f"{v:#.3g}".rstrip(".")

    def both(r) -> str:
        return f"{ms(r['gpu_ms'])} / {ms(r['loop_ms'])}" if r else "not run"

    def gpu(r) -> str:
        return ms(r["gpu_ms"]) if r else "not run"

    for (steps, batch, hidden, dtype), by in table.items():
        lines.append(
            f"| {steps}, {batch}, {hidden} | {dtype} | {both(by.get('ours'))} "
            f"| {both(by.get('cuDNN nn.LSTM'))} | {both(by.get('loop of nn.LSTMCell'))} "
            f"| {gpu(by.get('ours, CUDA graph'))} | {gpu(by.get('cuDNN nn.LSTM, CUDA graph'))} |"
        )
    return lines


def to_markdown(result: dict) -> str:
    lines = [
        f"{result['gpu']}; torch {result['torch']}, CUDA {result['cuda']}, cuDNN "
        f"{result['cudnn']}; {result['date']}.",
        "GPU ms: median of CUDA-event timings, cold L2, host hidden; back to back: per call in a "
        "row. One layer, I = H.",
        "",
        "| T, B, H | dtype | pass | implementation | GPU ms | back to back ms | GPU ms / ours |",
        "| --- | --- | --- | --- | ---: | ---: | ---: |",
    ]
    rows = result["rows"]
    ours = {(r["case"], r["dtype"], r["pass"]): r["gpu_ms"] for r in rows if r["impl"] == "ours"}
    for r in rows:
        key = (r["case"], r["dtype"], r["pass"])
        speed = f"{r['gpu_ms'] / ours[key]:.2f}"
        lines.append(
            f"| {r['T']}, {r['B']}, {r['H']} | {r['dtype']} | {r['pass']} | {r['impl']} | "
            f"{r['gpu_ms']:.3f} | {r['loop_ms']:.3f} | {speed} |"
        )
    lines += ["", *summary_table(result)]
    if result.get("sweep"):
        lines += [
            "",
            "Batch sweep, T = 64, H = I = 1024, float32, fwd+bwd (GPU ms):",
            "",
            "| B | ours | cuDNN nn.LSTM | cuDNN / ours |",
            "| ---: | ---: | ---: | ---: |",
        ]
        for b in sorted({r["B"] for r in result["sweep"]}):
            by = {r["impl"]: r["gpu_ms"] for r in result["sweep"] if r["B"] == b}
            lines.append(
                f"| {b} | {by['ours']:.3f} | {by['cuDNN nn.LSTM']:.3f} | "
                f"{by['cuDNN nn.LSTM'] / by['ours']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> Figure:
    """GPU ms of fwd+bwd against batch size, both on log axes: the float32 sweep (T = 64,
    H = I = 1024) of ours, cuDNN's nn.LSTM and the loop of nn.LSTMCell."""
    fig = plot_style.figure(height=5)
    ax = fig.subplots()
    for impl in ("ours", "cuDNN nn.LSTM", "loop of nn.LSTMCell"):
        points = sorted((r["B"], r["gpu_ms"]) for r in result["sweep"] if r["impl"] == impl)
        if points:
            ax.plot(*zip(*points, strict=True), label=impl)
    plot_style.log2_axis(ax, "x", sorted({r["B"] for r in result["sweep"]}), powers=False)
    ax.set_xlabel("batch size B")
    plot_style.log_axis(ax, "y")
    ax.set_ylabel("GPU ms, fwd+bwd")
    ax.set_title("One LSTM layer, T=64, H=I=1024, float32", loc="left")
    plot_style.legend_below(fig, ncols=3)
    fig.suptitle(f"{result['gpu']}, torch {result['torch']}, {result['date']}")
    plot_style.save(fig, path)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, seconds")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled cell loop")
    parser.add_argument("--no-sweep", action="store_true", help="skip the batch-size sweep")
    parser.add_argument("--profile", action="store_true", help="only the kernel-time profile")
    parser.add_argument(
        "--persistent-sweep",
        action="store_true",
        help="only the persistent kernel against the step loop (lstm_persistent.{md,json})",
    )
    parser.add_argument("--out", type=Path, help="write lstm_layer.{md,json,png} here")
    parser.add_argument(
        "--cases", help='only these shapes, "T,B,H;T,B,H" (default: the lesson\'s four)'
    )
    parser.add_argument(
        "--dtypes", default="float32,bfloat16", help="comma-separated (default: both)"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="an earlier lstm_layer.json: keep its rows of the other dtypes and its sweep "
        "(after a change that touched one dtype's code only)",
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
        print("benchmark_lstm.py needs a CUDA GPU (torch.cuda.is_available() is False); the")
        print("lesson's tables were measured on one (see docs/perf/h100/lstm_layer.md).")
        return 2
    import build_inplace

    build_inplace.build_inplace()
    if args.profile:
        print(profile())
        return 0
    timer = Timer()
    if args.persistent_sweep:
        result = {
            "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "date": datetime.date.today().isoformat(),
            "rows": persistent_sweep(timer),
        }
        table = f"{result['gpu']}; torch {result['torch']}; {result['date']}.\n\n"
        table += "\n".join(persistent_table(result["rows"])) + "\n"
        print(table)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "lstm_persistent.json").write_text(json.dumps(result, indent=2) + "\n")
            (args.out / "lstm_persistent.md").write_text(table)
        return 0
    rows = []
    dtypes = [getattr(torch, name) for name in args.dtypes.split(",")]
    cases = QUICK_CASES if args.quick else CASES
    if args.cases:
        cases = [tuple(int(v) for v in case.split(",")) for case in args.cases.split(";")]
    for steps, batch, hidden in cases:
        for dtype in dtypes:
            rows += rows_for(timer, steps, batch, hidden, dtype, not args.no_compile)
            gc.collect()  # the last case's models and CUDA graphs, before the next allocates
            torch.cuda.empty_cache()
    sweep = []
    if args.keep:
        kept = json.loads(args.keep.read_text())
        rows = [r for r in kept["rows"] if r["dtype"] not in args.dtypes.split(",")] + rows
        rows.sort(key=lambda r: (r["T"] * r["B"] * r["H"], r["T"], r["dtype"] != "float32"))
        sweep = kept["sweep"]
    if not (args.quick or args.no_sweep or sweep):
        for batch in SWEEP_BATCHES:
            impls = implementations(1024, torch.float32, use_compile=False)
            if batch > 256:
                impls.pop("loop of nn.LSTMCell")  # seconds a call; the table above has it
            x = torch.randn(64, batch, 1024, device="cuda", requires_grad=True)
            grad_y = torch.randn(64, batch, 1024, device="cuda")
            for name, (model, call) in impls.items():
                fn = fwd_bwd(call, x, [x, *model.parameters()], grad_y)
                sweep.append({"B": batch, "impl": name, "gpu_ms": timed(timer, fn)["gpu_ms"]})
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "date": datetime.date.today().isoformat(),
        "rows": rows,
        "sweep": sweep,
    }
    table = to_markdown(result)
    if not args.quick:  # the shape where ours leads cuDNN most, and the largest
        table += "\n" + profile() + "\n" + profile(64, 4096, 1024, torch.bfloat16)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "lstm_layer.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "lstm_layer.md").write_text(table)
        if sweep:
            plot(result, args.out / "lstm_layer.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
