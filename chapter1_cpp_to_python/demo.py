"""Chapter 1 tour: build the extensions, call them, and see pybind11 turn C++ into Python.

python chapter1_cpp_to_python/demo.py      (part of `make tutorial`)
"""

from __future__ import annotations

import threading
import time

import torch

import load_chapter1


def section(title: str) -> None:
    print(f"\n--- {title}")


def main() -> None:
    addone = load_chapter1.load_addone()
    features = load_chapter1.load_pybind_features()

    section("addone: the smallest extension")
    print(f"addone.addone(41) = {addone.addone(41)}")
    print(f"loaded from {addone.__file__}\n  {addone.build_info()}")
    try:
        addone.addone(1.5)
    except TypeError as error:
        print(f"addone.addone(1.5) -> TypeError: {str(error).splitlines()[0]}")

    section("containers and keyword arguments")
    print(f"word_lengths(['tensor', 'gpu']) = {features.word_lengths(['tensor', 'gpu'])}")
    print(
        f"scale_and_shift([1, 2], 10, shift=0.5) = {features.scale_and_shift([1, 2], 10, shift=0.5)}"
    )
    print(f"help text: {features.scale_and_shift.__doc__.splitlines()[0]}")

    section("a C++ class")
    stats = features.RunningStats("loss")
    stats.push_many([2.0, 4.0, 9.0])
    print(f"{stats!r}: mean {stats.mean:.3f}, variance {stats.variance:.3f}")

    section("C++ exceptions arrive as Python exceptions")
    for call, fn in [
        ("checked_sqrt(-1)", lambda: features.checked_sqrt(-1)),
        ("RunningStats('empty').variance", lambda: features.RunningStats("empty").variance),
        ("add_one_(an int tensor)", lambda: features.add_one_(torch.ones(2, dtype=torch.int32))),
    ]:
        try:
            fn()
        except Exception as error:
            print(f"{call} -> {type(error).__name__}: {error}".splitlines()[0])

    section("the GIL: two threads of C++ work")
    n = 1_000_000
    for release in (False, True):
        threads = [
            threading.Thread(target=features.count_primes, args=(n, release)) for _ in range(2)
        ]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        held = "released" if release else "held"
        print(f"2 threads x count_primes({n:,}), GIL {held}: {time.perf_counter() - start:.2f} s")

    section("a tensor crosses without a copy (chapter 2 goes further)")
    t = torch.zeros(2, 3)
    features.add_one_(t)
    print(f"{features.describe_tensor(t)} after add_one_: {t.tolist()}")

    print("\nNext: python chapter1_cpp_to_python/benchmark.py prints what each crossing costs.")


if __name__ == "__main__":
    main()
