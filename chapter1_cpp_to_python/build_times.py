"""How long each way of building costs: every chapter 1 module built cold, then loaded cached.

    python chapter1_cpp_to_python/build_times.py --out DIR    # ~90 s on 2 cores; DIR/chapter1_build_times.md

Each measurement runs in a fresh Python process, as a learner's would, and times only the build
call (`import torch` excluded). Cold builds go to an empty temporary folder, so nothing is reused.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

LOAD = """
import sys, time
sys.path.insert(0, {here!r})
from torch.utils.cpp_extension import load, load_inline
start = time.perf_counter()
{call}
print(time.perf_counter() - start)
"""
CALLS = {
    "`addone` with `load()` (includes only pybind11)": "load(name='addone', sources=[{here!r} + '/addone.cpp'], extra_cflags=['-O3'], build_directory={build!r})",
    "`pybind_features` with `load()` (includes `torch/csrc/utils/pybind.h`)": "load(name='pybind_features', sources=[{here!r} + '/pybind_features.cpp'], extra_cflags=['-O3'], build_directory={build!r})",
    "`addone_inline` with `load_inline()` (one line of C++, plus `torch/extension.h`)": "from load_inline_example import CPP_SOURCE; load_inline(name='addone_inline', cpp_sources=[CPP_SOURCE], functions=['addone'], extra_cflags=['-O3'], build_directory={build!r})",
}


def timed_load(call: str, build: Path) -> float:
    code = LOAD.format(here=str(HERE), call=call.format(here=str(HERE), build=str(build)))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def wheel_seconds(tmp: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(tmp / "wheels"),
            str(HERE),
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    lines = [
        f"{datetime.date.today().isoformat()}, Python {sys.version.split()[0]}; cold = empty build folder, "
        "cached = the same call again in a new process.",
        "",
        "| build | cold | cached |",
        "| --- | ---: | ---: |",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, call) in enumerate(CALLS.items()):
            build = Path(tmp) / f"build{i}"
            build.mkdir()
            cold, cached = timed_load(call, build), timed_load(call, build)
            lines.append(f"| {label} | {cold:.1f} s | {cached:.1f} s |")
        lines.append(
            f"| `addone` as a wheel, `pip wheel --no-build-isolation` | {wheel_seconds(Path(tmp)):.1f} s | (pip rebuilds every time) |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter1_build_times.md").write_text(table + "\n")
    return table


if __name__ == "__main__":
    main()
