"""What one call of an operator costs the host, and where it goes (lesson: "What a call costs").

    python chapter5_extensions/benchmarks/call_cost.py            # CUDA tensors if there is a GPU, else CPU
    python chapter5_extensions/benchmarks/call_cost.py --quick    # fewer calls, seconds
    python chapter5_extensions/benchmarks/call_cost.py --out DIR  # also DIR/call_cost_<device>.{md,json}

A relu of 256 floats: the kernel itself takes a microsecond or two, so a loop of calls measures
what the host spends on each: Python, the dispatcher, autograd, the allocator and the launch.
The same relu is reached five ways (call_cost.cpp registers it; its kernel is ATen's own, called
directly, so that among these five only the way in differs), next to torch.relu and to the
package's relu, whose kernel is its own:

- torch.relu: PyTorch's generated binding, C++ from the argument parsing on;
- call_cost::relu_py through torch.ops, its autograd formula in Python (register_autograd);
- call_cost::relu_cpp_always through torch.ops, its autograd in C++ (torch::autograd::Function),
  which builds a graph node on every call;
- call_cost::relu_cpp, the same but a node only when an input requires grad (as custom_ops'
  csrc/autograd.cpp), and the same without the Python frame of OpOverload.__call__;
- the same relu_cpp called through a pybind11 function, without torch.ops' Python layer;
- custom_ops.relu, the package's public function, and torch.ops.custom_ops.relu.default, the op
  it calls (its own kernel, autograd in C++).

Each is timed with x not requiring grad and requiring it (then autograd records a node per call).
Time per call: a loop of calls, timed by CUDA events on a GPU (whose timeline the host sets, the
host being the slower side) or by the host clock on a CPU, over the calls; the median of many such
loops, the variants taking turns so that the host's drift reaches them all alike.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def build_call_cost():
    """call_cost.cpp as a module: the host compiler only, linked against torch's CUDA library
    when torch has one (for at::cuda::relu), cached in the course's build folder."""
    python_bin = Path(sys.executable).parent
    if (python_bin / "ninja").exists() and shutil.which("ninja") != str(python_bin / "ninja"):
        os.environ["PATH"] = f"{python_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    with_cuda = torch.version.cuda is not None
    v = sys.version_info
    root = Path(
        os.environ.get("TORCH_EXTENSIONS_DIR", HERE.parents[1] / "build" / "torch_extensions")
    )
    build_dir = root / f"torch{torch.__version__}-py{v.major}{v.minor}".replace("+", "_")
    build_dir = build_dir / "call_cost"
    build_dir.mkdir(parents=True, exist_ok=True)
    return load(
        name="call_cost",
        sources=[str(HERE / "call_cost.cpp")],
        extra_cflags=["-O3"] + (["-DWITH_CUDA"] if with_cuda else []),
        extra_ldflags=["-ltorch_cuda"] if with_cuda else [],
        build_directory=str(build_dir),
        with_cuda=False,  # no nvcc needed: the CUDA kernel is ATen's, in libtorch_cuda
    )


def register_python_autograd() -> None:
    """relu_py's autograd formula, as custom_ops registered its ops' before they moved to C++."""

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(grad, y, 0)

    torch.library.register_autograd("call_cost::relu_py", backward, setup_context=setup_context)


def loop_us(fn, calls: int, cuda: bool) -> float:
    """Microseconds per call of fn over a loop of `calls` calls."""
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3 / calls
    begin = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - begin) * 1e6 / calls


def per_call_us(fns: dict, calls: int, repeats: int, cuda: bool) -> dict:
    """The median of `repeats` loops per variant, the variants taken in turn in every repeat: the
    host's speed drifts over seconds, and taking turns spreads that drift over all of them."""
    for fn in fns.values():  # warm-up: first calls, caches, the allocator
        loop_us(fn, max(100, calls // 10), cuda)
    times: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(loop_us(fn, calls, cuda))
    return {name: statistics.median(t) for name, t in times.items()}


def cpu_name() -> str:
    """The CPU's model name (Linux), and the number of cores torch uses."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next(
            line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = "unknown CPU"
    return f"{model}, {torch.get_num_threads()} threads"


def measure(quick: bool) -> dict:
    import build_inplace

    build_inplace.build_inplace()
    import custom_ops

    module = build_call_cost()
    register_python_autograd()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    ops = torch.ops.call_cost
    variants = {
        "torch.relu": torch.relu,
        "torch.ops, autograd in Python": ops.relu_py.default,
        "torch.ops, autograd in C++, a graph node every call": ops.relu_cpp_always.default,
        "torch.ops, autograd in C++, a node only when needed": ops.relu_cpp.default,
        # OpOverload.__call__ is one line of Python around this C++ callable: calling it directly
        # (a private attribute, for this measurement only) shows what that frame costs.
        "the same without OpOverload.__call__": ops.relu_cpp.default._op,
        "pybind11 function, the same autograd": module.relu_cpp_direct,
        "custom_ops.relu (the package)": custom_ops.relu,
        "torch.ops.custom_ops.relu.default (the package's op)": torch.ops.custom_ops.relu.default,
    }
    calls, repeats = (200, 3) if quick else (1000, 41)
    rows = []
    for requires_grad in (False, True):
        x = torch.randn(256, device=device, requires_grad=requires_grad)
        expected = torch.relu(x)
        for fn in variants.values():
            torch.testing.assert_close(fn(x), expected)
        fns = {name: (lambda fn=fn, x=x: fn(x)) for name, fn in variants.items()}
        for name, us in per_call_us(fns, calls, repeats, cuda).items():
            rows.append({"case": name, "requires_grad": requires_grad, "us_per_call": us})
    return {
        "device": torch.cuda.get_device_name() if cuda else f"cpu ({cpu_name()})",
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "numel": 256,
        "rows": rows,
    }


def to_markdown(result: dict) -> str:
    lines = [
        f"{result['device']}; torch {result['torch']}; {result['date']}. relu of "
        f"{result['numel']} float32 in a host loop: µs per call (and as a multiple of torch.relu's).",
        "",
        "| way in | x.requires_grad=False | x.requires_grad=True |",
        "| --- | ---: | ---: |",
    ]
    cell = {(r["case"], r["requires_grad"]): r["us_per_call"] for r in result["rows"]}
    for case in dict.fromkeys(r["case"] for r in result["rows"]):
        cells = [
            f"{cell[case, g]:.2f} ({cell[case, g] / cell['torch.relu', g]:.2f}x)"
            for g in (False, True)
        ]
        lines.append(f"| {case} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and repeats")
    parser.add_argument("--out", type=Path, help="write call_cost_<device>.{md,json} here")
    args = parser.parse_args(argv)
    result = measure(args.quick)
    table = to_markdown(result)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        name = "call_cost_cpu" if result["device"].startswith("cpu") else "call_cost_cuda"
        (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / f"{name}.md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
