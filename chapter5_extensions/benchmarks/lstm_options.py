"""custom_ops.LSTM against cuDNN's nn.LSTM for what a drop-in must also do: two directions, a
projection (proj_size), and a packed batch of sequences of different lengths. Forward and backward,
back to back, the two taking turns; the same weights in both.

    python chapter5_extensions/benchmarks/lstm_options.py            # the table (a few minutes)
    python chapter5_extensions/benchmarks/lstm_options.py --quick    # small shapes, seconds
    python chapter5_extensions/benchmarks/lstm_options.py --out docs/perf/h100

With --out, the rows also go into that folder's lstm_layer.json (benchmark_lstm.py's results), under
"options", each row's "case" naming the variant: one file holds every measurement of the layer.

Lesson: chapter 5, Part 2, "Both directions, projections, packed batches".
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import sys
from pathlib import Path

import torch
from torch.nn.utils.rnn import pack_padded_sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # custom_ops, build_inplace
sys.path.insert(0, str(HERE))  # gpu_timer

# (name, steps, batch, hidden, nn.LSTM options, packed): input size = hidden. packed is False (a
# padded batch), "same" (lengths spread evenly from T/4 to T, 16 to 64: about 62% of a padded
# batch's steps are real; the same batch every call) or "new" (every call a batch of other lengths,
# uniform in T/4..T, as a training loop feeds: ours then never replays a step graph, which is
# recorded for lengths seen twice).
CASES = [
    ("one direction (the baseline)", 64, 64, 1024, dict(), False),
    ("bidirectional", 64, 64, 1024, dict(bidirectional=True), False),
    ("proj_size = H/4 = 256", 64, 64, 1024, dict(proj_size=256), False),
    ("packed, lengths 16..64", 64, 64, 1024, dict(), "same"),
    ("packed, new lengths each call", 64, 64, 1024, dict(), "new"),
    ("packed, bidirectional", 64, 64, 1024, dict(bidirectional=True), "same"),
    ("bidirectional, small batch", 128, 8, 256, dict(bidirectional=True), False),
    ("bidirectional, large batch", 64, 256, 1024, dict(bidirectional=True), False),
]
DTYPES = [torch.float32, torch.bfloat16]
DTYPE_NAMES = [str(d).removeprefix("torch.") for d in DTYPES]
QUICK = [
    (name, 8, 4, 32, options | ({"proj_size": 8} if "proj_size" in options else {}), packed)
    for name, _, _, _, options, packed in CASES
]
# Batches of new lengths cycled through: more than the 64 shapes a step-graph cache remembers, so
# that no batch is seen twice by it.
NEW_BATCHES = 128


def inputs(steps: int, batch: int, hidden: int, dtype, packed) -> list[tuple]:
    """The batches the timed calls take, in turn, each as (the leaf tensor whose gradient is asked
    for, the batch as the module takes it): the padded x, or the packed data (packing outside the
    timed calls)."""
    if not packed:
        x = torch.randn(steps, batch, hidden, device="cuda", dtype=dtype, requires_grad=True)
        return [(x, x)]
    if packed == "same":
        all_lengths = [torch.linspace(steps, max(1, steps // 4), batch).round().long()]
    else:
        g = torch.Generator().manual_seed(0)
        all_lengths = [
            torch.randint(max(1, steps // 4), steps + 1, (batch,), generator=g)
            for _ in range(NEW_BATCHES)
        ]
    batches = []
    for lengths in all_lengths:
        lengths = lengths.sort(descending=True).values
        x = torch.randn(int(lengths[0]), batch, hidden, device="cuda", dtype=dtype)
        batch_input = pack_padded_sequence(x, lengths)  # sorted, longest first
        batch_input.data.requires_grad_()
        batches.append((batch_input.data, batch_input))
    return batches


def fwd_bwd(model, batches):
    """One forward and backward a call, each call on the next of the batches."""
    params = list(model.parameters())
    turn = itertools.cycle(batches)

    def run():
        x, batch_input = next(turn)
        y, (h, c) = model(batch_input)
        y = y.data if isinstance(y, torch.nn.utils.rnn.PackedSequence) else y
        torch.autograd.grad((y.float().sum() + h.float().sum() + c.float().sum()), [x, *params])

    return run


def rows(timer, cases, dtypes) -> list[dict]:
    import custom_ops

    out = []
    for name, steps, batch, hidden, options, packed in cases:
        for dtype in dtypes:
            torch.manual_seed(0)
            cudnn = torch.nn.LSTM(hidden, hidden, **options).to("cuda", dtype)
            ours = custom_ops.LSTM(hidden, hidden, **options).to("cuda", dtype)
            ours.load_state_dict(cudnn.state_dict())
            batches = inputs(steps, batch, hidden, dtype, packed)
            fns = {"ours": fwd_bwd(ours, batches), "cuDNN": fwd_bwd(cudnn, batches)}
            for streams in (2, 1) if ours.bidirectional else ():  # each choice, forced
                forced = custom_ops.LSTM(hidden, hidden, **options).to("cuda", dtype)
                forced.load_state_dict(cudnn.state_dict())
                forced.concurrent_directions = streams == 2
                fns[f"{streams} streams"] = fwd_bwd(forced, batches)
            m = timer.measure_in_turns(fns, rounds=3, runs=10, loop=10)
            row = {
                "case": name,
                "T": steps,
                "B": batch,
                "H": hidden,
                "dtype": str(dtype).removeprefix("torch."),
                **{
                    f"{k}_{impl}": m[impl][k]
                    for impl in ("ours", "cuDNN")
                    for k in ("loop_ms", "gpu_ms")
                },
            }
            row["ratio"] = row["loop_ms_ours"] / row["loop_ms_cuDNN"]
            for streams in (2, 1) if ours.bidirectional else ():
                row[f"streams_{streams}_ms"] = m[f"{streams} streams"]["loop_ms"]
                row[f"streams_{streams}_gpu_ms"] = m[f"{streams} streams"]["gpu_ms"]
            out.append(row)
            print(
                f"  {name:30s} {row['dtype']:8s} ours {row['loop_ms_ours']:8.3f} ms  cuDNN "
                f"{row['loop_ms_cuDNN']:8.3f} ms  ratio {row['ratio']:.2f}",
                flush=True,
            )
    return out


def to_markdown(result: dict) -> str:
    lines = [
        f"# custom_ops.LSTM against cuDNN: directions, projections, packed batches "
        f"({result['device']})",
        "",
        f"`{result['command']}`, {result['date']}, torch {result['torch']}, cuDNN "
        f"{result['cudnn']}. One layer, input size = H, forward and backward (the gradients of x "
        "and every parameter), back to back: 10 calls in a row between CUDA events, the median "
        "of 5 such loops, per call; the implementations take turns 3 times and each keeps "
        "its median. GPU ms: one call with a cold L2 and the host's launches hidden. Ratio "
        "< 1: ours is faster. float32 runs with each library's default, TF32 for cuDNN's RNN. "
        "Ours picks one stream or two for a layer's two directions (concurrent_directions=None); "
        "the last two columns force each.",
        "",
        "| case | T, B, H | dtype | ours ms | cuDNN ms | ours / cuDNN | GPU ms ours / cuDNN | "
        "two streams: ms, GPU ms | one stream: ms, GPU ms |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["rows"]:
        streams = [
            f"{r[f'streams_{n}_ms']:.3f}, {r[f'streams_{n}_gpu_ms']:.3f}"
            if f"streams_{n}_ms" in r
            else ""
            for n in (2, 1)
        ]
        lines.append(
            f"| {r['case']} | {r['T']}, {r['B']}, {r['H']} | {r['dtype']} | "
            f"{r['loop_ms_ours']:.3f} | {r['loop_ms_cuDNN']:.3f} | {r['ratio']:.2f} | "
            f"{r['gpu_ms_ours']:.3f} / {r['gpu_ms_cuDNN']:.3f} | {streams[0]} | {streams[1]} |"
        )
    # The ratios alone, a row per case and a column per dtype: the lesson's table.
    lines += ["", "| case | T, B, H | ours / cuDNN, float32 | ours / cuDNN, bfloat16 |",
              "| --- | --- | ---: | ---: |"]  # fmt: skip
    ratios: dict = {}
    for r in result["rows"]:
        ratios.setdefault((r["case"], f"{r['T']}, {r['B']}, {r['H']}"), {})[r["dtype"]] = r["ratio"]
    for (case, sizes), by_dtype in ratios.items():
        cells = " | ".join(f"{by_dtype[d]:.2f}" if d in by_dtype else "" for d in DTYPE_NAMES)
        lines.append(f"| {case} | {sizes} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, seconds")
    parser.add_argument("--out", type=Path, help="write lstm_options.{md,json} here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("lstm_options.py needs a CUDA GPU: it times ours against cuDNN, which is CUDA only.")
        return 2
    import build_inplace

    build_inplace.build_inplace()
    from gpu_timer import Timer

    result = {
        "device": torch.cuda.get_device_name(),
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "command": "python chapter5_extensions/benchmarks/lstm_options.py"
        + (" --quick" if args.quick else ""),
        "rows": rows(Timer(), QUICK if args.quick else CASES, DTYPES),
    }
    markdown = to_markdown(result)
    print(markdown)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "lstm_options.md").write_text(markdown)
        (args.out / "lstm_options.json").write_text(json.dumps(result, indent=1) + "\n")
        layer = args.out / "lstm_layer.json"
        if layer.exists() and not args.quick:
            merged = json.loads(layer.read_text()) | {"options": result}
            layer.write_text(json.dumps(merged, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
