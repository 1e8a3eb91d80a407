"""Every shell command a lesson shows, run as a reader pastes it after `make tutorial`: with bash,
from the repository root, in a plain shell (no activated .venv, none of the Makefile's variables).

    .venv/bin/python -m pytest -q tests/test_lesson_commands.py -rs

The commands are read from the fenced blocks of README.md and every chapter's lesson pages when the
tests are collected, so a lesson's edit is tested as it stands. Each command is one test, in the
lesson's order. Some are not run here (SKIPPED below says why); a command the lesson marks
"# on a GPU" must, without one, say that it needs a CUDA GPU and exit 0. Builds are the ones the
rest of the suite uses: build_utils.py gives a plain shell the Makefile's defaults (CUDA_HOME,
TORCH_CUDA_ARCH_LIST, build/torch_extensions), so a command builds what `make test` builds.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
# Every lesson page: the chapters' READMEs, chapter 5's parts and each chapter's optional pages.
LESSONS = [
    REPO / "README.md",
    *sorted(REPO.glob("chapter*_*/*.md")),
    *sorted(REPO.glob("chapter*_*/further/*.md")),
]
VENV_BIN = REPO / ".venv" / "bin"
TIMEOUT_S = 600

# The commands this file does not run, and why: (pattern searched in the command, why). The first
# pattern that matches decides. Everything not listed runs.
SKIPPED: list[tuple[str, str]] = [
    (
        r"^make tutorial\b",
        "sets up .venv and runs every demo (minutes); the demos run one by one here",
    ),
    (r"^make test\b", "the whole test suite, this file included (about 21 minutes in CI)"),
    (r"^make gpu-(check|bench)\b", "a GPU machine's builds, tests, sanitizers and benchmarks"),
    (
        r"^make stable-check\b",
        "builds a wheel and a venv with a newer torch; test_stable.py does too",
    ),
    (
        r"\bpip3? (install|wheel)\b.*chapter5_extensions",
        "builds all of custom_ops (minutes on 2 cores); test_package.py builds and installs a wheel",
    ),
    (r"build_times\.py", "about 100 s of cold builds, every build way twice"),
    (
        r"iterate_nvrtc\.py --load-inline",
        "two load_inline builds (about 2 minutes on 2 cores); test_chapter3.py runs the NVRTC part",
    ),
    (
        r"chapter1_cpp_to_python/benchmark\.py$",
        "the full benchmark (about 20 s); test_chapter1.py runs its --quick path",
    ),
    (r"\bjupyter\b", "a notebook server; make test executes every notebook with nbmake"),
    (
        r"scaffold\.py .*--dest /tmp/",
        "writes into /tmp and refuses to overwrite its files on a second run; test_package.py "
        "scaffolds into a fresh folder, builds the op and runs its tests",
    ),
    (
        r"benchmarks/lstm_cpu\.py$",
        "a CPU benchmark (about a minute, longer beside other tests); its table is "
        "docs/perf/cpu/lstm_cpu.md",
    ),
    (
        r"export_aoti\.py$",
        "an AOTInductor compile (about a minute on 2 cores); test_package.py runs it",
    ),
    (
        r"-m pytest .*chapter\w+/\S+$",
        "a folder's tests on their own; make test runs the same files",
    ),
    (
        r"(^|/)test_\w+\.py$",
        "a chapter's tests on their own (1-4 minutes each); make test runs the same files",
    ),
]

# Commands known to fail in a plain shell: (pattern, why, strict). Each is expected to fail;
# strict: once it works, pytest says so (XPASS) and the entry must go. None today: a lesson
# command that fails is fixed in the lesson.
KNOWN_BROKEN: list[tuple[str, str, bool]] = []

# The lessons' fences: plain ``` and the shell languages hold commands; ```text is output.
SHELL_FENCES = {"", "bash", "sh", "shell", "console"}
COMMAND_START = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"  # VAR=value prefixes, as in USE_CUDA=0 pip install ...
    r"(?:\.venv/bin/\S+|python3?|pip3?|pytest|torchrun|make|cd|source|\.|export|bash|sh|ninja)"
    r"(?:\s|$)"
)
ACTIVATE = re.compile(r"^(?:source|\.)\s+\.venv/bin/activate\s*$")
GPU_MESSAGE = re.compile(r"needs a (?:CUDA )?GPU")


@dataclass(frozen=True)
class LessonCommand:
    lesson: Path
    line: int
    command: str
    comment: str
    activated: bool  # the lesson says to `source .venv/bin/activate` first

    @property
    def test_id(self) -> str:
        return f"{self.lesson.relative_to(REPO)}: {self.command}"

    @property
    def needs_gpu(self) -> bool:
        return "on a GPU" in self.comment


def split_comment(line: str) -> tuple[str, str]:
    """`cmd --flag  # why` -> ("cmd --flag", "why"): a # after a space and outside quotes."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""


def lesson_commands(lesson: Path) -> list[LessonCommand]:
    """The commands in a lesson's shell fences, with `$ ` prompts and `\\` continuations."""
    found: list[tuple[int, str, str]] = []
    language, pending, first_line = None, "", 0  # language is None outside a fence
    for number, raw in enumerate(lesson.read_text().splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            info = stripped[3:].strip()
            language = (info.split()[0] if info else "") if language is None else None
            continue
        if language not in SHELL_FENCES:
            continue
        if language == "console" and not pending:
            if not stripped.startswith("$ "):
                continue  # output
            stripped = stripped[2:]
        first_line = first_line or number
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        command, comment = split_comment(pending + stripped)
        if COMMAND_START.match(command):
            found.append((first_line, command, comment))
        pending, first_line = "", 0
    activated = any(ACTIVATE.match(command) for _, command, _ in found)
    return [
        LessonCommand(lesson, number, command, comment, activated)
        for number, command, comment in found
        if not ACTIVATE.match(command)
    ]


COMMANDS = [command for lesson in LESSONS for command in lesson_commands(lesson)]

# What `make` adds to a shell: its own variables, and any the Makefile exports (CUDA_HOME,
# TORCH_CUDA_ARCH_LIST, CPATH, TORCH_EXTENSIONS_DIR, TRITON_INTERPRET, ...), sets or reads (a
# command-line variable such as PYTEST_ARGS is exported too). Read from the Makefile below.
MAKE_OWN = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MAKEFILES", "MAKE_TERMOUT"}
MAKE_OWN |= {"MAKE_TERMERR", "CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "CPATH", "TORCH_EXTENSIONS_DIR"}
MAKE_OWN |= {"TRITON_INTERPRET", "MAX_JOBS"}
KEPT = {"PATH", "HOME", "SHELL"}
# Make passes each pytest worker its share of the cores (OMP_NUM_THREADS, one inductor compile
# thread). A command that took all the cores while the other worker is busy waits on threads the
# other process holds: lstm_train.py on the CPU took 55 s instead of 11. These change only how
# many threads a command uses, never whether it works, so they stay.
KEPT |= {"OMP_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS"}


def makefile_variables() -> set[str]:
    text = (REPO / "Makefile").read_text()
    assigned = re.findall(r"^\s*(?:export\s+)?([A-Za-z_]\w*)\s*(?::=|\?=|\+=|=)", text, re.M)
    read = re.findall(r"\$[({]([A-Za-z_]\w*)", text)
    return (set(assigned) | set(read) | MAKE_OWN) - KEPT


def plain_environment(activated: bool) -> dict[str, str]:
    """This process's environment as a plain shell has it: without make's variables, pytest's,
    and the venv on PATH. `activated`: as after `source .venv/bin/activate`."""
    dropped = makefile_variables()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in dropped and not key.startswith(("PYTEST_", "VIRTUAL_ENV", "_OLD_VIRTUAL_"))
    }
    venvs = {VENV_BIN.resolve()}
    if sys.prefix != sys.base_prefix:  # this pytest runs in a venv, maybe another one
        venvs.add((Path(sys.prefix) / "bin").resolve())
    if os.environ.get("VIRTUAL_ENV"):
        venvs.add((Path(os.environ["VIRTUAL_ENV"]) / "bin").resolve())
    path = [
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() not in venvs
    ]
    if activated:
        path.insert(0, str(VENV_BIN))
        env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    env["PATH"] = os.pathsep.join(path)
    return env


def run_in_plain_shell(command: LessonCommand) -> tuple[int | None, str]:
    """bash -c command, from the repository root; (exit status or None on timeout, output)."""
    process = subprocess.Popen(
        ["bash", "-c", command.command],
        cwd=REPO,
        env=plain_environment(command.activated),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,  # its own process group, so a timeout ends its children too
    )
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return None, output
    return process.returncode, output


def marks(command: LessonCommand) -> list[pytest.MarkDecorator]:
    # Under pytest-xdist (--dist loadgroup) a lesson's commands stay in order on one worker: a
    # command may use what the one before it made (pip install, then import).
    group = pytest.mark.xdist_group(f"lesson-{command.lesson.parent.name}")
    for pattern, why in SKIPPED:
        if re.search(pattern, command.command):
            return [group, pytest.mark.skip(reason=f"not run here: {why}")]
    if command.needs_gpu and torch.cuda.is_available():
        return [group, pytest.mark.skip(reason="a benchmark's GPU run: make gpu-bench runs it")]
    for pattern, why, strict in KNOWN_BROKEN:
        if re.search(pattern, command.command):
            return [group, pytest.mark.xfail(reason=why, strict=strict)]
    return [group]


def test_every_lesson_shows_commands_to_run():
    """The parser found each lesson's "Run it" commands: an empty list would pass silently. (An
    optional page in further/ may have none.)"""
    lessons = {command.lesson for command in COMMANDS}
    main_pages = {lesson for lesson in LESSONS if lesson.parent.name != "further"}
    assert main_pages <= lessons, f"no commands found in {sorted(main_pages - lessons)}"


def test_commands_are_read_from_shell_fences_only(tmp_path):
    lesson = tmp_path / "README.md"
    lesson.write_text(
        "Run `python ignored_inline.py`.\n"
        "```\n.venv/bin/python demo.py --quick   # ~2 s\nx = f(y)   # a formula\n```\n"
        "```python\npython = 3\n```\n"
        "```text\nmake test\n```\n"
        "```console\n$ make doctor\nmake doctor's output\n$ USE_CUDA=0 pip install \\\n  .\n```\n"
    )
    found = [(c.line, c.command, c.comment) for c in lesson_commands(lesson)]
    assert found == [
        (3, ".venv/bin/python demo.py --quick", "~2 s"),
        (13, "make doctor", ""),
        (15, "USE_CUDA=0 pip install .", ""),
    ]


def test_plain_environment_has_no_venv_and_no_make_variables(monkeypatch):
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}/usr/bin")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setenv("PYTEST_ARGS", "-q")
    env = plain_environment(activated=False)
    assert env["PATH"] == "/usr/bin"
    assert "TORCH_CUDA_ARCH_LIST" not in env and "PYTEST_ARGS" not in env
    assert env["HOME"] == os.environ["HOME"]
    assert plain_environment(activated=True)["PATH"] == f"{VENV_BIN}{os.pathsep}/usr/bin"


def test_plain_environment_keeps_the_workers_share_of_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env = plain_environment(activated=False)
    assert env["OMP_NUM_THREADS"] == env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"


@pytest.mark.slow
@pytest.mark.skipif(
    not (VENV_BIN / "python").exists(),
    reason="no .venv (make tutorial creates it; PY=python3 runs without): the lessons run .venv's",
)
@pytest.mark.parametrize(
    "lesson_command", [pytest.param(c, id=c.test_id, marks=marks(c)) for c in COMMANDS]
)
def test_lesson_command_works_in_a_plain_shell(lesson_command: LessonCommand):
    returncode, output = run_in_plain_shell(lesson_command)
    where = f"{lesson_command.lesson.relative_to(REPO)}:{lesson_command.line}"
    tail = "\n".join(output.splitlines()[-40:])
    said = f"`{lesson_command.command}` ({where}) in a plain shell"
    assert returncode is not None, f"{said} ran past {TIMEOUT_S} s; the end of its output:\n{tail}"
    if lesson_command.needs_gpu:  # and no GPU here: it must say so, not silently do nothing
        assert GPU_MESSAGE.search(output), f"{said} did not say it needs a GPU:\n{tail}"
        # 2: the benchmark.py files' "nothing measured" (their test_benchmark_says_it_needs_a_gpu)
        assert returncode in (0, 2), f"{said} exited {returncode}; the end of its output:\n{tail}"
    else:
        assert returncode == 0, f"{said} exited {returncode}; the end of its output:\n{tail}"
