"""The exercise checker: build your exercise, run its checks, print a verdict per check.

    make check EX=ch3/gelu                        # your file: chapter3_cuda_kernels/exercises/gelu.cu
    make check EX=ch3/gelu SOLUTION=1             # the reference solution instead
    make check EX=ch2                             # every chapter 2 exercise, in turn
    make check EX="ch2/leaky_relu ch3/gelu"       # these two
    python tools/check_exercise.py ch3/gelu --source my_gelu.cu
    python tools/check_exercise.py --list         # every exercise

An exercise `chN/name` lives in chapterN_*/exercises/: `check_name.py` holds its checks (the
specification, read it) and names the file you write (SOURCE, a `TODO` stub until you do); the
reference solution is solutions/chapterN_*/<SOURCE>.

The checks run in a child process, so that a crash in your code still gets a verdict. Several
exercises share one child, one after another: torch is imported once, which saves about 1.3 s an
exercise, most of a check whose build is cached. If one crashes, a new child checks the rest.
(An untouched stub is NOT YET: `make check EX=ch2` before you start lists every one as such.)

Exit status (a script that grades with this counts only 0 as a pass):
    0  passed: every check passed (a check that needs a GPU may be skipped, as chapter 1's are)
    1  not yet: a check failed, crashed or timed out
    2  the build failed, or the built library failed to load
    3  not graded on this machine: a CUDA exercise without a GPU; the CPU checks passed, but the
       kernel did not run, and an empty kernel passes them too
    4  usage: no such exercise or file, or no exercise named (the exercises are listed)
For several exercises, the most serious of theirs: 2, then 1, then 3; 0 if every one passed.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import faulthandler
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # check files import `grading`

# The exit status, as the module docstring lists it.
PASSED, NOT_YET, BUILD_FAILED, NOT_GRADED_HERE, USAGE = 0, 1, 2, 3, 4
VERDICT_NAMES = {  # the summary of several exercises
    PASSED: "PASSED",
    NOT_YET: "NOT YET",
    BUILD_FAILED: "BUILD FAILED",
    NOT_GRADED_HERE: "CPU CHECKS PASSED, not graded here (no GPU)",
}


@dataclass
class Exercise:
    id: str  # "ch3/gelu"
    chapter: Path  # chapter3_cuda_kernels
    check_file: Path  # chapter3_cuda_kernels/exercises/check_gelu.py

    @functools.cached_property
    def check(self) -> ModuleType:
        """The check file, imported (it imports torch: only the child process needs it)."""
        spec = importlib.util.spec_from_file_location(self.check_file.stem, self.check_file)
        check = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(check)
        return check

    @property
    def folder(self) -> Path:
        return self.chapter / "exercises"

    @property
    def source(self) -> str:
        """The check file's SOURCE, read without importing it. The parent process of a check
        (check_all() below) needs only this, and not importing torch there halves a check's time."""
        for node in ast.parse(self.check_file.read_text()).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
                "SOURCE"
            ]:
                return ast.literal_eval(node.value)
        raise LookupError(f"{self.check_file} sets no SOURCE")

    @property
    def solution(self) -> Path:
        return REPO / "solutions" / self.chapter.name / self.source

    @property
    def is_cuda(self) -> bool:
        """A kernel to write or given (a .cu file): its checks need a GPU to grade it."""
        given = getattr(self.check, "GIVEN", [])
        return any(name.endswith(".cu") for name in [self.source, *given])


def all_exercise_ids() -> list[str]:
    ids = []
    for check_file in sorted(REPO.glob("chapter*_*/exercises/check_*.py")):
        number = re.match(r"chapter(\d+)_", check_file.parents[1].name).group(1)
        ids.append(f"ch{number}/{check_file.stem.removeprefix('check_')}")
    return sorted(ids, key=lambda i: (int(i[2 : i.index("/")]), i))


def find_exercise(exercise_id: str) -> Exercise:
    match = re.fullmatch(r"ch(\d+)/(\w+)", exercise_id)
    chapters = list(REPO.glob(f"chapter{match.group(1)}_*")) if match else []
    check_file = chapters[0] / "exercises" / f"check_{match.group(2)}.py" if chapters else None
    if check_file is None or not check_file.exists():
        known = all_exercise_ids()
        close = difflib.get_close_matches(exercise_id, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise LookupError(f"no exercise {exercise_id!r}{hint} There are: {', '.join(known)}")
    return Exercise(exercise_id, chapters[0], check_file)


# ---- building -----------------------------------------------------------------------------------


def exercises_build_root() -> Path:
    """Where the exercises build: beside the chapters' JIT builds, one folder per torch version."""
    import build_utils  # tools/build_utils.py, the chapters' own (imports torch: not at start-up)

    return build_utils.build_root() / "exercises"


class BuildFailed(Exception):
    pass


# Most of a C++ exercise's compile time is spent reading torch's headers, not the exercise: about
# 10 s per file on 2 cores, 4-5 s once those headers are precompiled (a GCC .gch file, parsed once
# and then loaded). A header set is used only for sources that include every header in it
# themselves, so the learner's file sees nothing it would not see in the chapter's own build.
# (A set with chapter 4's torch/csrc/autograd/custom_function.h too saved 1 s more a build, for a
# 449 MB file; these two take 232 and 114 MB of build/.)
PRECOMPILED_SETS = {
    "torch_library": ["ATen/core/Tensor.h", "torch/library.h"],
    "pybind11": ["pybind11/pybind11.h"],
}


def precompiled_header(sources: list[Path], flags: list[str]) -> Path | None:
    """A precompiled header for these C++ sources, built once per compiler and flags (under a
    lock: two checks may start at once), or None: a CUDA source (nvcc has no precompiled headers),
    no set that every source includes, or GCC could not build it (the build then runs without).
    GCC uses a .gch only when the flags that matter match; when they do not, it reads the headers
    as usual, so the result is the same either way, only slower."""
    import sysconfig

    from filelock import FileLock
    from torch.utils.cpp_extension import include_paths

    if any(p.suffix != ".cpp" for p in sources):
        return None
    includes = [
        set(re.findall(r"^\s*#include <([^>]+)>", p.read_text(), flags=re.M)) for p in sources
    ]
    chosen = next(
        (
            name
            for name, headers in PRECOMPILED_SETS.items()
            if all(set(headers) <= i for i in includes)
        ),
        None,
    )
    if chosen is None:
        return None
    compiler = os.environ.get("CXX", "c++")  # what torch's build.ninja runs
    system = [*include_paths(), sysconfig.get_paths()["include"]]
    # The flags of torch's load() for a C++ file, but for the module's name and the learner's
    # folder (neither affects the headers).
    command = [
        compiler,
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        *(arg for path in system for arg in ("-isystem", path)),
        "-fPIC",
        "-std=c++17",
        *flags,
    ]
    key = hashlib.sha1(f"{chosen} {shutil.which(compiler)} {command}".encode()).hexdigest()[:12]
    folder = exercises_build_root() / "precompiled" / f"{chosen}_{key}"
    header = folder / f"{chosen}.h"
    gch = folder / f"{chosen}.h.gch"
    folder.mkdir(parents=True, exist_ok=True)
    failed = folder / "failed.log"  # tried once: not again for every build
    with FileLock(folder.with_suffix(".lock")):
        if not gch.exists() and not failed.exists():
            header.write_text("".join(f"#include <{h}>\n" for h in PRECOMPILED_SETS[chosen]))
            partial = gch.with_suffix(".tmp")
            built = subprocess.run(
                [*command, "-x", "c++-header", str(header), "-o", str(partial)],
                capture_output=True,
                text=True,
            )
            if built.returncode != 0:
                failed.write_text(built.stdout + built.stderr)
            else:
                partial.replace(gch)  # whole or absent
    return header if gch.exists() else None


def compiler_errors(log: str, limit: int = 30) -> str:
    """The compiler's error lines (and the few after each: the code and the caret) out of torch's
    build log, without the compile commands, which run to thousands of characters."""
    lines = [line for line in log.splitlines() if " -isystem " not in line and "[code=" not in line]
    keep: list[str] = []
    for i, line in enumerate(lines):
        if re.search(r"\berror\b|undefined reference|fatal", line, flags=re.I):
            keep.extend(lines[i : i + 4])
        if len(keep) >= limit:
            break
    unique = [line for line in dict.fromkeys(keep) if not line.startswith("ninja: build stopped")]
    return "\n".join(unique[:limit]) or "\n".join(lines[-limit:])


def demangled(message: str) -> str:
    """C++ symbol names (_ZN8ch3_gelu...) as the code spells them, where c++filt is installed."""
    if shutil.which("c++filt") is None:
        return message
    return re.sub(
        r"_Z\w+",
        lambda m: (
            subprocess.run(["c++filt", m[0]], capture_output=True, text=True).stdout.strip() or m[0]
        ),
        message,
    )


def build(exercise: Exercise, source: Path, variant: str) -> object:
    """Compile the exercise's C++/CUDA (the learner's file and any GIVEN files) and return what
    its checks call: the pybind11 module, the `torch.ops.<LIBRARY>` namespace, or, for a Python
    exercise, the imported module."""
    import build_utils  # first: it sets CUDA_HOME, which torch.utils.cpp_extension reads on import

    # isort: split
    import torch
    from filelock import FileLock  # installed with torch, which locks its own builds with it
    from torch.utils.cpp_extension import load

    build_utils.put_ninja_on_path()
    build_utils.default_cuda_arch_list()  # in a plain shell without a GPU, as make sets it

    given = [exercise.folder / name for name in getattr(exercise.check, "GIVEN", [])]
    compiled = [p for p in [source, *given] if p.suffix in (".cpp", ".cu")]
    if any(p.suffix == ".cu" for p in compiled) and not build_utils.can_build_cuda():
        raise BuildFailed("this exercise is CUDA: it needs a CUDA build of torch and nvcc")
    library = getattr(exercise.check, "LIBRARY", None)
    built: object = None
    if compiled:
        # A Python exercise compiles only given files, the same for the stub, the solution and
        # the learner's file: one build serves all three.
        built_for = variant if source in compiled else "given"
        name = f"{exercise.id.replace('/', '_')}_{built_for}"
        directory = exercises_build_root() / name
        # Each run is a new process, and then torch's JIT decides whether to recompile from
        # ninja's file times alone: a file copied over with an older time stamp (cp -p, git
        # checkout, tar) would be graded by the old build. A stamp of the sources' contents
        # decides instead; a different one empties the folder.
        digest = hashlib.sha1(b"".join(p.read_bytes() for p in compiled)).hexdigest()
        stamp = directory / "sources.sha1"
        with_cuda = any(p.suffix == ".cu" for p in compiled)
        # Two checks of one exercise at once (pytest -n 8, two terminals): one builds, the other
        # waits, so that neither empties the folder under the other's compiler. The lock file
        # sits beside the folder, which the stamp check may remove.
        directory.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(directory.with_name(name + ".lock")):
            if directory.exists() and (not stamp.exists() or stamp.read_text() != digest):
                shutil.rmtree(directory)
            directory.mkdir(parents=True, exist_ok=True)
            # -fopenmp: at::parallel_for is a template that splits its range with OpenMP pragmas,
            # and they are compiled into *this* file; without it the range runs on one thread.
            cflags = ["-O3", "-fopenmp"]
            # The C++ files only (a chapter 3 exercise's op; nvcc compiles the .cu without it).
            cpp = [p for p in compiled if p.suffix == ".cpp"]
            header = precompiled_header(cpp, cflags) if cpp else None
            try:
                built = load(
                    name=name,
                    sources=[str(p) for p in compiled],
                    extra_cflags=cflags + (["-include", str(header)] if header else []),
                    extra_cuda_cflags=["-O3", "-lineinfo", "-Xcompiler", "-fopenmp"],
                    extra_ldflags=["-fopenmp"],
                    extra_include_paths=[str(exercise.folder)]
                    + (build_utils.cuda_include_paths() if with_cuda else []),
                    build_directory=str(directory),
                    with_cuda=with_cuda,
                    # A TORCH_LIBRARY registration is loaded as a plain shared library; chapter 1's
                    # pybind11 exercises are Python modules.
                    is_python_module=library is None,
                    verbose=False,
                )
            except Exception as e:  # torch raises RuntimeError with the whole ninja log in it
                # A build that links but does not load (OSError) has the loader's reason in its
                # cause: an undefined symbol, say, for a function the .h declares and no file defines.
                cause = f"\n{demangled(str(e.__cause__))}" if e.__cause__ is not None else ""
                raise BuildFailed(compiler_errors(str(e)) + cause) from None
            stamp.write_text(digest)
        if library is not None:
            built = getattr(torch.ops, library)
    if source.suffix == ".py":
        spec = importlib.util.spec_from_file_location(f"exercise_{source.stem}", source)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            import grading

            raise BuildFailed(f"importing {source.name}: {grading._explain(e)}") from None
        built = module
    return built


# ---- the verdict --------------------------------------------------------------------------------


MARK = "\x1e"  # a line from the child that starts with this is for the parent, not the learner
# Seconds one check may run before the checker stops it (the benchmark gets three times this):
# an infinite loop must end in a verdict, not a terminal that waits forever.
CHECK_TIME_LIMIT_S = float(os.environ.get("EXERCISE_CHECK_TIMEOUT", "120"))


def stop_process_group(process: subprocess.Popen) -> None:
    """Kill the child and everything it started (a compiler, a worker): its whole group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@dataclass
class Job:
    """One exercise to check: which, the file to build, and which build folder it gets."""

    exercise_id: str
    source: Path
    variant: str  # "solution", "exercise", or "file_<hash>" for --source


@dataclass
class Verdict:
    status: int  # the exit status, as the module docstring lists it
    output: str  # what the check printed, as the learner saw it


def check_all(jobs: list[Job], flags: list[str], echo: bool = True) -> list[Verdict]:
    """Build and check each job in a child process, one after another in the same child (torch
    is imported once), and return a verdict per job. Learner code can end a process where Python
    cannot catch it: a registration that throws while the library loads (std::terminate), a
    segfault, a callback without the GIL. Then the child dies, this process still gives that job
    a verdict, naming the check that was running, and a new child takes the jobs left.
    echo=False collects each job's output without printing it (a script's or a test's use)."""
    verdicts: list[Verdict] = []
    while len(verdicts) < len(jobs):
        verdicts += _run_child(jobs[len(verdicts) :], flags, echo, first=not verdicts)
    return verdicts


def _run_child(jobs: list[Job], flags: list[str], echo: bool, first: bool) -> list[Verdict]:
    """One child process for these jobs: the verdicts of those it finished, and of the one it
    died in, if it died in one (none, if it ended between two: a new child takes the rest)."""
    verdicts: list[Verdict] = []
    lines: list[str] = []  # the current job's output
    started = False  # whether the current job has begun

    def say(text: str) -> None:
        lines.append(text)
        if echo:
            print(text, end="", flush=True)

    job_args = [a for j in jobs for a in ("--job", j.exercise_id, str(j.source), j.variant)]
    with tempfile.TemporaryFile(mode="w+") as stderr:
        # A process group of its own: a timeout or a Ctrl-C here stops the child and all it
        # started, and nothing is left running on the learner's machine.
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", *job_args, *flags],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
        built, running, limit = False, None, CHECK_TIME_LIMIT_S
        start = time.perf_counter()
        deadline: list[float | None] = [None]  # when the running check must have ended
        timed_out = threading.Event()

        def watchdog() -> None:
            while child.poll() is None:
                if deadline[0] is not None and time.monotonic() > deadline[0]:
                    timed_out.set()
                    stop_process_group(child)
                    return
                time.sleep(0.1)

        threading.Thread(target=watchdog, daemon=True).start()
        # A SIGTERM (a CI job cancelled, `timeout`) ends this process through the finally below,
        # which stops the child too: in its own session, it would not get the signal itself.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
        try:
            for line in child.stdout:
                if line.startswith(MARK + "start"):
                    job = jobs[len(verdicts)]
                    shown = (
                        job.source.relative_to(REPO)
                        if job.source.is_relative_to(REPO)
                        else job.source
                    )
                    if echo and not (first and not verdicts):
                        print()  # between two exercises
                    say(f"== {job.exercise_id}: {shown}\n")
                    started, built, running, start = True, False, None, time.perf_counter()
                elif line.startswith(MARK + "built"):
                    built = True
                elif line.startswith(MARK + "done"):
                    deadline[0] = None
                elif line.startswith(MARK + "running "):
                    running = line.removeprefix(MARK + "running ").strip()
                    limit = CHECK_TIME_LIMIT_S * (3 if running == "benchmark" else 1)
                    deadline[0] = time.monotonic() + limit
                elif line.startswith(MARK + "verdict "):
                    verdicts.append(Verdict(int(line.split()[1]), "".join(lines)))
                    lines.clear()
                    started = False
                else:
                    say(line)
            returncode = child.wait()
        except KeyboardInterrupt:
            stopped = jobs[min(len(verdicts), len(jobs) - 1)].exercise_id
            print(f"\n{stopped}: interrupted; the check and all it started are stopped")
            sys.exit(130)
        finally:
            if child.poll() is None:
                stop_process_group(child)
        if len(verdicts) == len(jobs) or (verdicts and not started):
            return verdicts  # all done, or it ended between two jobs: a new child takes the rest
        stderr.seek(0)
        # The child marks where each job's errors begin: this job's are after the last mark.
        errors = stderr.read().rsplit(MARK + "start\n", 1)[-1]
    exercise_id = jobs[len(verdicts)].exercise_id
    # The C++ message, without the stack of frames that c10 appends to it.
    errors = re.split(r"^(?:Exception raised from|frame #0)", errors, maxsplit=1, flags=re.M)[0]
    shown = [line for line in errors.strip().splitlines() if "No CUDA runtime is found" not in line]
    why = f"signal {-returncode}" if returncode < 0 else f"exit {returncode}"
    with contextlib.suppress(ValueError):
        why += f", {signal.Signals(-returncode).name}"
    if not started:  # it ended before its first job began: Python or torch, not the exercise
        say(f"== {exercise_id}\n")
        say(f"CHECKER FAILED: its child process ended ({why}) before the build began:\n")
        say("\n".join(shown[-20:]) + "\n")
        return [Verdict(BUILD_FAILED, "".join(lines))]
    if timed_out.is_set():
        say(f"  TIMEOUT  {running}\n")
        say(
            f"        no verdict after {limit:.0f} s in this check: an infinite loop, or a kernel "
            "that never ends? The check was stopped (EXERCISE_CHECK_TIMEOUT sets the limit).\n"
        )
        say(f"{exercise_id}: NOT YET (timed out). Look for a loop that cannot end.\n")
        return [*verdicts, Verdict(NOT_YET, "".join(lines))]
    elapsed = time.perf_counter() - start
    if not built:
        say(f"LOADING FAILED after {elapsed:.1f} s ({why}): it compiled, and loading it threw:\n")
        say("\n".join(shown[-20:]) + "\n")
        return [*verdicts, Verdict(BUILD_FAILED, "".join(lines))]
    say(f"  CRASH  {running or 'after the last check above'}\n")
    say(f"        the process died ({why}) in this check. What it printed last:\n")
    # faulthandler's report lists the newest frame first: show it from its top.
    top = next((i for i, line in enumerate(shown) if line.startswith("Fatal Python error")), None)
    shown = shown[top : top + 16] if top is not None else shown[-12:]
    say("\n".join(f"        {line}" for line in shown) + "\n")
    say(f"{exercise_id}: NOT YET (it crashed). Fix the crash first.\n")
    return [*verdicts, Verdict(NOT_YET, "".join(lines))]


def cuda_left_broken() -> bool:
    """Whether a kernel of the last exercise left this process's CUDA context unusable (an
    illegal address is sticky: every later CUDA call fails). Then the child stops, and a new one
    checks the next exercise."""
    import torch

    if not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
    except RuntimeError:
        return True
    return False


def check_in_this_process(exercise_id: str, source: Path, variant: str, benchmark: bool) -> int:
    """The child's side of check_all(), for one job: build, then print each check's verdict as it comes."""
    import grading  # imports torch: here, in the child, and never in the parent

    exercise = find_exercise(exercise_id)
    start = time.perf_counter()
    try:
        ops = build(exercise, source.resolve(), variant)
    except BuildFailed as e:
        print(f"BUILD FAILED after {time.perf_counter() - start:.1f} s:\n{e}")
        return BUILD_FAILED
    print(f"built in {time.perf_counter() - start:.1f} s")
    print(MARK + "built", flush=True)
    grading.LEARNER_FILES.add(str(source.resolve()))

    def show(outcome: grading.Outcome) -> grading.Outcome:
        print(f"  {outcome.status}  {outcome.name}")
        if outcome.detail and outcome.status != "SKIP":
            print(f"        {outcome.detail}")
        return outcome

    def before(name: str) -> None:
        print(MARK + "running " + name, flush=True)

    outcomes = [show(o) for o in grading.run_checks(exercise.check, ops, before)]
    if benchmark and hasattr(exercise.check, "benchmark"):
        if any(o.status == "FAIL" for o in outcomes) and not grading.cuda_skip_reason():
            # A wrong op is often a fast one (a stub's kernel does nothing): no speed verdict.
            outcomes.append(
                show(grading.Outcome("benchmark", "SKIP", "fix the failing checks first"))
            )
        else:
            before("benchmark")
            outcomes += [show(o) for o in grading.run_benchmark(exercise.check, ops)]
    print(MARK + "done", flush=True)  # the checks are over: no time limit from here
    failed = [o for o in outcomes if o.status == "FAIL"]
    skipped = [o for o in outcomes if o.status == "SKIP"]
    passed = len(outcomes) - len(failed) - len(skipped)
    summary = f"{passed} passed, {len(failed)} failed, {len(skipped)} skipped"
    for reason in dict.fromkeys(o.detail for o in skipped):
        print(f"skipped: {reason}")
    if failed:
        print(f"{exercise_id}: NOT YET ({summary}). Start with the first FAIL above.")
        return NOT_YET
    if exercise.is_cuda and grading.cuda_skip_reason():
        # The CPU checks say nothing of the kernel: an empty one passes them too.
        print(
            f"{exercise_id}: CPU CHECKS PASSED ({summary}). The CUDA kernel compiled but did not "
            "run here (no GPU): it is not graded until make check runs on a GPU machine. "
            f"Exit status {NOT_GRADED_HERE}."
        )
        return NOT_GRADED_HERE
    print(f"{exercise_id}: PASSED ({summary})")
    return PASSED


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A wrong argument exits with USAGE, not argparse's 2, which here means the build failed."""
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def file_variant(source: Path) -> str:
    """The build folder's suffix for a file named with --source: one folder per file, so that two
    files checked in turn do not rebuild each other."""
    return "file_" + hashlib.sha1(str(source.resolve()).encode()).hexdigest()[:8]


def expand(names: list[str]) -> list[str]:
    """Exercise ids, with a chapter ("ch2") standing for all of its exercises."""
    ids = []
    for name in names:
        whole_chapter = [i for i in all_exercise_ids() if i.startswith(name + "/")]
        ids += whole_chapter if re.fullmatch(r"ch\d+", name) and whole_chapter else [name]
    return list(dict.fromkeys(ids))


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="exit status: 0 passed, 1 not yet, 2 build failed, 3 not graded on this machine "
        "(a CUDA exercise without a GPU), 4 usage; for several exercises the most serious of "
        "theirs (2, 1, 3), 0 if every one passed",
    )
    parser.add_argument(
        "exercise", nargs="*", help="e.g. ch3/gelu, several, or a chapter: ch3 (all of its)"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--solution", action="store_true", help="check the reference solution")
    which.add_argument("--source", type=Path, help="check this file instead of the exercise's")
    parser.add_argument("--no-benchmark", action="store_true", help="skip the GPU benchmark")
    parser.add_argument(
        "--small",
        action="store_true",
        help="skip the large checks and the benchmark (for a run under compute-sanitizer)",
    )
    parser.add_argument("--list", action="store_true", help="list the exercises")
    # The child process of check_all(): the jobs it runs, each EXERCISE SOURCE VARIANT.
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--job", nargs=3, action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        # A crash in the learner's code (SIGSEGV, SIGABRT) prints the Python stack to stderr,
        # which the parent shows: the check that was running, and the line in it.
        faulthandler.enable()
        if args.small:
            os.environ["EXERCISE_CHECK_SMALL"] = "1"
        benchmark = not (args.no_benchmark or args.small)
        for exercise_id, source, variant in args.job:
            print(MARK + "start", file=sys.stderr, flush=True)  # where its errors begin
            print(MARK + "start", flush=True)
            status = check_in_this_process(exercise_id, Path(source), variant, benchmark)
            print(MARK + f"verdict {status}", flush=True)
            if cuda_left_broken():
                break
        return PASSED
    if args.list or not args.exercise:
        if not args.list:
            parser.print_usage()
        print("\n".join(all_exercise_ids()))
        return PASSED if args.list else USAGE
    ids = expand(args.exercise)
    if args.source and len(ids) > 1:
        parser.error(f"--source names one file, for one exercise; got {len(ids)}: {' '.join(ids)}")
    jobs = []
    for exercise_id in ids:
        try:
            exercise = find_exercise(exercise_id)
        except LookupError as e:
            print(e)
            return USAGE
        if args.source:
            source, variant = args.source, file_variant(args.source)
        elif args.solution:
            source, variant = exercise.solution, "solution"
        else:
            source, variant = exercise.folder / exercise.source, "exercise"
        if not source.exists():
            print(f"{exercise_id}: {source} does not exist")
            return USAGE
        jobs.append(Job(exercise_id, source.resolve(), variant))
    flags = [f for f in ("--no-benchmark", "--small") if getattr(args, f[2:].replace("-", "_"))]
    verdicts = check_all(jobs, flags)
    if len(jobs) > 1:
        print(f"\n{len(jobs)} exercises:")
        for job, verdict in zip(jobs, verdicts, strict=True):
            print(f"  {job.exercise_id:20} {VERDICT_NAMES[verdict.status]}")
    return overall_status([v.status for v in verdicts])


def overall_status(statuses: list[int]) -> int:
    """Several exercises' exit status: the most serious of theirs, a build that failed, then a
    check that failed, then a kernel not graded here; 0 only if every one passed."""
    return max(statuses, key=[PASSED, NOT_GRADED_HERE, NOT_YET, BUILD_FAILED].index)


if __name__ == "__main__":
    sys.exit(main())
