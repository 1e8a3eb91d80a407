"""The tensor-core persistent forward (csrc/cuda/lstm_persistent_tc.cu) against cuDNN's float16
persistent kernel and our other two paths: inference forward of one LSTM layer (eval(),
torch.no_grad()), I = H, in float16 and bfloat16 (further/lstm_layer_bounds.md).

    python chapter5_extensions/benchmarks/lstm_tc_forward.py              # about two minutes, H100
    python chapter5_extensions/benchmarks/lstm_tc_forward.py --out DIR    # DIR/lstm_tc_forward.{md,json}
    python chapter5_extensions/benchmarks/lstm_tc_forward.py --markdown-from DIR/lstm_tc_forward.json

The five implementations take turns (gpu_timer.py's measure_in_turns, three rounds, the same
number of calls in a row), at the issue's shapes and at T = 256 over B = 1..64, H = 256..1024.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from benchmark_lstm import implementations, timed_in_turns, with_paths  # noqa: E402

from gpu_timer import Timer  # noqa: E402

# The lesson's float16 shapes (T, B, H), then T = 256 at every batch the kernel takes.
CASES = [(64, 8, 512), (128, 32, 256), (64, 64, 1024), (256, 64, 1024)]
SWEEP = [(256, b, h) for h in (256, 512, 768, 1024) for b in (1, 4, 8, 16, 32, 64)]
PATHS = {
    "ours, clusters": dict(tensor_cores="always", clusters="always"),
    "ours, tensor cores": dict(tensor_cores="always", clusters="never"),
    "ours, CUDA cores": dict(persistent="always", tensor_cores="never"),
    "ours, step loop": dict(persistent="never", tensor_cores="never"),
}


def rows_at(timer: Timer, steps: int, batch: int, hidden: int, dtype) -> list[dict]:
    impls = implementations(hidden, dtype, use_compile=False)
    ours, call = impls["ours"]
    cudnn, cudnn_call = impls["cuDNN nn.LSTM"]
    ours.eval(), cudnn.eval()
    x = torch.randn(steps, batch, hidden, device="cuda", dtype=dtype)

    def inference(fn):
        def run():
            with torch.no_grad():
                fn(x)

        return run

    fns = {"cuDNN nn.LSTM": inference(cudnn_call)}
    fns |= {name: inference(with_paths(call, **choice)) for name, choice in PATHS.items()}
    rows = []
    for name, m in timed_in_turns(timer, fns).items():
        rows.append(
            {
                "T": steps,
                "B": batch,
                "H": hidden,
                "dtype": str(dtype).removeprefix("torch."),
                "impl": name,
                "gpu_ms": m["gpu_ms"],
                "loop_ms": m["loop_ms"],
                "us_per_step": 1000 * m["gpu_ms"] / steps,
            }
        )
    by = {r["impl"]: r for r in rows}
    print(
        f"  {rows[0]['dtype']:8s} T={steps:4d} B={batch:3d} H={hidden:5d}  GPU ms: "
        + ", ".join(f"{n} {r['gpu_ms']:.3f}" for n, r in by.items()),
        flush=True,
    )
    return rows


def to_markdown(machine: str, rows: list[dict]) -> str:
    """The table: back to back first (what a loop of calls pays), GPU time beside it."""
    # The implementations this run measured (a run before the cluster variant has four).
    present = {r["impl"] for r in rows}
    order = [n for n in ["cuDNN nn.LSTM", *PATHS] if n in present]
    short = [n.removeprefix("ours, ").removesuffix(" nn.LSTM") for n in order]
    # Ours on tensor cores over cuDNN, each variant: back to back, then GPU.
    ratios = [n for n in ("ours, clusters", "ours, tensor cores") if n in present]
    ratio_heads = [
        f"{n.removeprefix('ours, ')} / cuDNN, {k}" for n in ratios for k in ("back to back", "GPU")
    ]
    heads = (
        [f"back to back ms: {short[0]}", *short[1:], f"GPU ms: {short[0]}", *short[1:]]
        + ratio_heads
        + [f"{n.removeprefix('ours, ')} µs/step (GPU)" for n in ratios]
    )
    lines = [
        f"{machine} Written by `chapter5_extensions/benchmarks/lstm_tc_forward.py`.",
        "",
        "Inference forward (eval(), no_grad()), one layer, I = H. Back to back: calls in a row, "
        "per call; GPU ms: median of CUDA-event timings, cold L2, host hidden. The implementations "
        'take turns, with the same number of calls in a row. "clusters" is the tensor-core '
        "forward as one thread-block cluster (H <= 512, B <= 32; where it cannot run, the grid "
        'variant runs in its place); "tensor cores" the grid variant. Ratios: ours over cuDNN '
        "(below 1: ours is faster).",
        "",
        "| dtype | T, B, H | " + " | ".join(heads) + " |",
        "| --- | --- |" + " ---: |" * len(heads),
    ]
    keys = sorted({(r["dtype"], r["T"], r["B"], r["H"]) for r in rows},
                  key=lambda k: (k[0] != "float16", k[0], k[3], k[1], k[2]))  # fmt: skip
    for dtype, steps, batch, hidden in keys:
        by = {
            r["impl"]: r
            for r in rows
            if (r["dtype"], r["T"], r["B"], r["H"]) == (dtype, steps, batch, hidden)
        }
        cudnn = by["cuDNN nn.LSTM"]
        cells = [f"{by[n]['loop_ms']:.3f}" for n in order] + [
            f"{by[n]['gpu_ms']:.3f}" for n in order
        ]
        for n in ratios:
            cells += [
                f"{by[n]['loop_ms'] / cudnn['loop_ms']:.2f}",
                f"{by[n]['gpu_ms'] / cudnn['gpu_ms']:.2f}",
            ]
        cells += [f"{by[n]['us_per_step']:.2f}" for n in ratios]
        lines.append(f"| {dtype} | {steps}, {batch}, {hidden} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write(machine: str, rows: list[dict], out: Path | None) -> None:
    text = to_markdown(machine, rows)
    print(text)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "lstm_tc_forward.md").write_text(text)
        run = {"machine": machine, "rows": rows}
        (out / "lstm_tc_forward.json").write_text(json.dumps(run, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write lstm_tc_forward.{md,json} here")
    parser.add_argument("--quick", action="store_true", help="two shapes, float16 only")
    parser.add_argument(
        "--markdown-from", type=Path, help="write the .md again from a run's .json (no GPU)"
    )
    args = parser.parse_args(argv)
    if args.markdown_from:
        run = json.loads(args.markdown_from.read_text())
        write(run["machine"], run["rows"], args.markdown_from.parent)
        return 0
    if not torch.cuda.is_available():
        print("lstm_tc_forward.py needs a CUDA GPU (torch.cuda.is_available() is False)")
        return 1
    import build_inplace

    build_inplace.build_inplace()
    timer = Timer()
    rows: list[dict] = []
    shapes = [(16, 8, 256), (16, 33, 512)] if args.quick else CASES + SWEEP
    for dtype in (torch.float16,) if args.quick else (torch.float16, torch.bfloat16):
        for steps, batch, hidden in shapes:
            if (
                dtype == torch.bfloat16
                and hidden not in (512, 1024)
                and (steps, batch, hidden) not in CASES
            ):
                continue  # bfloat16: the lesson's shapes and two widths of the sweep
            rows += rows_at(timer, steps, batch, hidden, dtype)
    machine = (
        f"{torch.cuda.get_device_name()}; torch {torch.__version__}, cuDNN "
        f"{torch.backends.cudnn.version()}; {datetime.date.today().isoformat()}."
    )
    write(machine, rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
