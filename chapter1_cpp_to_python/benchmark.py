"""The cost of crossing from Python into C++: per call, per loop, and with or without the GIL.

    python chapter1_cpp_to_python/benchmark.py            # full run, ~20 s on 2 cores; prints tables
    python chapter1_cpp_to_python/benchmark.py --quick    # small sizes, a few seconds
    python chapter1_cpp_to_python/benchmark.py --out DIR  # also writes DIR/chapter1_crossing.{json,md}

Timings are CPU wall-clock with timeit (garbage collection off), the median of several repeats.
The tables in the lesson (README.md, "What a crossing costs") are this script's output.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import threading
import time
import timeit
from pathlib import Path

import torch

import load_chapter1


def machine_description() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def median_seconds(stmt, number: int, repeat: int) -> float:
    """Median over `repeat` runs of the time for one execution of stmt (a callable)."""
    return statistics.median(timeit.repeat(stmt, number=number, repeat=repeat)) / number


def per_call_costs(addone, features, quick: bool) -> list[dict]:
    def py_addone(x):
        return x + 1

    t = torch.ones(1)
    number, repeat = (20_000, 5) if quick else (500_000, 7)
    cases = [
        ("Python function `py_addone(1)`", lambda: py_addone(1)),
        ("builtin `abs(-1)`", lambda: abs(-1)),
        ("C++ `noop()` via pybind11", lambda: features.noop()),
        ("C++ `addone(1)` via pybind11", lambda: addone.addone(1)),
        ("C++ `tensor_identity(t)`: a tensor crosses", lambda: features.tensor_identity(t)),
        ("torch op `torch.add(t, 1)` on 1 element", lambda: torch.add(t, 1)),
    ]
    # A lambda around each call costs the same for every row; it is measured and subtracted so
    # the rows show the call itself.
    base = median_seconds(lambda: None, number, repeat)
    rows = []
    for name, fn in cases:
        seconds = median_seconds(fn, number, repeat) - base
        rows.append({"case": name, "ns_per_call": seconds * 1e9})
    rows.append({"case": "(the timing lambda itself, subtracted above)", "ns_per_call": base * 1e9})
    return rows


def loop_costs(addone, features, quick: bool) -> list[dict]:
    n = 10_000 if quick else 1_000_000
    repeat = 3 if quick else 5
    xs = list(range(n))
    xt = torch.arange(n)
    add = addone.addone

    def py_addone(x):
        return x + 1

    cases = [
        ("Python loop calling a Python function", lambda: [py_addone(v) for v in xs]),
        ("Python loop calling C++ `addone` (n crossings)", lambda: [add(v) for v in xs]),
        ("Python loop, `v + 1` inline", lambda: [v + 1 for v in xs]),
        ("one C++ call, loop in C++ (`add_one_to_each`)", lambda: features.add_one_to_each(xs)),
        ("tensor op `xt + 1` (data already a tensor)", lambda: xt + 1),
    ]
    rows = []
    for name, fn in cases:
        seconds = median_seconds(fn, 1, repeat)
        rows.append(
            {"case": name, "n": n, "ms": seconds * 1e3, "ns_per_element": seconds / n * 1e9}
        )
    return rows


def gil_costs(features, quick: bool) -> list[dict]:
    n = 20_000 if quick else 1_000_000

    def wall(threads: int, release_gil: bool) -> float:
        workers = [
            threading.Thread(target=features.count_primes, args=(n, release_gil))
            for _ in range(threads)
        ]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return time.perf_counter() - start

    rows = []
    for threads, release in [(1, True), (2, False), (2, True)]:
        seconds = statistics.median(wall(threads, release) for _ in range(3))
        rows.append({"threads": threads, "release_gil": release, "n": n, "ms": seconds * 1e3})
    return rows


def to_markdown(result: dict) -> str:
    lines = [
        f"Machine: {result['machine']}; Python {result['python']}, torch {result['torch']}; "
        f"{result['date']}.",
        "",
        "| per call | ns |",
        "| --- | ---: |",
    ]
    lines += [f"| {r['case']} | {r['ns_per_call']:.0f} |" for r in result["per_call"]]
    n = result["loops"][0]["n"]
    lines += [
        "",
        f"| {n:,} elements, `v + 1` each | ms | ns per element |",
        "| --- | ---: | ---: |",
    ]
    lines += [
        f"| {r['case']} | {r['ms']:.2f} | {r['ns_per_element']:.1f} |" for r in result["loops"]
    ]
    n = result["gil"][0]["n"]
    lines += ["", f"| `count_primes({n:,})` | wall ms |", "| --- | ---: |"]
    for r in result["gil"]:
        what = "1 thread" if r["threads"] == 1 else f"{r['threads']} threads"
        what += ", GIL released" if r["release_gil"] else ", GIL held"
        lines.append(f"| {what} | {r['ms']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--out", type=Path, help="write chapter1_crossing.json and .md here")
    args = parser.parse_args(argv)

    addone = load_chapter1.load_addone()
    features = load_chapter1.load_pybind_features()
    result = {
        "machine": machine_description(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "per_call": per_call_costs(addone, features, args.quick),
        "loops": loop_costs(addone, features, args.quick),
        "gil": gil_costs(features, args.quick),
    }
    table = to_markdown(result)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chapter1_crossing.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "chapter1_crossing.md").write_text(table + "\n")
    return result


if __name__ == "__main__":
    main()
