"""The CuTe DSL op's tile shape (cute_fused_bias_relu.py): how many rows of one 16-byte vector
each of its 128 threads copies, and how the threads are laid out, swept at 2^28 elements (float32
and bfloat16), each variant timed in turns with copy_ and the NVRTC op; then the op as committed
at 2^20, 2^24 and 2^28. Lesson: chapter 5, further/cute_dsl.md.

    python chapter5_extensions/kernel_languages/tune_cute_tiles.py --out DIR    # a GPU, ~1 minute

Each variant is the committed kernel compiled with other values of the module's THREADS and
ROWS_PER_THREAD. Timed with gpu_timer.py (median GPU ms of 30 calls, cold L2, three rounds).
"""

import argparse
import datetime
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "benchmarks"))  # gpu_timer

COLS = 1024
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# (rows of one vector a thread copies, threads as (rows, columns)).
VARIANTS = [(1, (4, 32)), (2, (4, 32)), (4, (4, 32)), (8, (4, 32)), (2, (8, 32)), (4, (8, 32))]


def compiled_variant(module, rows: int, threads: tuple[int, int], x, bias):
    """The compiled function of cute_fused_bias_relu with this tile shape, for x's dtype and GPU.
    The module's constants are read when the kernel is traced: set them, let the op compile, take
    what it compiled and leave the caches empty for the next variant. Timed called directly, so
    that every variant can take turns (the op holds one compile per dtype)."""
    module.ROWS_PER_THREAD, module.THREADS = rows, threads
    module._COMPILED.clear()
    module._ON_DEVICE.clear()
    module.fused_bias_relu(x, bias, 0.5)
    (kernel,) = module._ON_DEVICE.values()
    module._COMPILED.clear()
    module._ON_DEVICE.clear()
    return kernel


def cute_dsl_version() -> str:
    """The installed nvidia-cutlass-dsl's version, where pip's record of it is on the path."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-cutlass-dsl")
    except PackageNotFoundError:
        return "(version unknown: no package record on the path)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write kernel_languages_cute_tiles.md here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("tune_cute_tiles.py needs a CUDA GPU: CuTe DSL compiles only with a driver.")
        return 2
    import cuda.bindings.driver as cuda
    import cute_fused_bias_relu as cute_op
    import cutlass
    import nvrtc_fused_bias_relu as nvrtc

    from gpu_timer import Timer

    committed = (cute_op.ROWS_PER_THREAD, tuple(cute_op.THREADS))
    timer = Timer()
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    lines = [
        "# The CuTe DSL op's tile shape",
        "",
        f"Written by `chapter5_extensions/kernel_languages/tune_cute_tiles.py --out`: "
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CuTe DSL "
        f"{cute_dsl_version()}, "
        f"{datetime.date.today().isoformat()}. GPU ms (median of 30, cold L2, in turns, middle of "
        "3 rounds) and the fraction of copy_'s time. A variant is (rows of one 16-byte vector "
        "each thread copies) x (threads as rows, columns); the op as committed is "
        f"{committed[0]}x{committed[1]}.",
    ]

    def timed(x, bias, kernels: dict) -> dict:
        out = torch.empty_like(x)
        vec = 16 // x.element_size()
        views = tuple(cute_op.cute_tensor(t, vec) for t in (x, bias, out))
        calls = {
            "copy_": lambda: out.copy_(x),
            "NVRTC": lambda: nvrtc.fused_bias_relu(x, bias, 0.5),
        }
        for name, kernel in kernels.items():
            calls[name] = lambda k=kernel: k(*views, cutlass.Float64(0.5), stream)
            calls[name]()
            expected = torch.relu(x.float() * 0.5 + bias.float()).to(x.dtype)
            torch.testing.assert_close(out, expected, rtol=1.6e-2, atol=1.6e-2)
        measured = timer.measure_in_turns(calls, loop=0)
        floor = measured["copy_"]["gpu_ms"]
        return {k: f"{v['gpu_ms']:.4f} ({floor / v['gpu_ms']:.1%})" for k, v in measured.items()}

    lines += ["", "## 2^28 elements, every variant", ""]
    for dtype_name, dtype in DTYPES.items():
        x = torch.randn(2**28 // COLS, COLS, device="cuda", dtype=dtype)
        bias = torch.randn(COLS, device="cuda", dtype=dtype)
        kernels = {f"{r}x{t}": compiled_variant(cute_op, r, t, x, bias) for r, t in VARIANTS}
        cells = timed(x, bias, kernels)
        if dtype_name == "float32":
            lines += ["| dtype | " + " | ".join(cells) + " |", "| --- |" + " ---: |" * len(cells)]
        lines.append(f"| {dtype_name} | " + " | ".join(cells.values()) + " |")
    lines += [
        "",
        "## The op as committed, by size",
        "",
        "| dtype | elements | copy_ | NVRTC | CuTe DSL |",
    ]
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for dtype_name, dtype in DTYPES.items():
        for e in (20, 24, 28):
            x = torch.randn(2**e // COLS, COLS, device="cuda", dtype=dtype)
            bias = torch.randn(COLS, device="cuda", dtype=dtype)
            kernel = compiled_variant(cute_op, *committed, x, bias)
            cells = timed(x, bias, {"CuTe DSL": kernel})
            lines.append(f"| {dtype_name} | 2^{e} | " + " | ".join(cells.values()) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kernel_languages_cute_tiles.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
