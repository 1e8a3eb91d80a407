"""Chapter 5's measurements on a CUDA GPU: every custom_ops operator against eager PyTorch,
torch.compile and the memory-bandwidth floor; conv_rnn's one-launch kernel against the same
recurrence as a Python loop of PyTorch ops, forward alone and forward + backward.

    python chapter5_extensions/benchmarks/benchmark.py                       # a few minutes on an H100
    python chapter5_extensions/benchmarks/benchmark.py --quick --no-compile  # seconds
    python chapter5_extensions/benchmarks/benchmark.py --out DIR             # DIR/chapter5_cuda.{md,json,png}
    python chapter5_extensions/benchmarks/benchmark.py --plot-from DIR/chapter5_cuda.json  # the PNG again, no GPU

Timed with gpu_timer.py, the course's one GPU timer. GPU ms: median of 30 CUDA-event timings,
each with a cold L2, after the GPU slept long enough for the host to queue the whole call (4 times
the host's time, at least 2 ms), so that the events time the GPU's work, not the host's; runs
where the host was slower anyway are counted. The bandwidth rows take three such medians per case,
the cases of one size taking turns, and keep the middle one: the GPU's clock drifts by a percent
or so over seconds, and cases timed one after the other would inherit that drift as a difference
between them.
Back to back: CUDA events around 10 calls in a row, per call, median of 5: what a loop gets when
the host is the slower side. Floor: the bytes the op must move at least (read inputs once, write
outputs once) at the bandwidth a copy_ of the same tensor reaches.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the chapter folder: build_inplace, custom_ops

import plot_style  # noqa: E402
from gpu_timer import Timer  # noqa: E402


def compiled(fn, use_compile: bool):
    if not use_compile:
        return None
    torch._dynamo.reset()  # a fresh graph per size: a static shape, as a model in training has
    return torch.compile(fn, dynamic=False)


def bandwidth_rows(timer: Timer, exponents, use_compile: bool) -> list[dict]:
    import custom_ops
    import triton_fused_bias_relu  # the same op in Triton (Part 3: The same op in Triton)

    rows = []
    for e in exponents:
        n = 2**e
        cols = min(n, 1024)
        x = torch.randn(n // cols, cols, device="cuda")
        bias = torch.randn(cols, device="cuda")
        out = torch.empty_like(x)
        nbytes = x.numel() * x.element_size()

        def eager_fused(x, b):
            return torch.relu(x * 0.5 + b)

        fused_c = compiled(eager_fused, use_compile)
        x_grad = x.detach().clone().requires_grad_()
        bias_grad = bias.detach().clone().requires_grad_()
        grad_y = torch.randn_like(x)

        def fwd_bwd(forward):
            return lambda: torch.autograd.grad(
                forward(x_grad, bias_grad), (x_grad, bias_grad), grad_y
            )

        fused_grad_c = compiled(eager_fused, use_compile)
        relu_c = compiled(torch.relu, use_compile)
        sum_c = compiled(torch.sum, use_compile)
        cases = {
            "fused_bias_relu": (
                2 * nbytes,  # read x, write y (the bias is noise)
                {
                    "eager PyTorch": lambda: eager_fused(x, bias),
                    "torch.compile": fused_c and (lambda: fused_c(x, bias)),
                    "custom_ops": lambda: custom_ops.fused_bias_relu(x, bias, 0.5),
                    "triton": lambda: triton_fused_bias_relu.fused_bias_relu(x, bias, 0.5),
                },
            ),
            "fused_bias_relu fwd+bwd": (
                5 * nbytes,  # forward: read x, write y; backward: read grad_y and y, write grad_x
                {
                    "eager PyTorch": fwd_bwd(eager_fused),
                    "torch.compile": fused_grad_c and fwd_bwd(fused_grad_c),
                    "custom_ops": fwd_bwd(lambda x, b: custom_ops.fused_bias_relu(x, b, 0.5)),
                    "triton": fwd_bwd(
                        lambda x, b: triton_fused_bias_relu.fused_bias_relu(x, b, 0.5)
                    ),
                },
            ),
            "relu": (
                2 * nbytes,
                {
                    "eager PyTorch": lambda: torch.relu(x),
                    "torch.compile": relu_c and (lambda: relu_c(x)),
                    "custom_ops": lambda: custom_ops.relu(x),
                },
            ),
            "reduce_sum": (
                nbytes,  # read x once
                {
                    "torch.sum": lambda: torch.sum(x),
                    "torch.compile": sum_c and (lambda: sum_c(x)),
                    "custom_ops": lambda: custom_ops.reduce_sum(x),
                },
            ),
        }
        fns = {("copy_", "floor"): lambda: out.copy_(x)}
        for op, (_, by_case) in cases.items():
            fns.update({(op, case): fn for case, fn in by_case.items() if fn is not None})
        measured = timer.measure_in_turns(fns)
        copy = measured.pop(("copy_", "floor"))
        bytes_per_ms = 2 * nbytes / copy["gpu_ms"]
        rows.append({"op": "copy_", "case": "floor", "numel": n, "bytes": 2 * nbytes, **copy})
        for (op, case), m in measured.items():
            moved = cases[op][0]
            rows.append(
                {
                    "op": op,
                    "case": case,
                    "numel": n,
                    "bytes": moved,
                    **m,
                    "floor_ms": moved / bytes_per_ms,
                }
            )
    return rows


def reference_conv_rnn(x, kernel, hidden):
    h, outputs = hidden, []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] + F.conv1d(h[:, None], kernel[None, None], padding=1)[:, 0])
        outputs.append(h)
    return torch.stack(outputs, dim=1)


def sequence_rows(timer: Timer, quick: bool, use_compile: bool) -> list[dict]:
    import custom_ops

    rows = []
    time_steps, features = (16, 256) if quick else (64, 256)
    for batch in [8] if quick else [8, 512]:
        x = torch.randn(batch, time_steps, features, device="cuda")
        kernel = torch.randn(3, device="cuda") / 3
        hidden = torch.randn(batch, features, device="cuda")
        cases = {
            "Python loop, eager": lambda: reference_conv_rnn(x, kernel, hidden),
            "custom_ops (one kernel)": lambda: custom_ops.conv_rnn(x, kernel, hidden),
        }
        loop_compiled = compiled(reference_conv_rnn, use_compile)
        if loop_compiled is not None:
            cases["Python loop, torch.compile"] = lambda: loop_compiled(x, kernel, hidden)
        for case, fn in cases.items():
            rows.append(
                {"op": "conv_rnn", "shape": [batch, time_steps, features], "case": case}
                | timer.measure(fn)
            )

    # Forward and backward, as training runs it: the loop's backward is autograd's, a few kernels
    # per step again; ours is conv_rnn_backward, the loop in reverse in one launch.
    batch, time_steps, features = (8, 16, 256) if quick else (8, 256, 512)
    x = torch.randn(batch, time_steps, features, device="cuda", requires_grad=True)
    kernel = (torch.randn(3, device="cuda") / 3).requires_grad_()
    hidden = torch.randn(batch, features, device="cuda", requires_grad=True)
    grad_out = torch.randn(batch, time_steps, features, device="cuda")

    def fwd_bwd(forward):
        inputs = (x, kernel, hidden)
        return lambda: torch.autograd.grad(forward(*inputs), inputs, grad_out)

    cases = {
        "Python loop, eager": fwd_bwd(reference_conv_rnn),
        "custom_ops (one kernel each way)": fwd_bwd(custom_ops.conv_rnn),
    }
    for case, fn in cases.items():
        rows.append(
            {"op": "conv_rnn fwd+bwd", "shape": [batch, time_steps, features], "case": case}
            | timer.measure(fn)
        )

    for batch in [8] if quick else [8, 1024]:
        torch.manual_seed(0)
        reference = torch.nn.LSTMCell(512, 512, device="cuda")
        ours = custom_ops.LSTMCell(512, 512, device="cuda")
        ours.load_state_dict(reference.state_dict())
        x = torch.randn(batch, 512, device="cuda", requires_grad=True)
        state = (torch.randn(batch, 512, device="cuda"), torch.randn(batch, 512, device="cuda"))

        cells = {"torch.nn.LSTMCell": reference, "custom_ops.LSTMCell": ours}
        for case, cell in cells.items():

            def fn(cell=cell):
                h, c = cell(x, state)
                return torch.autograd.grad(h.sum() + c.sum(), (x, *cell.parameters()))

            rows.append(
                {"op": "lstm_cell fwd+bwd", "shape": [batch, 512, 512], "case": case}
                | timer.measure(fn)
            )
    return rows


def to_markdown(result: dict) -> str:
    lines = [
        f"{result['gpu']}; torch {result['torch']}, CUDA {result['cuda']}; {result['date']}.",
        "GPU time: median of CUDA-event timings, cold L2, host hidden. GB/s: the bytes the op",
        "must move / GPU time. Floor: those bytes at copy_'s bandwidth for the same tensor.",
        "",
        "| op | elements | case | GPU ms | GB/s | of floor |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for r in result["bandwidth"]:
        if r["op"] == "copy_":
            continue
        lines.append(
            f"| {r['op']} | 2^{r['numel'].bit_length() - 1} | {r['case']} | {r['gpu_ms']:.4f} "
            f"| {r['bytes'] / r['gpu_ms'] / 1e6:,.0f} | {r['floor_ms'] / r['gpu_ms']:.0%} |"
        )
    late = [
        r
        for rows in (result["bandwidth"], result["sequences"])
        for r in rows
        if r.get("runs_host_not_hidden")
    ]
    if late:
        lines += ["", "Rows where the host was slower than the GPU's sleep in some runs:"]
        lines += [
            f"- {r['op']} {r.get('numel') or r.get('shape')} {r['case']}: "
            f"{r['runs_host_not_hidden']} of {r['runs']}"
            for r in late
        ]
    lines += [
        "",
        "| op | shape | case | GPU ms | host ms | back to back ms |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in result["sequences"]:
        shape = " x ".join(str(s) for s in r["shape"])
        lines.append(
            f"| {r['op']} | {shape} | {r['case']} | {r['gpu_ms']:.3f} | {r['host_ms']:.3f} "
            f"| {r['loop_ms']:.3f} |"
        )
    return "\n".join(lines) + "\n"


PYTORCH_OWN = ("eager PyTorch", "torch.sum")


def plot(result: dict, path: Path) -> Figure:
    """GB/s against size of fused_bias_relu and reduce_sum, each case beside the floor: copy_'s
    bandwidth, dashed."""
    fig = plot_style.figure(height=5)
    axes = fig.subplots(1, 2, sharey=True)
    rows = result["bandwidth"]
    copy = {r["numel"]: r["bytes"] / r["gpu_ms"] / 1e6 for r in rows if r["op"] == "copy_"}
    for ax, op in zip(axes, ["fused_bias_relu", "reduce_sum"], strict=True):
        ax.plot(list(copy), list(copy.values()), label="copy_ (floor)", **plot_style.REFERENCE)
        for case in dict.fromkeys(r["case"] for r in rows if r["op"] == op):
            points = [
                (r["numel"], r["bytes"] / r["gpu_ms"] / 1e6)
                for r in rows
                if r["op"] == op and r["case"] == case
            ]
            # eager PyTorch (left) and torch.sum (right): PyTorch's own op, one colour and one
            # legend entry for both, as torch.compile and custom_ops have.
            label = "PyTorch's op (eager, torch.sum)" if case in PYTORCH_OWN else case
            ax.plot(*zip(*points, strict=True), label=label)
        plot_style.log2_axis(ax, "x", [2**e for e in range(10, 29, 6)])
        ax.set_xlabel("elements (float32)")
        ax.set_title(op, loc="left")
    plot_style.zero_based_y(axes[0], "GB/s")
    plot_style.legend_below(fig, ncols=2)
    fig.suptitle(f"custom_ops on {result['gpu']}, torch {result['torch']}, {result['date']}")
    plot_style.save(fig, path)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--out", type=Path, help="write chapter5_cuda.{md,json,png} here")
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
    import build_inplace

    build_inplace.build_inplace()
    torch.manual_seed(0)
    timer = Timer()
    exponents = [10, 16] if args.quick else [10, 14, 16, 18, 20, 22, 24, 26, 28]
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.date.today().isoformat(),
        "bandwidth": bandwidth_rows(timer, exponents, not args.no_compile),
        "sequences": sequence_rows(timer, args.quick, not args.no_compile),
    }
    table = to_markdown(result)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter5_cuda.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "chapter5_cuda.md").write_text(table)
        plot(result, args.out / "chapter5_cuda.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
