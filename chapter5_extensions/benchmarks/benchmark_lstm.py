"""The whole LSTM layer on a CUDA GPU: custom_ops.LSTM against cuDNN's torch.nn.LSTM, a Python loop
of torch.nn.LSTMCell and, in float32, that loop with the cell compiled (chapter 5, "A whole LSTM
layer").

    python chapter5_extensions/benchmarks/benchmark_lstm.py                 # a few minutes on an H100
    python chapter5_extensions/benchmarks/benchmark_lstm.py --quick         # small shapes, seconds
    python chapter5_extensions/benchmarks/benchmark_lstm.py --out DIR       # DIR/lstm_layer.{md,json,png}
    python chapter5_extensions/benchmarks/benchmark_lstm.py --profile       # where ours spends its time
    python chapter5_extensions/benchmarks/benchmark_lstm.py --plot-from DIR/lstm_layer.json  # the PNG again, no GPU

Timed with gpu_timer.py, the course's one GPU timer: back to back is events around calls in a row
(what a training loop pays), GPU ms the median of CUDA-event timings with a cold L2 and the host's
work queued ahead (what the GPU needs). Ours and cuDNN (and their variants) take turns, three
rounds, with the same number of calls in a row; the Python loops of nn.LSTMCell are timed alone.
"fwd" is inference: the models in eval() and torch.no_grad() (cuDNN then runs its inference
kernels); "fwd+bwd" is the forward in train() and torch.autograd.grad of every input and
parameter. Every implementation runs with PyTorch's defaults: float32 products on TF32 tensor cores
in cuDNN's RNN and in ours (torch.backends.cudnn.rnn.fp32_precision = "tf32"), in full float32 in
nn.LSTMCell (torch.backends.cuda.matmul.fp32_precision = "ieee"); the "TF32 off" rows turn the
RNN flag off for both. The dtypes "autocast-float16" and "autocast-bfloat16" are a mixed-precision
user: float32 models called under torch.autocast("cuda", dtype); nn.LSTM then runs in float16
either way (autocast's list puts the cuDNN RNN in float16), ours in the autocast dtype.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import sys
from pathlib import Path

import torch
from matplotlib.figure import Figure

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the chapter folder: build_inplace, custom_ops

import plot_style  # noqa: E402  (the course's one plot style)
from gpu_timer import Timer, event_ms  # noqa: E402  (the course's one GPU timer)

CASES = [(64, 8, 512), (64, 64, 1024), (256, 64, 1024), (128, 32, 256), (64, 4096, 1024)]
QUICK_CASES = [(16, 8, 128), (16, 64, 256)]
DTYPES = "float32,bfloat16,float16,autocast-float16,autocast-bfloat16"
SWEEP_BATCHES = [1, 4, 16, 64, 256, 1024, 4096]  # T = 64, H = I = 1024, float32, fwd+bwd
# Where cuDNN is at its best: float16 (its persistent kernel takes B <= 128, H <= 1024), T = 256,
# the shapes of FlashRNN's comparison (Poppel et al., 2024); fwd+bwd, ours against cuDNN.
HALF_SWEEP_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
HALF_SWEEP_HIDDEN = [768, 1024]
# --persistent-sweep: where the persistent kernel beats the step loop (T = 64, H = I).
PERSISTENT_BATCHES = [1, 2, 4, 8, 16, 32, 64]
PERSISTENT_HIDDEN = [256, 512, 1024]


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
    model.eval()  # the forward graph is inference, as the "fwd" rows are
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):  # warm-up off the capture: cuBLAS and cuDNN pick and cache kernels
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        model(x)
    model.train()
    x_grad = x.clone().requires_grad_()
    module = torch.cuda.make_graphed_callables(FirstOutput(model), (x_grad,))
    return graph.replay, fwd_bwd(module, x_grad, [x_grad, *params], grad_y)


def no_tf32(call):
    def run(x):
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            return call(x)

    return run


def under_autocast(call, dtype):
    def run(x):
        with torch.autocast("cuda", dtype=dtype):
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


def timed_in_turns(timer: Timer, fns: dict) -> dict:
    """Timer.measure_in_turns of fns with one count of runs and of calls in a row for all, chosen
    from the slowest of them: no implementation is timed with a shorter loop than another."""
    slowest = 0.0
    for fn in fns.values():
        fn()  # the warm-up: first launch, caching allocator, cuDNN's plan
        slowest = max(slowest, event_ms(fn))
    runs = int(min(10, max(3, 700 / max(slowest, 1e-3))))
    return timer.measure_in_turns(fns, rounds=3, runs=runs, loop=10 if slowest < 5 else 2)


def rows_for(timer: Timer, steps: int, batch: int, hidden: int, dtype_name: str, use_compile: bool):
    """One row per (pass, implementation) at one shape and dtype ("float16", or
    "autocast-float16": float32 models under autocast)."""
    autocast = dtype_name.startswith("autocast-")
    dtype = torch.float32 if autocast else getattr(torch, dtype_name)
    # The compiled loop in float32 only: one compilation per shape is minutes of a run already.
    impls = implementations(hidden, dtype, use_compile and dtype_name == "float32")
    if autocast:
        half = getattr(torch, dtype_name.removeprefix("autocast-"))
        impls = {
            name: (model, under_autocast(call, half))
            for name, (model, call) in impls.items()
            if name in ("ours", "cuDNN nn.LSTM")
        }
    elif dtype == torch.float32:
        for name in ("ours", "cuDNN nn.LSTM"):
            model, call = impls[name]
            impls[f"{name}, TF32 off"] = (model, no_tf32(call))
    # The step loop launched step by step, as before it was replayed from a graph (the same
    # as "ours" at the batches where the persistent kernel runs instead).
    model, call = impls["ours"]
    impls["ours, no step graphs"] = (model, with_paths(call, step_graphs="never"))
    x = torch.randn(steps, batch, hidden, device="cuda", dtype=dtype)
    x_grad = x.clone().requires_grad_()
    grad_y = torch.randn(steps, batch, hidden, device="cuda", dtype=dtype)
    passes: dict[str, dict] = {"fwd": {}, "fwd+bwd": {}}
    for name, (model, call) in impls.items():
        params = list(model.parameters())

        def forward(call=call):
            with torch.no_grad():
                call(x)

        if "compiled" not in name:  # the compiled loop: fwd+bwd only (each pass compiles anew)
            passes["fwd"][name] = forward
        passes["fwd+bwd"][name] = fwd_bwd(call, x_grad, [x_grad, *params], grad_y)
    # Graphs keep their memory in private pools; at T*B*H = 2^28 four of them do not fit in
    # 80 GB, and there the GPU's work dwarfs the host's launches anyway.
    small = steps * batch * hidden <= 2**25
    for name in ("ours", "cuDNN nn.LSTM") if small and not autocast else ():
        model = impls[name][0]
        try:
            forward, forward_backward = graphed(model, x, grad_y, list(model.parameters()))
        except RuntimeError as error:  # say so, and go on without the row
            print(f"  {name} could not be captured in a CUDA graph: {str(error)[:200]}")
            continue
        passes["fwd"][f"{name}, CUDA graph"] = forward
        passes["fwd+bwd"][f"{name}, CUDA graph"] = forward_backward
    models = {id(model): model for model, _ in impls.values()}.values()
    for pass_name, fns in passes.items():
        for model in models:  # inference in eval(): cuDNN's forward then keeps no workspace
            model.train(pass_name == "fwd+bwd")
        together = {n: f for n, f in fns.items() if "nn.LSTMCell" not in n}
        measured = timed_in_turns(timer, together)
        measured |= {n: timed(timer, f) for n, f in fns.items() if n not in together}
        for name, m in measured.items():
            yield {
                "case": f"T={steps} B={batch} H={hidden}",
                "T": steps,
                "B": batch,
                "H": hidden,
                "dtype": dtype_name,
                "pass": pass_name,
                "impl": name,
                "gpu_ms": m["gpu_ms"],
                "loop_ms": m["loop_ms"],
                "host_ms": m["host_ms"],
                "runs": m["runs"],
                "runs_host_not_hidden": m["runs_host_not_hidden"],
            }
            print(
                f"  {steps:4d} {batch:5d} {hidden:5d} {dtype_name:17s} {pass_name:8s} {name:34s} "
                f"back to back {m['loop_ms']:9.3f} ms  (GPU {m['gpu_ms']:.3f}, host "
                f"{m['host_ms']:.3f})",
                flush=True,
            )
    for model in models:
        model.train()


def half_sweep(timer: Timer) -> list[dict]:
    """fwd+bwd of ours and cuDNN in float16 at T = 256, H = I in HALF_SWEEP_HIDDEN, B from 1 to
    256: where cuDNN's persistent kernel runs, and where ours and it cross."""
    rows = []
    for hidden in HALF_SWEEP_HIDDEN:
        impls = implementations(hidden, torch.float16, use_compile=False)
        impls.pop("loop of nn.LSTMCell")
        for batch in HALF_SWEEP_BATCHES:
            x = torch.randn(256, batch, hidden, device="cuda", dtype=torch.float16)
            x.requires_grad_()
            grad_y = torch.randn_like(x)
            fns = {
                name: fwd_bwd(call, x, [x, *model.parameters()], grad_y)
                for name, (model, call) in impls.items()
            }
            for name, m in timed_in_turns(timer, fns).items():
                rows.append({"H": hidden, "B": batch, "impl": name, **{
                    k: m[k] for k in ("gpu_ms", "loop_ms")}})  # fmt: skip
            by = {r["impl"]: r["loop_ms"] for r in rows[-2:]}
            print(
                f"  float16 T=256 H={hidden} B={batch:3d}: ours {by['ours']:.3f} ms, cuDNN "
                f"{by['cuDNN nn.LSTM']:.3f} ms back to back",
                flush=True,
            )
        gc.collect()
        torch.cuda.empty_cache()
    return rows


def with_paths(fn, **choice):
    """fn run with custom_ops.lstm_paths(**choice): one path of the CUDA layer forced."""
    import custom_ops

    def run(*args):
        with custom_ops.lstm_paths(**choice):
            return fn(*args)

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
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for hidden in PERSISTENT_HIDDEN:
            torch.manual_seed(0)
            model = custom_ops.LSTM(hidden, hidden, device="cuda", dtype=dtype)
            for batch in PERSISTENT_BATCHES:
                x = torch.randn(64, batch, hidden, device="cuda", dtype=dtype, requires_grad=True)
                grad_y = torch.randn_like(x)
                call = fwd_bwd(FirstOutput(model), x, [x, *model.parameters()], grad_y)
                row = {"H": hidden, "B": batch, "dtype": str(dtype).removeprefix("torch.")}
                for path, name in (("always", "persistent"), ("never", "step loop")):
                    fn = with_paths(call, persistent=path)
                    m = timed(timer, fn)
                    row[name] = {"gpu_ms": m["gpu_ms"], "loop_ms": m["loop_ms"]}
                row["ran"] = persistent_kernels(with_paths(call, persistent="always"))
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
        '`default`: what runs by default, persistent="auto"):',
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


def ms(v: float) -> str:
    """Three significant digits, trailing zeros kept: 2.30, 27.1, 278."""
    return f"{v:#.3g}".rstrip(".")


def against_cudnn(result: dict) -> list[str]:
    """Ours / cuDNN, back to back, a row per shape and a column per dtype and pass: the lesson's
    table. Below 1, ours is faster; GPU time is in the tables below."""
    columns = [
        ("float32", "fwd+bwd"),
        ("bfloat16", "fwd+bwd"),
        ("float16", "fwd"),
        ("float16", "fwd+bwd"),
        ("autocast-float16", "fwd+bwd"),
        ("autocast-bfloat16", "fwd+bwd"),
    ]
    loop = {
        (r["T"], r["B"], r["H"], r["dtype"], r["pass"], r["impl"]): r["loop_ms"]
        for r in result["rows"]
    }
    shapes = list(dict.fromkeys((r["T"], r["B"], r["H"]) for r in result["rows"]))
    lines = [
        "Ours / cuDNN, back-to-back time of one call (below 1: ours is faster):",
        "",
        "| T, B, H | " + " | ".join(f"{d} {p}" for d, p in columns) + " |",
        "| --- | " + " | ".join("---:" for _ in columns) + " |",
    ]
    for shape in shapes:
        cells = []
        for dtype, pass_name in columns:
            ours = loop.get((*shape, dtype, pass_name, "ours"))
            cudnn = loop.get((*shape, dtype, pass_name, "cuDNN nn.LSTM"))
            cells.append(f"{ours / cudnn:.2f}" if ours and cudnn else "")
        lines.append(f"| {', '.join(map(str, shape))} | " + " | ".join(cells) + " |")
    return lines


def summary_table(result: dict) -> list[str]:
    """Forward + backward only, one row per shape and dtype: back-to-back ms / GPU ms of each
    implementation, and GPU ms of the CUDA-graph rows."""
    lines = [
        "Forward + backward, back-to-back ms / GPU ms (CUDA-graph columns: GPU ms):",
        "",
        "| T, B, H | dtype | ours | cuDNN `nn.LSTM` | loop of `nn.LSTMCell` | ours, CUDA graph "
        "| cuDNN, CUDA graph |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    table: dict = {}
    for r in result["rows"]:
        if r["pass"] == "fwd+bwd":
            table.setdefault((r["T"], r["B"], r["H"], r["dtype"]), {})[r["impl"]] = r

    def both(r) -> str:
        return f"{ms(r['loop_ms'])} / {ms(r['gpu_ms'])}" if r else "not run"

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
        "Back to back: events around calls in a row, per call (what a training loop pays); ours "
        "and cuDNN take turns, three rounds, the same number of calls in a row. GPU ms: median of "
        "CUDA-event timings, cold L2, host hidden. fwd: eval() and no_grad(). One layer, I = H.",
        "",
        *against_cudnn(result),
        "",
        "| T, B, H | dtype | pass | implementation | back to back ms | GPU ms "
        "| back to back / cuDNN's |",
        "| --- | --- | --- | --- | ---: | ---: | ---: |",
    ]
    rows = result["rows"]
    cudnn = {
        (r["case"], r["dtype"], r["pass"]): r["loop_ms"]
        for r in rows
        if r["impl"] == "cuDNN nn.LSTM"
    }
    for r in rows:
        base = cudnn.get((r["case"], r["dtype"], r["pass"]))
        ratio = f"{r['loop_ms'] / base:.2f}" if base else ""
        lines.append(
            f"| {r['T']}, {r['B']}, {r['H']} | {r['dtype']} | {r['pass']} | {r['impl']} | "
            f"{r['loop_ms']:.3f} | {r['gpu_ms']:.3f} | {ratio} |"
        )
    lines += ["", *summary_table(result)]
    if result.get("half_sweep"):
        lines += [
            "",
            "float16, T = 256, H = I, fwd+bwd, back-to-back ms (GPU ms), ours and cuDNN in turns:",
            "",
            "| H | B | ours | cuDNN nn.LSTM | ours / cuDNN |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        by: dict = {}
        for r in result["half_sweep"]:
            by.setdefault((r["H"], r["B"]), {})[r["impl"]] = r
        for (hidden, batch), pair in by.items():
            ours, cudnn_row = pair["ours"], pair["cuDNN nn.LSTM"]
            lines.append(
                f"| {hidden} | {batch} | {ms(ours['loop_ms'])} ({ms(ours['gpu_ms'])}) | "
                f"{ms(cudnn_row['loop_ms'])} ({ms(cudnn_row['gpu_ms'])}) | "
                f"{ours['loop_ms'] / cudnn_row['loop_ms']:.2f} |"
            )
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
    """Ours against cuDNN as the batch grows, both axes log: float32 GPU ms of fwd+bwd at T = 64,
    H = I = 1024 (with the loop of nn.LSTMCell), and, where the run has it, float16 back-to-back
    ms at T = 256, H = 768 and 1024 (where cuDNN's persistent kernel runs), each panel with its
    legend under it."""
    half = result.get("half_sweep", [])
    fig = plot_style.figure(height=10 if half else 5)
    panels = fig.subfigures(2, 1) if half else [fig]
    ax = top = panels[0].subplots()
    for impl in ("ours", "cuDNN nn.LSTM", "loop of nn.LSTMCell"):
        points = sorted((r["B"], r["gpu_ms"]) for r in result["sweep"] if r["impl"] == impl)
        if points:
            last = points[-1][0]
            label = impl if last == max(SWEEP_BATCHES) else f"{impl} (to B = {last})"
            ax.plot(*zip(*points, strict=True), label=label)
    plot_style.log2_axis(ax, "x", sorted({r["B"] for r in result["sweep"]}), powers=False)
    ax.set_xlabel("batch size B")
    plot_style.log_axis(ax, "y")
    ax.set_ylabel("GPU ms, fwd+bwd")
    ax.set_title("One LSTM layer, T=64, H=I=1024, float32", loc="left")
    plot_style.legend_below(panels[0], ncols=3)
    if half:
        ax = panels[1].subplots()
        # A colour per implementation (the top panel's), a line style per H.
        colours = {line.get_label().split(" (")[0]: line.get_color() for line in top.get_lines()}
        for hidden, style in zip(sorted({r["H"] for r in half}), ("--", "-"), strict=False):
            for impl in ("ours", "cuDNN nn.LSTM"):
                points = sorted(
                    (r["B"], r["loop_ms"]) for r in half if r["impl"] == impl and r["H"] == hidden
                )
                ax.plot(
                    *zip(*points, strict=True),
                    linestyle=style,
                    color=colours.get(impl),
                    marker="o" if impl == "ours" else "s",
                    label=f"{impl}, H={hidden}",
                )
        plot_style.log2_axis(ax, "x", [1, 4, 16, 64, 256], powers=False)
        ax.set_xlabel("batch size B")
        plot_style.log_axis(ax, "y")
        ax.set_ylabel("back-to-back ms, fwd+bwd")
        ax.set_title("float16, T=256, H=I: cuDNN's persistent kernel", loc="left")
        plot_style.legend_below(panels[1], ncols=2)
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
        "--dtypes",
        default=DTYPES,
        help=f"comma-separated (default: {DTYPES}; autocast-X is float32 under autocast to X)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="an earlier lstm_layer.json: keep its rows of the shapes and dtypes not run now, and "
        "its sweeps (a run in two parts, or after a change that touched one dtype's code only)",
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
    dtypes = args.dtypes.split(",")
    cases = QUICK_CASES if args.quick else CASES
    if args.cases:
        cases = [tuple(int(v) for v in case.split(",")) for case in args.cases.split(";")]
    for steps, batch, hidden in cases:
        for dtype in dtypes:
            rows += rows_for(timer, steps, batch, hidden, dtype, not args.no_compile)
            gc.collect()  # the last case's models and CUDA graphs, before the next allocates
            torch.cuda.empty_cache()
        if args.out:  # what a run cut short has measured, for --keep to go on from
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "lstm_layer.partial.json").write_text(json.dumps({"rows": rows}) + "\n")
    sweep, half = [], []
    if args.keep:
        kept = json.loads(args.keep.read_text())
        ran = {(r["T"], r["B"], r["H"], r["dtype"]) for r in rows}
        rows = [r for r in kept["rows"] if (r["T"], r["B"], r["H"], r["dtype"]) not in ran] + rows
        order = {name: i for i, name in enumerate(DTYPES.split(","))}
        rows.sort(key=lambda r: (r["T"] * r["B"] * r["H"], r["T"], order.get(r["dtype"], 99)))
        sweep, half = kept.get("sweep", []), kept.get("half_sweep", [])
    if not (args.quick or args.no_sweep or half):
        half = half_sweep(timer)
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
        "half_sweep": half,
    }
    table = to_markdown(result)
    if not args.quick:  # the shape where ours leads cuDNN most, and the largest
        table += "\n" + profile() + "\n" + profile(64, 4096, 1024, torch.bfloat16)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        earlier = args.out / "lstm_layer.json"
        if earlier.exists() and "options" in (kept_file := json.loads(earlier.read_text())):
            result["options"] = kept_file["options"]  # lstm_options.py's rows, not run here
        earlier.write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "lstm_layer.md").write_text(table)
        (args.out / "lstm_layer.partial.json").unlink(missing_ok=True)  # the whole run is written
        if sweep:
            plot(result, args.out / "lstm_layer.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
