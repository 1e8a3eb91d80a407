"""make gpu-check / make gpu-bench: every GPU claim of the course checked, on a machine with a GPU.

    make gpu-check                    # build, tests, sanitizers (under 8 minutes on 16 cores)
    make gpu-bench                    # every chapter's benchmark.py and Nsight Compute profile
    make gpu-check PY=python3         # with an interpreter that already has torch (the GPU machine)
    python tools/gpu_check.py --out DIR --skip-sanitizer --skip-benchmarks

Steps: the environment (make doctor's report; an error stops the run, except a $CXX that links
libstdc++ statically, for which the run takes the doctor's fix, CXX=c++, and says so), build every
chapter (all at once, MAX_JOBS jobs each), run all tests with CUDA (the exercises' checker
included) over --workers pytest-xdist workers, and beside them the tests marked `sanitize` and
the CUDA exercises' solutions (`--small`) under each compute-sanitizer tool (four runs at once);
then, unless --skip-benchmarks, run every chapter's benchmark.py, and its profile_kernels.py under
Nsight Compute where it has one (--only-benchmarks: just those). Writes gpu_check.json and
gpu_check.md (device, versions, date, each step's result and seconds) and the benchmarks' own
tables to --out (default: $OUT if set, else docs/perf/). Exits non-zero if any step failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in REPO.glob("chapter*_*") if p.is_dir())
SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# Nsight Compute over a chapter's profile_kernels.py: the sections its lesson reads. No clock
# control: ncu would otherwise lock the clocks to base, and the lesson compares with benchmarks
# taken at the clocks the GPU runs at.
NCU_ARGS = [
    "--clock-control",
    "none",
    # profile_kernels.py marks the launches to profile (torch.cuda.profiler.start/stop)
    "--profile-from-start",
    "off",
    "-k",
    "regex:fused_bias_relu|sum_v|reduce_kernel|triton",
    "--section",
    "SpeedOfLight",
    "--section",
    "LaunchStats",
    "--section",
    "Occupancy",
    "--section",
    "WarpStateStats",
    "--metrics",
    "smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum",
]


def load_doctor():
    spec = importlib.util.spec_from_file_location("doctor", REPO / "tools" / "doctor.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["doctor"] = module
    spec.loader.exec_module(module)
    return module


# Steps running side by side write their output to the log one at a time, each in one piece.
_log_lock = threading.Lock()


def run_step(
    name: str,
    command: list[str],
    log: Path,
    timeout_s: int = 3600,
    env: dict | None = None,
    stream: bool = True,
) -> dict:
    """Run one command, stream its output to the terminal and the log, return its result.
    A step still running after timeout_s is killed and counts as failed (exit 124). With
    stream=False (steps running side by side) the output goes to the log in one piece at the
    end, and the terminal gets the step's last lines."""
    print(f"\n==== {name}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    lines: list[str] = []
    header = f"\n==== {name}: {' '.join(command)}\n"
    with log.open("a") as log_file:
        if stream:
            log_file.write(header)
        process = subprocess.Popen(
            command,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )

        def copy_output() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                if stream:
                    sys.stdout.write(line)
                    log_file.write(line)
                lines.append(line.rstrip("\n"))

        reader = threading.Thread(target=copy_output, daemon=True)
        reader.start()
        try:
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            returncode = 124
            lines.append(f"killed after {timeout_s} s")
        reader.join(timeout=10)
    seconds = time.perf_counter() - start
    if not stream:
        with _log_lock, log.open("a") as log_file:
            log_file.write(header + "".join(line + "\n" for line in lines))
        print("\n".join(f"[{name}] {line}" for line in lines[-5:]), flush=True)
    status = "passed" if returncode == 0 else f"FAILED (exit {returncode})"
    print(f"==== {name}: {status} in {seconds:.1f} s", flush=True)
    return {
        "step": name,
        "returncode": returncode,
        "seconds": round(seconds, 1),
        "tail": lines[-5:],
    }


def run_side_by_side(jobs: list[dict], log: Path, at_once: int) -> list[dict]:
    """run_step(**job) for every job, `at_once` at a time; the results in the jobs' order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=at_once) as pool:
        futures = [pool.submit(run_step, log=log, stream=False, **job) for job in jobs]
        return [f.result() for f in futures]


def cuda_exercises() -> list[str]:
    """The exercises with a .cu file (chN/name), from their check files' SOURCE and GIVEN."""
    found = []
    for check_file in sorted(REPO.glob("chapter*_*/exercises/check_*.py")):
        text = check_file.read_text()
        if re.search(r"^(SOURCE|GIVEN) = .*\.cu\b", text, flags=re.M):
            number = re.match(r"chapter(\d+)_", check_file.parents[1].name).group(1)
            found.append(f"ch{number}/{check_file.stem.removeprefix('check_')}")
    return found


def pytest_summary(lines: list[str]) -> str | None:
    """The closing '=== 40 passed, 1 skipped in 30.5s ===' line of a pytest run, unframed."""
    pattern = re.compile(r"^=*\s*((\d+ \w+(, )?)+.* in [\d.]+s.*?)\s*=*$")
    for line in reversed(lines):
        match = pattern.match(line.strip())
        if match:
            return match.group(1)
    return None


def device_facts() -> dict:
    import torch

    facts = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "gpus": [],
    }
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        facts["gpus"].append(
            {
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "memory_gib": round(props.total_memory / 2**30, 1),
                "multiprocessors": props.multi_processor_count,
            }
        )
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        facts["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        facts["driver"] = None
    return facts


def to_markdown(facts: dict, steps: list[dict], benchmark_tables: list[str], wall_s: float) -> str:
    gpus = ", ".join(f"{g['name']} (sm_{g['capability'].replace('.', '')})" for g in facts["gpus"])
    lines = [
        "# make gpu-check",
        "",
        f"{gpus or 'no GPU'}; driver {facts['driver']}; torch {facts['torch']} (CUDA "
        f"{facts['torch_cuda']}), Python {facts['python']}; {facts['date']}.",
        "",
        "| step | result | seconds | summary |",
        "| --- | --- | ---: | --- |",
    ]
    for s in steps:
        result = "passed" if s["returncode"] == 0 else f"FAILED ({s['returncode']})"
        lines.append(f"| {s['step']} | {result} | {s['seconds']} | {s.get('summary') or ''} |")
    # Builds and sanitizer runs overlap, so the steps' seconds add up to more than this.
    lines += ["", f"Wall time, start to end: {wall_s:.0f} s ({wall_s / 60:.1f} min)."]
    for table in benchmark_tables:
        lines += ["", table]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = os.environ.get("OUT") or str(REPO / "docs" / "perf")
    parser.add_argument("--out", type=Path, default=Path(default_out))
    parser.add_argument("--skip-sanitizer", action="store_true")
    parser.add_argument("--skip-benchmarks", action="store_true")
    parser.add_argument(
        "--only-benchmarks", action="store_true", help="the benchmarks and profiles alone"
    )
    parser.add_argument(
        "--workers",
        default=str(max(1, (os.cpu_count() or 2) - 2)),
        help="pytest-xdist workers for the tests (pytest -n; 0: one process); default: the "
        "cores less two, which the builds and compilers the tests start use",
    )
    parser.add_argument(
        "--benchmarks",
        nargs="+",
        metavar="CHAPTER",
        help="run only these chapters' benchmark.py (folder names); default: every chapter",
    )
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("gpu-check needs a CUDA GPU, and torch.cuda.is_available() is False here.")
        print("On a machine without one, `make test` is the check (CUDA tests are skipped there).")
        return 2

    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "gpu_check.log"
    log.write_text("")
    python = sys.executable
    steps: list[dict] = []

    doctor = load_doctor()
    env = doctor.collect()
    problems = doctor.diagnose(env)
    fixed = ""
    if (
        any("libstdc++" in p.what for p in problems if p.severity == "error")
        and os.environ.get("CXX", "c++") != "c++"
    ):
        # The doctor's fix for a $CXX that links libstdc++ statically (the course's GPU image):
        # the system compiler. Set here, it holds for this run and the builds it starts.
        os.environ["CXX"] = "c++"
        env = doctor.collect()
        problems = doctor.diagnose(env)
        fixed = "; this run took the doctor's fix CXX=c++ (export it for your own builds)"
    report = doctor.format_report(env, problems)
    print(report)
    with log.open("a") as f:
        f.write(report + "\n")
    errors = [p.what for p in problems if p.severity == "error"]
    steps.append(
        {
            "step": "doctor",
            "returncode": 1 if errors else 0,
            "seconds": 0,
            "summary": ("; ".join(errors) or f"{len(problems)} warning(s), no error") + fixed,
        }
    )
    if fixed:
        print(f"\ngpu-check: {fixed[2:]}")
    if errors:
        print("\ngpu-check stops here: the doctor found an error that would break the builds.")
        write_results(args.out, steps, [], time.monotonic() - started)
        return 2

    if not args.only_benchmarks:
        steps += build_test_sanitize(args, log, python)
    benchmark_tables = [] if args.skip_benchmarks else benchmark(args, log, python, steps)
    return write_results(args.out, steps, benchmark_tables, time.monotonic() - started)


def share_the_cores(workers: int) -> dict:
    """The environment for `workers` test processes side by side: each gets its share of the
    cores for torch's CPU threads. Left alone, every worker starts one thread per core, and 8
    workers on 16 cores run 128 threads that take turns: the CPU tests ran 5-8x slower than
    alone (chapter 5's 30-step training test took 84 s under -n 8 on the 16-core GPU machine)."""
    env = dict(os.environ)
    if workers > 1 and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    # torch.compile's C++ compiler runs: by default each test process starts its own pool of one
    # compiler process per core, every one of which imports torch first.
    if workers > 1:
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


def build_test_sanitize(args, log: Path, python: str) -> list[dict]:
    """Build every chapter at once, then run every test with CUDA, then the sanitizers."""
    steps = []
    builds = [
        {"name": f"build {chapter.name}", "command": [python, str(loader)]}
        for chapter in CHAPTERS
        for loader in sorted([*chapter.glob("load_chapter*.py"), *chapter.glob("build_inplace.py")])
    ]
    steps += run_side_by_side(builds, log, at_once=len(builds))
    for step in steps:
        step.pop("tail")

    pytest = [python, "-m", "pytest", "-p", "no:cacheprovider", "-rs"]
    # loadgroup: tests marked xdist_group (the exercises' checker runs) share a worker.
    workers = [] if args.workers == "0" else ["-n", args.workers, "--dist", "loadgroup"]
    if workers and importlib.util.find_spec("xdist") is None:
        print("\ngpu-check: pytest-xdist is not installed; the tests run in one process")
        workers = []
    # The sanitizers beside the tests: the tests' last minutes are a few long ones (builds,
    # AOTInductor) on a few workers, and the sanitizers' processes fill the idle cores and GPU.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        sanitized = pool.submit(sanitize, args, log, python, pytest)
        tests = run_step(
            "tests (all, CUDA)",
            [*pytest, *workers, "--durations=40", "tests", *map(str, CHAPTERS)],
            log,
            env=share_the_cores(int(args.workers)),
        )
        tests["summary"] = pytest_summary(tests.pop("tail"))
        steps.append(tests)
        return steps + sanitized.result()


def sanitize(args, log: Path, python: str, pytest: list[str]) -> list[dict]:
    """The tests marked `sanitize` and the CUDA exercises' solutions under each tool."""
    steps: list[dict] = []
    if args.skip_sanitizer:
        return steps
    sanitizer = shutil.which("compute-sanitizer")
    collected = subprocess.run(
        [*pytest, "-m", "sanitize", "--collect-only", "-q", *map(str, CHAPTERS)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if collected.returncode == 5:
        print(
            "\n==== compute-sanitizer: no test is marked `sanitize` yet (chapters with CUDA "
            "kernels add theirs); nothing to run"
        )
        return steps
    if sanitizer is None:
        steps.append(
            {
                "step": "compute-sanitizer",
                "returncode": 127,
                "seconds": 0,
                "summary": "compute-sanitizer not found on PATH",
            }
        )
        return steps
    # Without PyTorch's caching allocator every tensor is its own cudaMalloc, so memcheck sees an
    # access past a tensor's end and initcheck an unwritten one.
    no_caching = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "OMP_NUM_THREADS": "1"}
    # A sanitizer slows a check many times over: the checker's per-check limit goes up to match.
    no_caching["EXERCISE_CHECK_TIMEOUT"] = "900"
    checker = [python, str(REPO / "tools" / "check_exercise.py")]
    # Per tool: the chapters' `sanitize` tests, then the CUDA exercises' reference solutions
    # through the checker at small sizes.
    runs = {"": [*pytest, "-q", "-m", "sanitize", *map(str, CHAPTERS)]}
    runs.update({f" {ex}": [*checker, ex, "--solution", "--small"] for ex in cuda_exercises()})
    jobs = [
        {
            "name": f"compute-sanitizer --tool {tool}{label}",
            "command": [sanitizer, "--tool", tool, "--error-exitcode", "99", *command],
            "env": no_caching,
        }
        for tool in SANITIZER_TOOLS
        for label, command in runs.items()
    ]
    # Each run holds a GPU context and a sanitizer's bookkeeping, little of the GPU's time: a few
    # at once take about the time of the longest.
    for step in run_side_by_side(jobs, log, at_once=4):
        tail = step.pop("tail")
        if "/" not in step["step"]:  # the chapters' tests, not an exercise
            step["summary"] = pytest_summary(tail)
        else:
            step["summary"] = next((line for line in reversed(tail) if "SUMMARY" in line), None)
        steps.append(step)
    return steps


def benchmark(args, log: Path, python: str, steps: list[dict]) -> list[str]:
    """Every chapter's benchmark.py (or those --benchmarks names) and its Nsight Compute profile;
    the steps go to `steps`, the benchmarks' tables are returned."""
    bench_out = args.out / "benchmarks"
    for chapter in CHAPTERS:
        if args.benchmarks and chapter.name not in args.benchmarks:
            continue
        # A chapter's benchmark.py, or chapter 5's in its benchmarks/ folder.
        script = next(
            (
                s
                for s in (chapter / "benchmark.py", chapter / "benchmarks" / "benchmark.py")
                if s.exists()
            ),
            chapter / "benchmark.py",
        )
        if script.exists():
            step = run_step(
                f"benchmark {chapter.name}", [python, str(script), "--out", str(bench_out)], log
            )
            step.pop("tail")
            steps.append(step)
        profile = chapter / "profile_kernels.py"
        ncu = shutil.which("ncu")
        if profile.exists() and ncu is not None:
            report = bench_out / f"{chapter.name.split('_')[0]}_ncu.txt"
            step = run_step(
                f"ncu {chapter.name}",
                [ncu, *NCU_ARGS, "--log-file", str(report), python, str(profile)],
                log,
            )
            step.pop("tail")
            steps.append(step)
            summary = subprocess.run(
                [python, str(chapter / "ncu_summary.py"), str(report)],
                capture_output=True,
                text=True,
            )
            report.with_suffix(".md").write_text(summary.stdout)
    return [p.read_text() for p in sorted(bench_out.glob("*.md"))]


def write_results(out: Path, steps: list[dict], benchmark_tables: list[str], wall_s: float) -> int:
    """gpu_check.json and gpu_check.md in `out`; 1 if a step failed, else 0."""
    for step in steps:
        step.pop("tail", None)
    facts = device_facts()
    (out / "gpu_check.json").write_text(
        json.dumps({"device": facts, "steps": steps, "wall_s": round(wall_s, 1)}, indent=2) + "\n"
    )
    summary = to_markdown(facts, steps, benchmark_tables, wall_s)
    (out / "gpu_check.md").write_text(summary)
    print("\n" + summary)
    failed = [s["step"] for s in steps if s["returncode"] != 0]
    print(
        f"gpu-check: {'FAILED: ' + ', '.join(failed) if failed else 'all steps passed'}; "
        f"results in {out}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
