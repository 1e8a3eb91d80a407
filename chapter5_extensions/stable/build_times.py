"""How long the same two ops (relu and fused_bias_relu, forward and backward) take to compile in
three styles: ATen + pybind11 (chapters 1 to 4), torch.library (custom_ops) and the stable ABI
(custom_ops_stable). One compile at a time, each translation unit timed on its own, -O3, with
the flags setup.py gives; the sum per style is what a one-core build costs.

    python chapter5_extensions/stable/build_times.py        # a few minutes on 2 cores

The ATen + pybind11 unit is custom_ops's two CPU files behind <torch/extension.h> and a
PYBIND11_MODULE, as a chapter 1 to 4 extension would be. Lesson: ../further/build_times.md,
"Compile times" (from ../part3_shipping.md, "Four ways side by side").
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import CUDA_HOME, include_paths

HERE = Path(__file__).resolve().parent
CUSTOM_OPS = HERE.parent / "csrc"
STABLE = HERE / "csrc"
TARGET = "-DTORCH_TARGET_VERSION=0x020b000000000000"
LIMITED_API = "-DPy_LIMITED_API=0x030A0000"  # what py_limited_api=True adds; pybind11 cannot


def nvidia_includes() -> list[str]:
    """cusparse.h and friends from torch's pip wheels, for ATen/cuda/CUDAContext.h (setup.py)."""
    try:
        import nvidia
    except ImportError:
        return []
    found = [Path(p) / "cu13" / "include" for p in nvidia.__path__]
    return [f"-I{p}" for p in found if (p / "cusparse.h").exists()][:1]


def includes() -> list[str]:
    paths = [*include_paths(), sysconfig.get_paths()["include"]]
    if CUDA_HOME:
        paths.append(str(Path(CUDA_HOME) / "include"))
    return [f"-I{p}" for p in paths] + nvidia_includes()


def compile_seconds(source: Path, extra: list[str], out: Path) -> float:
    if source.suffix == ".cu":
        command = [
            str(Path(CUDA_HOME) / "bin" / "nvcc"), "-c", str(source), "-o", str(out), "-O3",
            "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_90,code=sm_90",
            "--compiler-options", "-fPIC", "-D__CUDA_NO_HALF_OPERATORS__",
            "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__", *includes(), *extra,
        ]  # fmt: skip
    else:
        command = ["c++", "-c", str(source), "-o", str(out), "-O3", "-std=c++17", "-fPIC"]
        command += [*includes(), *extra]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def main() -> int:
    with_cuda = CUDA_HOME is not None and (Path(CUDA_HOME) / "bin" / "nvcc").exists()
    with tempfile.TemporaryDirectory() as tmp:
        pybind = Path(tmp) / "pybind11_ops.cpp"
        pybind.write_text(
            "#include <torch/extension.h>\n"
            f'#include "{CUSTOM_OPS / "relu.cpp"}"\n'
            f'#include "{CUSTOM_OPS / "fused_bias_relu.cpp"}"\n'
            "PYBIND11_MODULE(_C, m) {}\n"
        )
        styles = {
            "ATen + pybind11": [(pybind, ["-fopenmp"])],
            "torch.library (custom_ops)": [
                (CUSTOM_OPS / name, ["-fopenmp", LIMITED_API])
                for name in ["ops.cpp", "relu.cpp", "fused_bias_relu.cpp"]
            ],
            "stable ABI (custom_ops_stable)": [
                (STABLE / name, [TARGET, LIMITED_API])
                for name in ["ops.cpp", "relu.cpp", "fused_bias_relu.cpp"]
            ],
        }
        if with_cuda:
            styles["torch.library (custom_ops)"] += [
                (CUSTOM_OPS / "cuda" / name, []) for name in ["relu.cu", "fused_bias_relu.cu"]
            ]
            styles["stable ABI (custom_ops_stable)"] += [
                (STABLE / "cuda" / name, [TARGET, "-DUSE_CUDA"])
                for name in ["relu.cu", "fused_bias_relu.cu"]
            ]
        print(
            f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores, torch {torch.__version__}, one compile at a time"
        )
        print("| style | C++ s (files) | CUDA s (files, sm_90) | total s |")
        print("| --- | --- | --- | --- |")
        for style, units in styles.items():
            cpp, cu = [], []
            for source, extra in units:
                seconds = compile_seconds(source, extra, Path(tmp) / (source.stem + ".o"))
                (cu if source.suffix == ".cu" else cpp).append(seconds)
            cu_text = f"{sum(cu):.1f} ({len(cu)})" if cu else "-"
            print(
                f"| {style} | {sum(cpp):.1f} ({len(cpp)}) | {cu_text} | {sum(cpp) + sum(cu):.1f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
