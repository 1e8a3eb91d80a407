"""Iterate on a kernel in a second: NVRTC compiles CUDA C++ inside the Python process
(torch.cuda._compile_kernel), so an edit is a recompile of one string, not an nvcc run over
torch's headers and a C++ build. Prints the compile times; on a GPU also runs the kernel and
checks it against PyTorch; --load-inline times the same kernel built as an extension (nvcc).

    python chapter3_cuda_kernels/iterate_nvrtc.py                # compile times (a GPU: and a check)
    python chapter3_cuda_kernels/iterate_nvrtc.py --load-inline  # and load_inline, cold and edited
    python chapter3_cuda_kernels/iterate_nvrtc.py --out DIR      # also iterate_nvrtc.md and .json

Lesson: chapter 3, further/iterate_in_a_notebook.md; the notebook's last section calls these
functions. Without a GPU NVRTC still compiles (for sm_90, the H100), so the times are real.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

# build_utils first: it sets CUDA_HOME, which torch.utils.cpp_extension reads on import.
import build_utils

# isort: split
import torch

# The whole program NVRTC sees: no torch header, which is why it compiles in a fraction of a
# second. Shaped like chapter 3's v2 (a grid-stride loop), float only. Scalars are int and double:
# _compile_kernel passes a Python int as a C int, a float as a double. The index is 64-bit: near
# 2^31 elements an int would wrap past the end when the loop adds the grid's size.
KERNEL = r"""
__global__ void fused_bias_relu(const float* __restrict__ x, const float* __restrict__ bias,
                                float* __restrict__ y, int numel, int cols, double scale) {
  const float s = static_cast<float>(scale);
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += stride) {
    const float v = x[i] * s + bias[i % cols];
    y[i] = v < 0.f ? 0.f : v;  // NaN stays NaN, as in torch.relu
  }
}
"""
NAME = "fused_bias_relu"


def compile_kernel(source: str = KERNEL, options: list[str] | None = None):
    """NVRTC, in process. On a GPU: the kernel, loaded on the current GPU and callable as
    kernel(grid=(gx, 1, 1), block=(bx, 1, 1), args=[tensors and numbers]). Without one: the
    compiled CUBIN's bytes, for sm_90 (torch's private helper: nothing to load it into).
    `options` are NVRTC's, nvcc's spelling: ["--fmad=false"], say."""
    if torch.cuda.is_available():
        return torch.cuda._compile_kernel(source, NAME, nvcc_options=options)
    from torch.cuda._utils import _nvrtc_compile

    cubin, _ = _nvrtc_compile(source, NAME, "90", nvcc_options=options)
    return cubin


def fused_bias_relu(kernel, x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """y = relu(x * scale + bias) with the NVRTC kernel, on the current stream: x (rows, cols)
    float32 on the GPU the kernel was loaded on (the current one), any strides; bias (cols,).
    torch checks only that each tensor is on a GPU (or pinned): the rest is checked here."""
    torch._check(
        x.is_cuda and x.dtype == torch.float32 and x.dim() == 2,
        lambda: f"fused_bias_relu: x must be a 2-D float32 CUDA tensor, got {x.dtype} {x.device}",
    )
    torch._check(
        bias.shape == (x.shape[1],) and bias.dtype == x.dtype and bias.device == x.device,
        lambda: f"fused_bias_relu: bias must be ({x.shape[1]},) float32 on {x.device}",
    )
    torch._check(
        x.device.index == torch.cuda.current_device(),
        lambda: f"fused_bias_relu: x is on {x.device}; the kernel runs on the current GPU",
    )
    torch._check(x.numel() < 2**31, lambda: "fused_bias_relu: numel must fit the kernel's int")
    x, bias = x.contiguous(), bias.contiguous()
    y = torch.empty_like(x)
    threads = 256
    # At most 65,535 blocks (16.8 M threads): far more than an H100's 132 SMs run at once; the
    # grid-stride loop covers the rest.
    blocks = min(max(1, -(-x.numel() // threads)), 65535)
    # float(scale): a Python int would go in as a 4-byte C int where the kernel reads 8 bytes.
    args = [x, bias, y, x.numel(), x.shape[1], float(scale)]
    kernel(grid=(blocks, 1, 1), block=(threads, 1, 1), args=args)
    return y


def edited(number: int) -> str:
    """The kernel after an edit: a comment, which NVRTC compiles in full all the same (it keeps no
    cache), as it would a changed line."""
    return KERNEL + f"// edit {number}\n"


def time_nvrtc(edits: int = 5) -> dict:
    """Seconds for the first compile in this process (it also loads NVRTC and, on a GPU, starts
    CUDA and loads the module) and the median over `edits` recompiles after an edit."""
    start = time.perf_counter()
    compile_kernel(KERNEL)
    first = time.perf_counter() - start
    times = []
    for number in range(edits):
        start = time.perf_counter()
        compile_kernel(edited(number))
        times.append(time.perf_counter() - start)
    return {"first_s": first, "edited_median_s": statistics.median(times), "edits": edits}


def check_on_gpu(options: list[str] | None = None) -> float:
    """The largest difference from torch.relu(x * s + b) on a 1000 x 333 tensor with a NaN."""
    kernel = compile_kernel(KERNEL, options)
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(1000, 333, device="cuda", generator=generator)
    x[3, 7] = float("nan")
    bias = torch.randn(333, device="cuda", generator=generator)
    got = fused_bias_relu(kernel, x, bias, 0.7)
    expected = torch.relu(x * 0.7 + bias)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6, equal_nan=True)
    return (got - expected).nan_to_num().abs().max().item()


# The same kernel as an extension, built only to time the build (nothing calls it, so it has none
# of fused_bias_relu's checks above): the launcher needs torch's headers, and load_inline compiles
# them with nvcc (and the Python bindings it writes with g++) before the first call.
LAUNCHER = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAStream.h>

at::Tensor fused_bias_relu_ext(const at::Tensor& x, const at::Tensor& bias, double scale) {
  at::Tensor y = at::empty_like(x);
  const int numel = static_cast<int>(x.numel()), threads = 256;
  const int blocks = std::min(std::max(1, (numel + threads - 1) / threads), 65535);
  fused_bias_relu<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), numel,
      static_cast<int>(x.size(1)), scale);
  return y;
}
"""


def time_load_inline(directory: Path) -> dict:
    """Seconds for load_inline's first build in an empty folder, then for the build after an edit
    of the kernel, in the same process as in a notebook: load_inline then names the module
    iterate_load_inline_v1, a new -DTORCH_EXTENSION_NAME for both files, so the bindings are
    compiled again along with the kernel."""
    from torch.utils.cpp_extension import load_inline

    build_utils.put_ninja_on_path()
    build_utils.default_cuda_arch_list()  # 9.0 on a machine without a GPU, as the Makefile sets
    times = {}
    for label, kernel in [("cold_s", KERNEL), ("edited_s", edited(0))]:
        start = time.perf_counter()
        load_inline(
            name="iterate_load_inline",
            cpp_sources="at::Tensor fused_bias_relu_ext(const at::Tensor&, const at::Tensor&, double);",
            cuda_sources=kernel + LAUNCHER,
            functions=["fused_bias_relu_ext"],
            build_directory=str(directory),
            extra_cuda_cflags=["-O3"],
            extra_include_paths=build_utils.cuda_include_paths(),
        )
        times[label] = time.perf_counter() - start
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load-inline", action="store_true", help="also time load_inline")
    parser.add_argument("--out", type=Path, help="write iterate_nvrtc.md and .json here")
    args = parser.parse_args()

    if torch.cuda.is_available():
        device = torch.cuda.get_device_name()
    else:
        cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in cpu.splitlines()
                if line.startswith("model name")
            ),
            "a CPU",
        )
        device = f"{model}, {os.cpu_count()} cores, no GPU (NVRTC compiles for sm_90)"
    record = {
        "date": datetime.date.today().isoformat(),
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nvrtc": time_nvrtc(),
    }
    nvrtc = record["nvrtc"]
    print(f"{device}, torch {torch.__version__}, CUDA {torch.version.cuda}, {record['date']}")
    print(
        f"NVRTC: first compile in this process {nvrtc['first_s']:.3f} s, after an edit "
        f"{nvrtc['edited_median_s']:.3f} s (median of {nvrtc['edits']})"
    )
    if torch.cuda.is_available():
        record["max_difference"] = check_on_gpu()
        record["max_difference_fmad_false"] = check_on_gpu(["--fmad=false"])
        print(
            "checked against torch.relu(x * s + b): largest difference "
            f"{record['max_difference']:.1e}, {record['max_difference_fmad_false']:.1e} "
            "compiled with --fmad=false"
        )
    if args.load_inline:  # builds and loads without a GPU too (nothing calls it)
        with tempfile.TemporaryDirectory() as directory:
            record["load_inline"] = time_load_inline(Path(directory))
        inline = record["load_inline"]
        print(
            f"load_inline: first build {inline['cold_s']:.1f} s, after an edit "
            f"{inline['edited_s']:.1f} s"
        )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "iterate_nvrtc.json").write_text(json.dumps(record, indent=2) + "\n")
        rows = [
            ("NVRTC, first compile in the process", nvrtc["first_s"]),
            (f"NVRTC, after an edit (median of {nvrtc['edits']})", nvrtc["edited_median_s"]),
        ]
        if "load_inline" in record:
            rows += [
                ("load_inline, first build", record["load_inline"]["cold_s"]),
                ("load_inline, after an edit", record["load_inline"]["edited_s"]),
            ]
        table = "\n".join(f"| {what} | {seconds:.3f} |" for what, seconds in rows)
        if "max_difference" in record:
            table += (
                "\n\nLargest difference from `torch.relu(x * s + b)` (1000 x 333 float32): "
                f"{record['max_difference']:.1e}; compiled with `--fmad=false`: "
                f"{record['max_difference_fmad_false']:.1e}."
            )
        (args.out / "iterate_nvrtc.md").write_text(
            "# Iterating on a kernel: NVRTC in process against load_inline\n\n"
            f"Written by `chapter3_cuda_kernels/iterate_nvrtc.py --load-inline --out`: {device}, "
            f"torch {torch.__version__}, CUDA {torch.version.cuda}, {record['date']}. Wall time of "
            "each step, as a learner waits for it; the same kernel each way.\n\n"
            f"| step | seconds |\n| --- | ---: |\n{table}\n"
        )


if __name__ == "__main__":
    main()
