"""(B, T, F) @ (F, H) on a CUDA GPU, forward and forward + backward, for a contiguous x and for x
as a transposed view (time-major data read batch-major): is torch.matmul slow for ND @ 2D?

    python chapter2_tensor_api/benchmark_nd_matmul.py            # ~40 s on an H100
    python chapter2_tensor_api/benchmark_nd_matmul.py --quick    # seconds: tiny shapes
    python chapter2_tensor_api/benchmark_nd_matmul.py --out docs/perf/h100   # chapter2_nd_matmul.{json,md}

Lesson: chapter 2, "(B, T, F) @ (F, H): what torch.matmul does", whose CPU table this extends: its
first three formulations, and its fourth (a non-contiguous x) as a second layout of every one,
plus F.linear, what nn.Linear calls. Timed with gpu_timer.py, the course's one GPU timer.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from gpu_timer import Timer

# name -> f(x, w) for x (B, T, F) and w (F, H). reshape is the CPU table's view where x allows a
# view; for the transposed x a view is impossible and reshape copies.
FORMULATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "torch.matmul(x, w)": torch.matmul,
    "x.reshape(B*T, F) @ w, view back": lambda x, w: (x.reshape(-1, x.shape[-1]) @ w).view(
        *x.shape[:-1], w.shape[-1]
    ),
    "torch.bmm(x, w.expand(B, F, H))": lambda x, w: torch.bmm(x, w.expand(x.shape[0], *w.shape)),
    "F.linear(x, w.t())": lambda x, w: F.linear(x, w.t()),
}
LAYOUTS = ["contiguous", "transposed view"]
# Tolerances against torch.matmul on a contiguous copy of x: other GEMM kernels add in other orders.
TOLERANCES = {torch.float32: dict(rtol=1e-4, atol=1e-3), torch.bfloat16: dict(rtol=2e-2, atol=0.25)}


def make_inputs(shape: tuple[int, int, int, int], dtype: torch.dtype, layout: str):
    """Leaves x_leaf and w (requires_grad) and a function giving x (B, T, F) from x_leaf: x_leaf
    itself, or a (T, B, F) tensor transposed, whose reshape to (B*T, F) must copy."""
    B, T, Fin, H = shape
    w = torch.randn(Fin, H, device="cuda", dtype=dtype, requires_grad=True)
    if layout == "contiguous":
        x_leaf = torch.randn(B, T, Fin, device="cuda", dtype=dtype, requires_grad=True)
        return x_leaf, w, lambda: x_leaf
    x_leaf = torch.randn(T, B, Fin, device="cuda", dtype=dtype, requires_grad=True)
    return x_leaf, w, lambda: x_leaf.transpose(0, 1)


def measure(timer: Timer, shape, dtype: torch.dtype) -> list[dict]:
    """Every formulation and layout, forward and forward + backward, taking turns."""
    B, T, Fin, H = shape
    cases = {}
    for layout in LAYOUTS:
        x_leaf, w, get_x = make_inputs(shape, dtype, layout)
        grad_out = torch.randn(B, T, H, device="cuda", dtype=dtype)
        with torch.no_grad():
            expected = torch.matmul(get_x().contiguous(), w)
        for name, f in FORMULATIONS.items():
            with torch.no_grad():
                torch.testing.assert_close(f(get_x(), w), expected, **TOLERANCES[dtype])

            def forward(f=f, get_x=get_x, w=w):
                with torch.no_grad():
                    return f(get_x(), w)

            def forward_backward(f=f, get_x=get_x, w=w, x_leaf=x_leaf, grad_out=grad_out):
                # autograd.grad, not .backward(): no .grad accumulating from run to run.
                return torch.autograd.grad(f(get_x(), w), (x_leaf, w), grad_out)

            cases[(name, layout, "forward")] = forward
            cases[(name, layout, "forward+backward")] = forward_backward
    times = timer.measure_in_turns(cases, rounds=3, loop=0)
    flops = 2 * B * T * Fin * H  # forward; the backward is two GEMMs of the same size
    rows = []
    for (name, layout, direction), t in times.items():
        total = flops * (3 if direction == "forward+backward" else 1)
        rows.append(
            {
                "shape": f"({B},{T},{Fin}) @ ({Fin},{H})",
                "dtype": str(dtype).removeprefix("torch."),
                "case": name,
                "layout": layout,
                "direction": direction,
                "us": t["gpu_ms"] * 1e3,
                "TFLOP/s": total / t["gpu_ms"] / 1e9,
            }
        )
    return rows


def to_markdown(result: dict) -> str:
    lines = [
        f"{result['gpu']}; torch {result['torch']}, CUDA {result['cuda']}; {result['date']}.",
        "Median of CUDA-event timings with a cold L2, the cases taking turns (3 rounds of 30); "
        f"TF32 for float32 matmuls: {result['tf32']}.",
        "x: contiguous (B, T, F), or a (T, B, F) tensor transposed to (B, T, F) (transposed view).",
        "",
    ]
    groups = sorted({(r["dtype"], r["shape"]) for r in result["rows"]}, reverse=True)
    for dtype, shape in groups:
        rows = [r for r in result["rows"] if (r["dtype"], r["shape"]) == (dtype, shape)]
        base = {
            d: next(
                r["us"]
                for r in rows
                if r["case"] == "torch.matmul(x, w)"
                and r["layout"] == "contiguous"
                and r["direction"] == d
            )
            for d in ("forward", "forward+backward")
        }
        lines += [
            f"{shape}, {dtype}; time relative to torch.matmul on the contiguous x:",
            "",
            "| case | x | forward µs | TFLOP/s | relative | fwd+bwd µs | TFLOP/s | relative |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for layout in LAYOUTS:
            for name in FORMULATIONS:
                cells = [f"`{name}`", layout]
                for d in ("forward", "forward+backward"):
                    r = next(
                        r
                        for r in rows
                        if (r["case"], r["layout"], r["direction"]) == (name, layout, d)
                    )
                    cells += [f"{r['us']:,.1f}", f"{r['TFLOP/s']:.1f}", f"{r['us'] / base[d]:.2f}x"]
                lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes, float32 only")
    parser.add_argument("--out", type=Path, help="write chapter2_nd_matmul.{json,md} here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmark_nd_matmul.py needs a CUDA GPU (torch.cuda.is_available() is False);")
        print("nothing to measure here. benchmark.py measures the same four ways on the CPU.")
        return 0
    torch.manual_seed(0)
    # The CPU table's shape, and one large enough that the GEMM, not the launch, is the time.
    shapes = [(4, 8, 16, 32)] if args.quick else [(32, 128, 512, 512), (64, 512, 1024, 1024)]
    dtypes = [torch.float32] if args.quick else [torch.float32, torch.bfloat16]
    timer = Timer()
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.date.today().isoformat(),
        "tf32": torch.backends.cuda.matmul.allow_tf32,
        "rows": [row for s in shapes for d in dtypes for row in measure(timer, s, d)],
    }
    table = to_markdown(result)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter2_nd_matmul.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "chapter2_nd_matmul.md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
