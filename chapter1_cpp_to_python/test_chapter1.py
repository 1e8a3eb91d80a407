"""Tests for chapter 1: every function of addone and pybind_features, the three ways to build,
the exception mapping, the GIL, and the stale-module pitfall.

    python chapter1_cpp_to_python/test_chapter1.py     # on its own
    pytest chapter1_cpp_to_python                      # or under pytest

Each extension is built once (load_chapter1 caches it on disk and in the process); the tests that
build something of their own say so in their name and are marked slow.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import build_utils
import load_chapter1

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def addone():
    return load_chapter1.load_addone()


@pytest.fixture(scope="session")
def features():
    return load_chapter1.load_pybind_features()


# ---- addone -------------------------------------------------------------------------------------


# Not 2**31 - 1: its + 1 overflows a C++ int, which is undefined behaviour, not an error.
@pytest.mark.parametrize("x", [0, 1, -1, 41, -(2**31), 2**31 - 2])
def test_addone_adds_one(addone, x):
    assert addone.addone(x) == x + 1


@pytest.mark.parametrize("bad", [1.5, "1", None, [1]])
def test_addone_rejects_non_integers_with_type_error(addone, bad):
    # pybind11 converts only what fits the C++ type; everything else is a TypeError that lists
    # the signatures it would have accepted.
    with pytest.raises(
        TypeError, match=r"(?s)incompatible function arguments.*\(x: typing.SupportsInt\)"
    ):
        addone.addone(bad)


def test_addone_rejects_values_that_overflow_a_cpp_int(addone):
    with pytest.raises(TypeError, match="incompatible function arguments"):
        addone.addone(2**31)


def test_addone_keyword_argument_uses_the_declared_name(addone):
    assert addone.addone(x=2) == 3


def test_addone_reports_which_build_is_loaded(addone):
    assert addone.build_info().startswith("addone.cpp compiled ")
    assert Path(addone.__file__).parent == build_utils.build_root() / "addone"


# ---- the other two ways to build --------------------------------------------------------------


@pytest.mark.slow(seconds=40)
def test_load_inline_builds_a_working_module():
    import load_inline_example

    module = load_inline_example.load_addone_inline()
    assert [module.addone(v) for v in (-3, 0, 41)] == [-2, 1, 42]


def _run_python(code: str, pythonpath: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow(seconds=45)
def test_setup_py_builds_a_wheel_that_installs_and_imports(tmp_path):
    from filelock import FileLock  # installed with torch

    wheel_dir, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # Build from a copy, so that setuptools' build/ and egg-info stay out of the chapter folder.
    # A fixed one, with the files' times kept (copy2): setuptools' build/ stays in it, and ninja
    # recompiles addone.cpp only when it changed, not on every run of the tests.
    source = HERE.parent / "build" / "wheel_test" / HERE.name
    with FileLock(f"{source}.lock"):
        shutil.copytree(
            HERE,
            source,
            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
            dirs_exist_ok=True,
        )
        subprocess.run(
            [*pip, "wheel", "--no-build-isolation", "--no-deps", "-w", str(wheel_dir), str(source)],
            check=True,
            timeout=600,
        )
    (wheel,) = wheel_dir.glob("chapter1_addone-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)

    result = _run_python("import torch, chapter1_addone; print(chapter1_addone.addone(41))", site)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "42"

    # The module links against libc10.so and friends but carries no path to them: it finds them
    # only because `import torch` loaded them first. Importing it first fails, and the lesson
    # says so; this checks the lesson is still true.
    result = _run_python("import chapter1_addone", site)
    assert result.returncode != 0
    assert "libc10.so" in result.stderr


# ---- containers, keyword arguments, docstrings -------------------------------------------------


def test_sum_list_matches_python_sum(features, generator):
    values = torch.randn(1001, generator=generator, dtype=torch.float64).tolist()
    assert features.sum_list(values) == pytest.approx(math.fsum(values), rel=1e-12)
    assert features.sum_list([]) == 0.0


def test_add_one_to_each_returns_a_new_list(features):
    values = list(range(-5, 6))
    assert features.add_one_to_each(values) == [v + 1 for v in values]
    assert values == list(range(-5, 6)), "the input list must be left alone (it was copied)"
    assert features.add_one_to_each([]) == []


def test_word_lengths_returns_a_dict(features):
    assert features.word_lengths(["gpu", "kernel", "gpu"]) == {"gpu": 3, "kernel": 6}


def test_sum_list_rejects_a_list_with_a_string(features):
    with pytest.raises(TypeError, match="incompatible function arguments"):
        features.sum_list([1.0, "two"])


def test_scale_and_shift_defaults_and_keywords(features):
    assert features.scale_and_shift([1.0, 2.0]) == [1.0, 2.0]
    assert features.scale_and_shift([1.0, 2.0], 3.0) == [3.0, 6.0]
    assert features.scale_and_shift([1.0, 2.0], shift=0.5) == [1.5, 2.5]
    assert features.scale_and_shift(values=[1.0], scale=2.0, shift=1.0) == [3.0]


def test_scale_and_shift_shift_is_keyword_only(features):
    with pytest.raises(TypeError, match="incompatible function arguments"):
        features.scale_and_shift([1.0], 2.0, 3.0)


def test_docstrings_carry_signature_and_text(features):
    doc = features.scale_and_shift.__doc__
    assert "scale_and_shift(values:" in doc
    assert "scale: typing.SupportsFloat = 1.0, *, shift: typing.SupportsFloat = 0.0" in doc
    assert "Return [v * scale + shift for v in values]." in doc


# ---- exceptions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("x", [-1.0, float("nan")])
def test_invalid_argument_becomes_value_error(features, x):
    with pytest.raises(ValueError, match="checked_sqrt: x must be >= 0"):
        features.checked_sqrt(x)


def test_checked_sqrt_of_valid_input(features):
    assert features.checked_sqrt(2.0) == pytest.approx(math.sqrt(2.0), rel=1e-15)


def test_custom_exception_is_its_own_class_and_a_value_error(features):
    stats = features.RunningStats("empty")
    with pytest.raises(features.StatsError, match="RunningStats 'empty': mean of no values"):
        _ = stats.mean
    assert issubclass(features.StatsError, ValueError)
    assert features.StatsError.__module__ == "pybind_features"


# ---- a class ------------------------------------------------------------------------------------


def test_running_stats_matches_statistics_module(features, generator):
    values = (torch.randn(999, generator=generator, dtype=torch.float64) * 3 + 10).tolist()
    stats = features.RunningStats("x")
    stats.push_many(values[:500])
    for v in values[500:]:
        stats.push(v)
    assert stats.count == 999
    assert stats.mean == pytest.approx(statistics.fmean(values), rel=1e-12)
    assert stats.variance == pytest.approx(statistics.variance(values), rel=1e-10)


def test_running_stats_variance_needs_two_values(features):
    stats = features.RunningStats("one")
    stats.push(1.0)
    with pytest.raises(features.StatsError, match="variance needs at least 2 values, got 1"):
        _ = stats.variance


def test_running_stats_properties_and_repr(features):
    stats = features.RunningStats("loss")
    assert repr(stats) == "RunningStats(name='loss', count=0)"
    stats.push_many([1.0, 2.0])
    assert repr(stats) == "RunningStats(name='loss', count=2, mean=1.5)"
    stats.name = "val_loss"
    assert stats.name == "val_loss"
    with pytest.raises(AttributeError, match="has no setter"):
        stats.count = 5
    with pytest.raises(ValueError, match="name must not be empty"):
        stats.name = ""
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        features.RunningStats(3)


# ---- the GIL ------------------------------------------------------------------------------------


def _arrive_from_two_threads(features, release_gil: bool, timeout_s: float) -> list[bool]:
    meeting = features.Rendezvous(2)
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda: results.append(meeting.arrive(timeout_s, release_gil)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_threads_overlap_in_cpp_when_the_gil_is_released(features):
    # Both threads are inside C++ at the same time, or they could not have met.
    assert _arrive_from_two_threads(features, release_gil=True, timeout_s=30.0) == [True, True]


def test_threads_serialize_when_cpp_holds_the_gil(features):
    # The first thread waits in C++ holding the GIL, so the second cannot even call arrive()
    # until the first gives up: one times out, then the other finds it already there.
    results = _arrive_from_two_threads(features, release_gil=False, timeout_s=0.3)
    assert sorted(results) == [False, True]


def test_count_primes_matches_a_python_sieve(features):
    n = 10_000
    sieve = bytearray([1]) * n
    sieve[:2] = b"\x00\x00"
    for k in range(2, math.isqrt(n) + 1):
        if sieve[k]:
            sieve[k * k :: k] = bytearray(len(range(k * k, n, k)))
    assert features.count_primes(n) == sum(sieve) == 1229
    assert features.count_primes(n, release_gil=False) == 1229
    assert features.count_primes(0) == 0


# ---- tensors (a teaser for chapter 2) ------------------------------------------------------------


def test_tensor_crosses_without_a_copy(features):
    t = torch.arange(6.0)
    assert features.tensor_identity(t) is t


def test_add_one_in_place_writes_the_callers_storage(features, generator):
    t = torch.randn(4, 5, generator=generator)
    expected = t + 1
    out = features.add_one_(t)
    assert out is t
    torch.testing.assert_close(t, expected, rtol=0, atol=0)
    features.add_one_(torch.empty(0))  # no elements, no work, no error


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (torch.ones(3, dtype=torch.float64), "add_one_: t must be float32, got Double"),
        (torch.ones(3, dtype=torch.int32), "add_one_: t must be float32, got Int"),
        (torch.ones(4, 4).t(), r"add_one_: t must be contiguous \(call .contiguous\(\) first\)"),
        (torch.ones(8)[::2], "add_one_: t must be contiguous"),
    ],
)
def test_add_one_in_place_rejects_bad_tensors(features, bad, message):
    with pytest.raises(RuntimeError, match=message):
        features.add_one_(bad)


@pytest.mark.cuda
def test_add_one_in_place_rejects_a_cuda_tensor(features):
    with pytest.raises(RuntimeError, match="add_one_: t must be a CPU tensor, got cuda:0"):
        features.add_one_(torch.ones(3, device="cuda"))


def test_describe_tensor(features):
    assert features.describe_tensor(torch.ones(2, 3).t()) == (
        "Tensor(dtype=float, shape=[3, 2], device=cpu, contiguous=False)"
    )


# ---- the stale-module pitfall ------------------------------------------------------------------


@pytest.mark.slow
def test_failed_rebuild_leaves_the_old_module_bound_and_a_good_one_replaces_it(tmp_path):
    from torch.utils.cpp_extension import load

    source = tmp_path / "stale_demo.cpp"
    build = tmp_path / "build"
    build.mkdir()

    def build_module():
        return load(name="stale_demo", sources=[str(source)], build_directory=str(build))

    original = (HERE / "addone.cpp").read_text()
    source.write_text(original)
    module = build_module()
    assert module.addone(1) == 2

    source.write_text(original.replace("return x + 1;", "return x + 1 BROKEN;"))
    with pytest.raises(RuntimeError, match="Error building extension 'stale_demo"):
        module = build_module()
    assert module.addone(1) == 2, "the name still points at the old build"

    source.write_text(original.replace("return x + 1;", "return x + 100;"))
    fixed = build_module()
    assert fixed.addone(1) == 101
    assert fixed.__name__.startswith("stale_demo_v"), "torch loads an edited source as a new name"
    assert module.addone(1) == 2, "and the old module object keeps the old code"


# ---- the scripts a reader runs ------------------------------------------------------------------


def test_benchmark_quick_run_measures_every_case(tmp_path, import_own_script):
    benchmark = import_own_script("benchmark")

    result = benchmark.main(["--quick", "--out", str(tmp_path)])
    assert len(result["per_call"]) == 7 and len(result["loops"]) == 5 and len(result["gil"]) == 3
    cost = {row["case"]: row["ns_per_call"] for row in result["per_call"]}
    # A tensor op (dispatch, allocation) costs tens of times a bare call; a wide margin, no flake.
    assert cost["torch op `torch.add(t, 1)` on 1 element"] > 5 * cost["C++ `noop()` via pybind11"]
    table = (tmp_path / "chapter1_crossing.md").read_text()
    assert "C++ `addone(1)` via pybind11" in table and "GIL released" in table


def test_demo_runs_every_section(capsys, import_own_script):
    demo = import_own_script("demo")

    demo.main()
    out = capsys.readouterr().out
    for expected in ["addone.addone(41) = 42", "StatsError", "GIL released", "after add_one_"]:
        assert expected in out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))
