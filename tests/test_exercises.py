"""Every exercise is solvable and its checks can fail: the reference solution passes the checker
(`tools/check_exercise.py`, what `make check EX=...` runs) and the untouched TODO stub fails it.

The checker runs as a subprocess, as a learner runs it: each exercise registers its ops under a
fixed name, so a stub and its solution cannot be loaded into one process. All runs start at once,
as many at a time as there are cores (each build is one compiler process), and the tests then
read their results.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECKER = REPO / "tools" / "check_exercise.py"
sys.path.insert(0, str(CHECKER.parent))

import check_exercise  # noqa: E402
import grading  # noqa: E402
import torch  # noqa: E402

EXERCISES = check_exercise.all_exercise_ids()
CHAPTERS = sorted(p for p in REPO.glob("chapter*_*") if p.is_dir())


def pristine_stub(exercise_id: str) -> Path:
    """The stub as committed, copied under build/: a learner who has solved an exercise in
    exercises/ must not see `make test` fail on it, nor have their build replaced."""
    exercise = check_exercise.find_exercise(exercise_id)
    relative = (exercise.folder / exercise.source).relative_to(REPO)
    try:
        text = subprocess.run(
            ["git", "show", f"HEAD:{relative.as_posix()}"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: the file as it is
        text = (REPO / relative).read_text()
    copy = REPO / "build" / "exercise_stubs" / relative
    copy.parent.mkdir(parents=True, exist_ok=True)
    if not copy.exists() or copy.read_text() != text:
        copy.write_text(text)
    return copy


def run_checker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHECKER), *args],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def checker_runs() -> dict[tuple[str, str], subprocess.CompletedProcess]:
    """(exercise, "solution" or "stub") -> the checker's result, for every exercise. Without the
    benchmarks: runs side by side would share the GPU and slow each other down."""
    jobs = [(ex, kind) for ex in EXERCISES for kind in ("solution", "stub")]
    stubs = {ex: pristine_stub(ex) for ex in EXERCISES}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = pool.map(
            lambda job: run_checker(
                job[0],
                "--no-benchmark",
                *(["--solution"] if job[1] == "solution" else ["--source", str(stubs[job[0]])]),
            ),
            jobs,
        )
        return dict(zip(jobs, results, strict=True))


# Under pytest -n (make gpu-check: --dist loadgroup), the tests that read checker_runs share one
# worker: the fixture runs the checker for every exercise, and a worker of its own per test would
# run them all again, once per worker.
SHARES_CHECKER_RUNS = pytest.mark.xdist_group("exercise_checker")

# The exercises whose checks end with a benchmark (on a GPU: a target fraction of copy_).
BENCHMARKED = [
    ex
    for ex in EXERCISES
    if "\ndef benchmark(" in check_exercise.find_exercise(ex).check_file.read_text()
]


@pytest.mark.slow
@pytest.mark.cuda
@SHARES_CHECKER_RUNS
@pytest.mark.parametrize("exercise_id", BENCHMARKED)
def test_reference_solution_reaches_its_speed_target(exercise_id, checker_runs):
    # One at a time, after checker_runs has built everything: the GPU is this run's alone.
    result = run_checker(exercise_id, "--solution")
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^  PASS  fast: ", result.stdout, flags=re.M), result.stdout


def test_there_are_three_to_five_exercises_per_chapter():
    for chapter in CHAPTERS:
        found = sorted((chapter / "exercises").glob("check_*.py"))
        assert 3 <= len(found) <= 5, f"{chapter.name} has {len(found)} exercises"


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_exercise_has_a_todo_stub_and_a_solution(exercise_id):
    exercise = check_exercise.find_exercise(exercise_id)
    assert (exercise.folder / exercise.source).exists(), f"{exercise_id}: no stub"
    stub = pristine_stub(exercise_id).read_text()
    assert "TODO" in stub, f"{exercise_id}: the stub says nowhere what to write"
    assert exercise.solution.exists(), f"{exercise_id}: no reference solution"
    assert exercise.solution.read_text() != stub


@pytest.mark.slow
@SHARES_CHECKER_RUNS
@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_reference_solution_passes_the_checker(exercise_id, checker_runs):
    result = checker_runs[(exercise_id, "solution")]
    assert result.returncode == 0, result.stdout + result.stderr
    # Without a GPU, a CUDA exercise's kernel does not run: passed on the CPU, not graded.
    ungraded = grading.cuda_skip_reason() and f"{exercise_id}: CPU CHECKS PASSED" in result.stdout
    assert f"{exercise_id}: PASSED" in result.stdout or ungraded, result.stdout
    assert "  FAIL  " not in result.stdout


@pytest.mark.slow
@SHARES_CHECKER_RUNS
@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_untouched_stub_fails_the_checker(exercise_id, checker_runs):
    result = checker_runs[(exercise_id, "stub")]
    # 1, not 2: the stub compiles, and it is the checks that fail.
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{exercise_id}: NOT YET" in result.stdout
    assert re.search(r"^  FAIL  ", result.stdout, flags=re.M)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_lesson_states_each_exercise_of_its_chapter(chapter):
    lesson = (chapter / "README.md").read_text()
    assert "\n## Exercises" in lesson, f"{chapter.name}/README.md has no Exercises section"
    exercises_section = lesson.split("\n## Exercises", 1)[1]
    number = re.match(r"chapter(\d+)_", chapter.name).group(1)
    for check_file in sorted((chapter / "exercises").glob("check_*.py")):
        command = f"make check EX=ch{number}/{check_file.stem.removeprefix('check_')}"
        assert command in exercises_section, f"{chapter.name}'s lesson does not state {command}"


def test_unknown_exercise_lists_the_real_ones():
    result = run_checker("ch9/nothing")
    assert result.returncode == 3
    assert "no exercise 'ch9/nothing'" in result.stdout


# ---- the grading library's messages ----------------------------------------------------------


def test_expect_close_names_the_first_wrong_element():
    expected = torch.arange(6.0).reshape(2, 3)
    got = expected.clone()
    got[1, 0], got[1, 2] = 30.0, 50.0
    with pytest.raises(grading.CheckFailed) as failure:
        grading.expect_close(got, expected, atol=1e-6, rtol=1e-6, what="out")
    message = str(failure.value)
    assert "2 of 6 elements differ" in message
    assert "first at index (1, 0): expected 3, got 30" in message


def test_expect_close_reports_a_wrong_shape_before_values():
    with pytest.raises(grading.CheckFailed, match=r"expected shape \(2, 3\), got \(3, 2\)"):
        grading.expect_close(torch.zeros(3, 2), torch.zeros(2, 3), atol=0, rtol=0)


def test_expect_close_treats_nan_as_equal_to_nan_only():
    nan = float("nan")
    grading.expect_close(torch.tensor([nan, 1.0]), torch.tensor([nan, 1.0]), atol=0, rtol=0)
    with pytest.raises(grading.CheckFailed, match=r"index \[0\]: expected 0, got nan"):
        grading.expect_close(torch.tensor([nan]), torch.tensor([0.0]), atol=0, rtol=0)


def test_expect_error_says_what_came_instead():
    with pytest.raises(grading.CheckFailed, match="the call returned"):
        grading.expect_error(lambda: None, "x must be")
    with pytest.raises(grading.CheckFailed, match="got: 'other message'"):
        grading.expect_error(lambda: (_ for _ in ()).throw(RuntimeError("other message")), "x")


# ---- the checker on broken code: a loop that never ends, a crash, an empty kernel ---------------


def processes_mentioning(text: str) -> list[str]:
    """The command lines of running processes that contain `text` (Linux: /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            command = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if text in command:
                found.append(command)
    return found


def solution_with(exercise_id: str, tmp_path: Path, old: str, new: str) -> Path:
    """The reference solution with `old` replaced by `new`, written to tmp_path."""
    exercise = check_exercise.find_exercise(exercise_id)
    text = exercise.solution.read_text()
    assert old in text, f"{exercise_id}'s solution no longer contains {old!r}"
    broken = tmp_path / exercise.source
    broken.write_text(text.replace(old, new, 1))
    return broken


@pytest.mark.slow
def test_checker_stops_a_check_that_never_ends_and_leaves_no_process(tmp_path):
    source = solution_with(
        "ch1/keyword_args",
        tmp_path,
        "  std::vector<double> out(values.size());",
        "  for (volatile int spin = 0; spin >= 0; spin += 0) {\n  }\n"
        "  std::vector<double> out(values.size());",
    )
    result = subprocess.run(
        [sys.executable, str(CHECKER), "ch1/keyword_args", "--source", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, "EXERCISE_CHECK_TIMEOUT": "5"},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^  TIMEOUT  ", result.stdout, flags=re.M), result.stdout
    assert "ch1/keyword_args: NOT YET (timed out)" in result.stdout
    assert processes_mentioning(str(source)) == [], "the checker left its child running"


@pytest.mark.slow
def test_checker_names_the_check_a_crash_happened_in_and_shows_its_stack(tmp_path):
    source = solution_with(
        "ch1/keyword_args",
        tmp_path,
        "  std::vector<double> out(values.size());",
        "  *static_cast<volatile int*>(nullptr) = 0;\n  std::vector<double> out(values.size());",
    )
    result = run_checker("ch1/keyword_args", "--source", str(source))
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^  CRASH  ", result.stdout, flags=re.M), result.stdout
    assert "SIGSEGV" in result.stdout
    # faulthandler in the child: what it printed last is the Python stack at the crash.
    assert "Segmentation fault" in result.stdout.split("What it printed last:")[1], result.stdout


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the verdict without a GPU")
def test_an_empty_cuda_kernel_is_not_graded_without_a_gpu(tmp_path):
    source = solution_with(
        "ch3/gelu",
        tmp_path,
        "  for (int64_t v = first; v < num_vecs; v += stride) {",
        "  return;  // an empty kernel: writes nothing\n"
        "  for (int64_t v = first; v < num_vecs; v += stride) {",
    )
    result = run_checker("ch3/gelu", "--source", str(source))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ch3/gelu: CPU CHECKS PASSED" in result.stdout
    assert "not graded" in result.stdout
    assert "ch3/gelu: PASSED" not in result.stdout


def test_a_misspelt_exercise_gets_a_did_you_mean():
    result = run_checker("ch1/keyword-args")
    assert result.returncode == 3
    assert "did you mean ch1/keyword_args?" in result.stdout
