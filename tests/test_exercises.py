"""Every exercise is solvable and its checks can fail: the reference solution passes the checker
(`tools/check_exercise.py`, what `make check EX=...` runs) and the untouched TODO stub fails it.

The checker's checks run in its child processes, as for a learner: the solutions in some
children and the stubs in others, side by side, one child per core (each exercise registers its
ops under a fixed name, so a stub and its solution cannot be loaded into one process), and the
tests then read their results.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECKER = REPO / "tools" / "check_exercise.py"
sys.path.insert(0, str(CHECKER.parent))

import check_exercise  # noqa: E402
import grading  # noqa: E402
import torch  # noqa: E402

EXERCISES = check_exercise.all_exercise_ids()
# The exercises with a kernel (a .cu file): without a GPU the checker cannot grade them.
CUDA_EXERCISES = [ex for ex in EXERCISES if check_exercise.find_exercise(ex).is_cuda]
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


@pytest.fixture(scope="session")
def checker_runs() -> dict[tuple[str, str], subprocess.CompletedProcess]:
    """(exercise, "solution" or "stub") -> the checker's result, for every exercise. Without the
    benchmarks: runs side by side would share the GPU and slow each other down.

    Once per test run, whatever the number of processes: the first process to ask runs the
    checker (32 builds, one child process per core) and writes the results to build/, under a
    lock; another pytest-xdist worker of the same run waits on the lock and reads them. (Grouping the tests on one worker
    is not enough: under pytest -n the slow tests run first and the group's tests, spread among
    the others, were seen set up on two workers, each paying the 32 builds.)"""
    from filelock import FileLock  # installed with torch

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", f"pid{os.getpid()}")
    shared = REPO / "build" / "exercise_checker_runs.json"
    shared.parent.mkdir(exist_ok=True)
    with FileLock(f"{shared}.lock"):
        if shared.exists() and json.loads(shared.read_text())["run"] == run:
            saved = json.loads(shared.read_text())["results"]
            return {
                tuple(key.split("|")): subprocess.CompletedProcess(
                    [], r["returncode"], r["stdout"], r["stderr"]
                )
                for key, r in saved.items()
            }
        # Child processes side by side, one per core, each checking its share of the jobs one
        # after another and importing torch once. A stub and its solution register the same op
        # names, so they never share a child: half the children take the solutions, half the
        # stubs (on 2 cores, one child each; on the GPU machine's 16, eight and eight, so that
        # the builds still run 16 at once).
        stubs = {ex: pristine_stub(ex) for ex in EXERCISES}
        Job = check_exercise.Job
        kinds = {
            "solution": [
                Job(ex, check_exercise.find_exercise(ex).solution, "solution") for ex in EXERCISES
            ],
            "stub": [
                Job(ex, stubs[ex], check_exercise.file_variant(stubs[ex])) for ex in EXERCISES
            ],
        }
        per_kind = max(1, (os.cpu_count() or 1) // 2)
        batches = [
            (kind, jobs[i::per_kind]) for kind, jobs in kinds.items() for i in range(per_kind)
        ]
        batches = [(kind, jobs) for kind, jobs in batches if jobs]
        with ThreadPoolExecutor(max_workers=len(batches)) as pool:
            verdicts = pool.map(
                lambda batch: check_exercise.check_all(batch[1], ["--no-benchmark"], echo=False),
                batches,
            )
            results = {
                (job.exercise_id, kind): subprocess.CompletedProcess([], v.status, v.output, "")
                for (kind, jobs), batch_verdicts in zip(batches, verdicts, strict=True)
                for job, v in zip(jobs, batch_verdicts, strict=True)
            }
        saved = {
            "|".join(job): {"returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr}
            for job, r in results.items()
        }
        shared.write_text(json.dumps({"run": run, "results": saved}))
        return results


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


@pytest.mark.slow
@SHARES_CHECKER_RUNS
@pytest.mark.parametrize("exercise_id", ["ch1/errors", "ch2/leaky_relu", "ch3/gelu", "ch5/schema"])
def test_a_cpp_exercise_compiles_with_its_precompiled_header(exercise_id, checker_runs):
    """The checker's -include of torch's (or pybind11's) headers, precompiled, is the point only
    if GCC uses the .gch: it silently reads the headers instead when a flag that matters differs
    from the one the .gch was made with. This runs the build's own compile command, with -H (GCC
    marks a precompiled header it loads with "!"). A chapter 3 exercise's C++ file is its given
    op (the learner's .cu is nvcc's), built with CUDA's include paths as well."""
    # 3: a CUDA exercise on a machine without a GPU, built but not graded.
    assert checker_runs[(exercise_id, "solution")].returncode in (0, 3)
    folder = check_exercise.exercises_build_root() / f"{exercise_id.replace('/', '_')}_solution"
    ninja = (folder / "build.ninja").read_text()
    cflags = re.search(r"^cflags = (.*)$", ninja, flags=re.M).group(1)
    assert "-include " in cflags, cflags
    exercise = check_exercise.find_exercise(exercise_id)
    given = [exercise.folder / name for name in getattr(exercise.check, "GIVEN", [])]
    source = next(p for p in [exercise.solution, *given] if p.suffix == ".cpp")
    compiler = os.environ.get("CXX", "c++")
    result = subprocess.run(
        f"{compiler} {cflags} -Winvalid-pch -fsyntax-only -H {source}",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"^! \S+\.h\.gch$", result.stderr, flags=re.M), result.stderr[:3000]


def test_no_precompiled_header_for_cuda_or_a_file_that_includes_less(tmp_path):
    cuda = tmp_path / "kernel.cu"
    cuda.write_text("#include <ATen/core/Tensor.h>\n#include <torch/library.h>\n")
    assert check_exercise.precompiled_header([cuda], ["-O3"]) is None
    # Without torch/library.h a set would show the learner's file a header it never included.
    narrow = tmp_path / "narrow.cpp"
    narrow.write_text("#include <ATen/core/Tensor.h>\nint f();\n")
    assert check_exercise.precompiled_header([narrow], ["-O3"]) is None


# What a chapter 3 exercise's kernel file and its header may include: CUDA's runtime, the C++
# library, c10's scalar types and ATen's header-only OpMathType.h. Torch's other headers (the
# tensor, the dispatcher, torch/library.h) belong in the given <name>_op.cpp: in the .cu they
# made nvcc's build four times slower (chapter 3's lesson, "Exercises").
KERNEL_FILE_INCLUDES = {
    "cuda_runtime.h",
    "cuda_runtime_api.h",
    "algorithm",
    "cstdint",
    "limits",
    "ATen/OpMathType.h",
    "c10/util/BFloat16.h",
    "c10/util/Half.h",
}


@pytest.mark.parametrize("exercise_id", CUDA_EXERCISES)
def test_a_cuda_exercise_kernel_file_includes_no_torch_header(exercise_id):
    exercise = check_exercise.find_exercise(exercise_id)
    header = exercise.folder / exercise.source.replace(".cu", ".h")
    for path in (exercise.folder / exercise.source, exercise.solution, header):
        system = set(re.findall(r"^#include <([^>]+)>", path.read_text(), flags=re.M))
        local = set(re.findall(r'^#include "([^"]+)"', path.read_text(), flags=re.M))
        assert system <= KERNEL_FILE_INCLUDES, (
            f"{path.name} includes {system - KERNEL_FILE_INCLUDES}"
        )
        assert local <= {header.name}, f"{path.name} includes {local - {header.name}}"


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
    # Without a GPU, a CUDA exercise's kernel does not run: passed on the CPU, not graded (3).
    ungraded = exercise_id in CUDA_EXERCISES and grading.cuda_skip_reason() is not None
    expected = check_exercise.NOT_GRADED_HERE if ungraded else check_exercise.PASSED
    assert result.returncode == expected, result.stdout + result.stderr
    verdict = "CPU CHECKS PASSED" if ungraded else "PASSED"
    assert f"{exercise_id}: {verdict} (" in result.stdout, result.stdout
    assert "  FAIL  " not in result.stdout


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the verdict without a GPU")
@SHARES_CHECKER_RUNS
@pytest.mark.parametrize("exercise_id", CUDA_EXERCISES)
def test_cuda_solution_without_a_gpu_exits_3_not_graded(exercise_id, checker_runs):
    """A script that grades by exit status must not count a kernel that never ran as a pass."""
    result = checker_runs[(exercise_id, "solution")]
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"{exercise_id}: CPU CHECKS PASSED" in result.stdout
    assert "not graded until make check runs on a GPU machine. Exit status 3." in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the build without a GPU")
def test_a_cuda_exercise_builds_from_a_plain_shell_without_a_gpu():
    """Without make's TORCH_CUDA_ARCH_LIST and no GPU to ask, torch's build fails with "list
    index out of range"; the checker sets the course's default, as make does."""
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME")}
    result = subprocess.run(
        [sys.executable, str(CHECKER), CUDA_EXERCISES[0], "--no-benchmark", "--solution"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "list index out of range" not in result.stdout


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
    # The lesson is README.md, or README.md and its parts (chapter 5: part1_operators.md, ...).
    pages = [chapter / "README.md", *sorted(chapter.glob("part*.md"))]
    sections = [page.read_text().split("\n## Exercises", 1) for page in pages]
    exercises_section = "\n".join(s[1].split("\n## ", 1)[0] for s in sections if len(s) == 2)
    assert exercises_section, f"{chapter.name}'s lesson has no Exercises section"
    number = re.match(r"chapter(\d+)_", chapter.name).group(1)
    for check_file in sorted((chapter / "exercises").glob("check_*.py")):
        command = f"make check EX=ch{number}/{check_file.stem.removeprefix('check_')}"
        assert command in exercises_section, f"{chapter.name}'s lesson does not state {command}"


def test_unknown_exercise_lists_the_real_ones():
    result = run_checker("ch9/nothing")
    assert result.returncode == check_exercise.USAGE == 4
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


def solution_with(exercise_id: str, label: str, old: str, new: str) -> Path:
    """The reference solution with `old` replaced by `new`, written to build/broken/<label>/.
    A fixed path, written only when its text changes: the checker names a file's build after
    its path and rebuilds it when the text changes, so a second `make test` reuses the build
    (a CUDA one takes 10 s on two cores) instead of compiling a new temporary copy."""
    exercise = check_exercise.find_exercise(exercise_id)
    text = exercise.solution.read_text()
    assert old in text, f"{exercise_id}'s solution no longer contains {old!r}"
    broken = REPO / "build" / "broken" / label / exercise.source
    broken.parent.mkdir(parents=True, exist_ok=True)
    text = text.replace(old, new, 1)
    if not broken.exists() or broken.read_text() != text:
        broken.write_text(text)
    return broken


@pytest.mark.slow
def test_a_build_that_does_not_load_names_the_missing_function():
    """A function declared and called but defined nowhere links into a shared library and fails
    only when it loads: the checker shows the loader's reason, with the C++ name."""
    source = solution_with(
        "ch2/leaky_relu",
        "undefined_function",
        "at::Tensor leaky_relu(const at::Tensor& x_in, double negative_slope) {",
        "double declared_only(double slope);\n\n"
        "at::Tensor leaky_relu(const at::Tensor& x_in, double negative_slope) {\n"
        "  negative_slope = declared_only(negative_slope);",
    )
    result = run_checker("ch2/leaky_relu", "--source", str(source))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "BUILD FAILED" in result.stdout and "undefined symbol" in result.stdout, result.stdout
    if shutil.which("c++filt"):
        assert "declared_only(double)" in result.stdout, result.stdout


@pytest.mark.slow
def test_checker_stops_a_check_that_never_ends_and_leaves_no_process():
    source = solution_with(
        "ch1/keyword_args",
        "never_ends",
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
def test_a_crash_names_its_check_and_the_next_exercise_is_checked_in_a_new_child():
    source = solution_with(
        "ch1/keyword_args",
        "crash",
        "  std::vector<double> out(values.size());",
        "  *static_cast<volatile int*>(nullptr) = 0;\n  std::vector<double> out(values.size());",
    )
    Job = check_exercise.Job
    crashed, after = check_exercise.check_all(
        [
            Job("ch1/keyword_args", source, check_exercise.file_variant(source)),
            Job("ch1/errors", check_exercise.find_exercise("ch1/errors").solution, "solution"),
        ],
        ["--no-benchmark"],
        echo=False,
    )
    assert crashed.status == check_exercise.NOT_YET, crashed.output
    assert re.search(r"^  CRASH  ", crashed.output, flags=re.M), crashed.output
    assert "SIGSEGV" in crashed.output
    # faulthandler in the child: what it printed last is the Python stack at the crash.
    assert "Segmentation fault" in crashed.output.split("What it printed last:")[1], crashed.output
    assert after.status == check_exercise.PASSED, after.output
    assert after.output.startswith("== ch1/errors: ") and "ch1/errors: PASSED (" in after.output


@pytest.mark.slow
@SHARES_CHECKER_RUNS
def test_a_chapter_names_all_its_exercises_and_gets_a_summary(checker_runs):
    """make check EX=ch1: every chapter 1 exercise, one after another (built by checker_runs)."""
    result = run_checker("ch1", "--solution", "--no-benchmark")
    assert result.returncode == 0, result.stdout + result.stderr
    chapter = [ex for ex in EXERCISES if ex.startswith("ch1/")]
    assert re.findall(r"^== (ch1/\w+): ", result.stdout, flags=re.M) == chapter, result.stdout
    summary = result.stdout.split(f"{len(chapter)} exercises:\n")[1]
    assert [line.split() for line in summary.splitlines()] == [[ex, "PASSED"] for ex in chapter]


@pytest.mark.slow
@pytest.mark.cuda
def test_an_empty_cuda_kernel_fails_the_checks_on_a_gpu():
    """An empty kernel passes every CPU check: the CPU loop and the kernel share only the formula.
    Without a GPU the checker therefore says "not graded" (exit 3) for it exactly as for the
    solution (test_cuda_solution_without_a_gpu_exits_3_not_graded), which is why it may not say
    "passed"; on a GPU the kernel's own checks catch it."""
    source = solution_with(
        "ch3/gelu",
        "empty_kernel",
        "  for (int64_t v = first; v < num_vecs; v += stride) {",
        "  return;  // an empty kernel: writes nothing\n"
        "  for (int64_t v = first; v < num_vecs; v += stride) {",
    )
    result = run_checker("ch3/gelu", "--source", str(source), "--no-benchmark")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ch3/gelu: NOT YET" in result.stdout
    assert re.search(r"^  FAIL  .*cuda", result.stdout, flags=re.M), result.stdout


def test_several_exercises_exit_with_the_most_serious_status():
    status = check_exercise.overall_status
    assert status([0, 0]) == 0
    assert status([3, 0, 3]) == 3  # CUDA exercises without a GPU, the rest passed
    assert status([3, 1, 0]) == 1  # a failed check outranks "not graded here", wherever it is
    assert status([1, 2, 3]) == 2


def test_source_with_several_exercises_is_a_usage_error():
    result = run_checker("ch1", "--source", "my_file.cpp")
    assert result.returncode == 4
    assert "--source names one file, for one exercise; got 4: ch1/errors" in result.stderr


def test_a_misspelt_exercise_gets_a_did_you_mean():
    result = run_checker("ch1/keyword-args")
    assert result.returncode == 4
    assert "did you mean ch1/keyword_args?" in result.stdout


# ---- the exit status, and make check: what a script (or a learner) sees -------------------------


@pytest.mark.parametrize(
    ("exercise_id", "expected"),
    [("ch3/gelu", 3), ("ch2/leaky_relu", 0)],
    ids=["cuda-exercise-not-graded", "cpp-exercise-passed"],
)
def test_cpu_checks_passing_without_a_gpu_exit_3_only_for_a_cuda_exercise(
    exercise_id, expected, monkeypatch, capsys
):
    """The verdict without building or a GPU: every check that ran passed, the CUDA ones were
    skipped. A CUDA exercise's kernel did not run, so it is not graded (3); a C++ one passed."""
    no_gpu = "no CUDA device here"
    monkeypatch.setattr(grading, "cuda_skip_reason", lambda: no_gpu)
    monkeypatch.setattr(check_exercise, "build", lambda exercise, source, variant: None)
    outcomes = [grading.Outcome("op [cpu]", "PASS"), grading.Outcome("op [cuda]", "SKIP", no_gpu)]
    monkeypatch.setattr(grading, "run_checks", lambda module, ops, before: iter(outcomes))
    solution = check_exercise.find_exercise(exercise_id).solution
    status = check_exercise.check_in_this_process(exercise_id, solution, "solution", False)
    out = capsys.readouterr().out
    assert status == expected, out
    if expected == 3:
        assert f"{exercise_id}: CPU CHECKS PASSED (1 passed, 0 failed, 1 skipped)" in out
        assert "not graded until make check runs on a GPU machine. Exit status 3." in out
    else:
        assert f"{exercise_id}: PASSED (1 passed, 0 failed, 1 skipped)" in out


def run_make_check(*variables: str) -> subprocess.CompletedProcess:
    """`make -s check VARIABLES...` as a learner types it, from the repository root; not inside
    the make that may be running these tests (its MAKEFLAGS would pass its variables on)."""
    make_own = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    env = {k: v for k, v in os.environ.items() if k not in make_own}
    return subprocess.run(
        ["make", "-s", "check", *variables],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_make_check_without_ex_lists_the_exercises_and_succeeds():
    result = run_make_check(f"PY={sys.executable}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "usage: make check EX=ch3/gelu [SOLUTION=1] (EX=ch3: every chapter 3 exercise); the exercises:"
        in (result.stdout)
    )
    assert result.stdout.split("the exercises:\n", 1)[1].split() == EXERCISES
    assert "Error" not in result.stderr, result.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_make_check_fails_with_the_checkers_exit_status(tmp_path):
    """make exits 2 for any failed command, and names the checker's status in its Error line. A
    stand-in for python that exits 3 (not graded here) shows what make passes to the checker."""
    fake_python = tmp_path / "python"
    fake_python.write_text('#!/bin/sh\necho "checker called with: $*"\nexit 3\n')
    fake_python.chmod(0o755)
    result = run_make_check("EX=ch3/gelu", "SOLUTION=1", f"PY={fake_python}")
    assert "checker called with: tools/check_exercise.py ch3/gelu --solution" in result.stdout
    assert result.returncode == 2, result.stdout + result.stderr
    assert re.search(r"\[Makefile:\d+: check\] Error 3$", result.stderr, flags=re.M), result.stderr


# ---- the labels of the checks' messages ---------------------------------------------------------


def clamp_scale_without_bounds(
    values: list[float], factor: float = 2.0, *, lo: float = -math.inf, hi: float = math.inf
) -> list[float]:
    """A wrong ch1/keyword_args: the signature is right, lo and hi are ignored."""
    return [v * factor for v in values]


def test_a_failed_keyword_args_check_names_the_call_with_its_values():
    check = check_exercise.find_exercise("ch1/keyword_args").check
    ops = SimpleNamespace(clamp_scale=clamp_scale_without_bounds)
    details = {o.name: o.detail for o in grading.run_checks(check, ops) if o.status == "FAIL"}
    keyword_only = details[grading._describe(check.check_lo_and_hi_are_keyword_only, None)]
    assert keyword_only.startswith("clamp_scale([5 floats], 2.0, lo=-1.0, hi=1.0): "), keyword_only
    # No label anywhere shows an argument without its value, as "lo=, hi=" did.
    assert not [d for d in details.values() if re.search(r"\w=[,)]", d)], details
