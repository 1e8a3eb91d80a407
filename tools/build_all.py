"""Build every chapter's extension before the tests and demos load them: `make tutorial` and
`make test` run this first.

    python tools/build_all.py            # all chapters; a cached build takes about a second
    python tools/build_all.py chapter3   # only the chapters whose folder names start so

Each build is the chapter's own loader (load_chapterN.py, chapter 5's build_inplace.py), run in a
process of its own, so the tests then find exactly these builds cached and compile nothing. The
builds run side by side, the longest first, as many at a time as the machine has cores: one
chapter's build waits on its linker or on Python while another compiles. Each line of output is
prefixed with its build's name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (name, chapter folder, Python run there). Longest cold build first (2 cores, 2026-11-26).
BUILDS = [
    ("custom_ops", "chapter5_extensions", "import build_inplace; build_inplace.build_inplace()"),
    ("chapter4", "chapter4_autograd", "import load_chapter4; load_chapter4.load_chapter4()"),
    ("chapter3", "chapter3_cuda_kernels", "import load_chapter3; load_chapter3.load_chapter3()"),
    ("chapter2", "chapter2_tensor_api", "import load_chapter2; load_chapter2.load_chapter2()"),
    (
        "custom_ops_stable",
        "chapter5_extensions/stable",
        "import build_stable; build_stable.build_stable()",
    ),
    (
        "chapter1",
        "chapter1_cpp_to_python",
        "import load_chapter1, load_inline_example; load_chapter1.load_addone(); "
        "load_chapter1.load_pybind_features(); load_inline_example.load_addone_inline()",
    ),
]


def run(name: str, folder: str, code: str) -> tuple[str, int, float]:
    """One build in a new Python, its output passed on line by line with the name in front."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO / folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    for line in process.stdout:
        print(f"  {name:>17} | {line.rstrip()}", flush=True)
    return name, process.wait(), time.perf_counter() - start


def main(argv: list[str]) -> int:
    builds = [b for b in BUILDS if not argv or any(b[1].startswith(a) for a in argv)]
    cores = os.cpu_count() or 1
    print(f"building {len(builds)} extensions, {cores} at a time (cached builds take a second)")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=cores) as pool:
        results = list(pool.map(lambda build: run(*build), builds))
    failed = [name for name, code, _ in results if code != 0]
    timings = ", ".join(f"{name} {seconds:.0f} s" for name, _, seconds in results)
    print(f"built in {time.perf_counter() - start:.0f} s ({timings})")
    if failed:
        print(f"FAILED: {', '.join(failed)} (the lines above with their names say why)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
