"""Checks on the repository itself: the set-up files agree, every chapter has its parts, and the
gpu-check script's helpers behave. Runs in `make test` with everything else."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in REPO.glob("chapter*_*") if p.is_dir())


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def requirement_lines() -> list[str]:
    lines = (REPO / "requirements.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_requirements_pin_every_package_exactly():
    unpinned = [line for line in requirement_lines() if not re.fullmatch(r"[\w.-]+==[\w.+]+", line)]
    assert unpinned == [], "pin with == so every learner builds against the same versions"


def test_requirements_pin_the_torch_of_the_gpu_machine():
    assert "torch==2.11.0" in requirement_lines()
    assert torch.__version__.split("+")[0] == "2.11.0", "the environment must match the pin"


def test_environment_yml_installs_requirements_txt_with_python_311():
    yaml = pytest.importorskip("yaml", reason="pyyaml is not installed (requirements.txt has it)")
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    assert "pip" in deps
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    # The conda file points at requirements.txt instead of repeating it, so the two cannot drift.
    assert pip_section == ["-r requirements.txt"]


def test_readme_gives_exactly_the_two_setup_commands():
    readme = (REPO / "README.md").read_text()
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \S+)$", setup, flags=re.M)
    assert commands == ["make tutorial", "make test"]


def test_makefile_has_every_documented_target():
    makefile = (REPO / "Makefile").read_text()
    for target in ["tutorial", "test", "doctor", "gpu-check", "clean", "lint", "docs", "check"]:
        assert re.search(rf"^{target}:", makefile, flags=re.M), f"make {target} is missing"


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci
    assert re.search(r"^make test\b", ci, flags=re.M)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_has_lesson_tests_notebook_and_demo(chapter):
    number = re.match(r"chapter(\d+)_", chapter.name).group(1)
    for part in ["README.md", f"test_chapter{number}.py", f"chapter{number}.ipynb", "demo.py"]:
        assert (chapter / part).exists(), f"{chapter.name} has no {part}"


def test_gpu_check_reads_the_pytest_summary_line():
    gpu_check = load_tool("gpu_check")
    lines = ["...", "==== 40 passed, 1 skipped in 30.55s ====", ""]
    assert gpu_check.pytest_summary(lines) == "40 passed, 1 skipped in 30.55s"
    assert (
        gpu_check.pytest_summary(["3 failed, 2 passed in 1.00s"]) == "3 failed, 2 passed in 1.00s"
    )
    assert gpu_check.pytest_summary(["no summary here"]) is None


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU"
)
def test_gpu_check_refuses_without_a_gpu(capsys, tmp_path):
    gpu_check = load_tool("gpu_check")
    assert gpu_check.main(["--out", str(tmp_path)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


def test_gpu_check_runs_steps_side_by_side_and_keeps_their_order(tmp_path):
    gpu_check = load_tool("gpu_check")
    log = tmp_path / "log"
    log.write_text("")
    sleep = "import sys, time; time.sleep(1); print('step', sys.argv[1])"
    jobs = [{"name": f"s{i}", "command": [sys.executable, "-c", sleep, str(i)]} for i in range(3)]
    steps = gpu_check.run_side_by_side(jobs, log, at_once=3)
    assert [s["step"] for s in steps] == ["s0", "s1", "s2"]
    assert all(s["returncode"] == 0 and s["tail"] == [f"step {i}"] for i, s in enumerate(steps))
    assert max(s["seconds"] for s in steps) < 2.5  # side by side: about one second, not three
    assert all(f"step {i}" in log.read_text() for i in range(3))


def test_under_xdist_the_slow_tests_come_first_longest_first():
    """conftest.py's order for pytest -n: slow(seconds=N) by N, then the other slow tests, then
    the rest, each group in its collected order."""
    spec = importlib.util.spec_from_file_location("root_conftest", REPO / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    class Item:
        def __init__(self, name: str, marker: pytest.Mark | None) -> None:
            self.name, self.marker = name, marker

        def get_closest_marker(self, name: str) -> pytest.Mark | None:
            return self.marker if name == "slow" else None

    items = [
        Item("quick", None),
        Item("slow", pytest.mark.slow.mark),
        Item("slow 40 s", pytest.mark.slow(seconds=40).mark),
        Item("quick 2", None),
        Item("slow 180 s", pytest.mark.slow(seconds=180).mark),
    ]
    items.sort(key=conftest._slow_first)
    assert [i.name for i in items] == ["slow 180 s", "slow 40 s", "slow", "quick", "quick 2"]


GROUPED_TESTS = """
import pytest

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(2))
def test_grouped(i):
    pass

def test_free():
    pass
"""


def test_tests_of_one_xdist_group_carry_the_group_in_their_node_id():
    """make test's `--dist loadgroup` sends the tests of one xdist_group to one worker (the
    exercise checker's 32 runs, one JIT build), by the "@group" that ends their node ids. With
    pytest 9.2 that suffix needs conftest.py's _group_xdist_groups; without it the groups were
    spread over both workers, and each set up the shared fixture again."""
    if not isinstance(getattr(pytest.Item, "id", None), property):
        pytest.skip(
            f"pytest {pytest.__version__} reads item._nodeid, where pytest-xdist's workers put "
            "the group themselves (only pytest 9.2's item._id needs conftest.py's help)"
        )
    folder = REPO / "build" / "xdist_group_check"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_grouped.py").write_text(GROUPED_TESTS)
    command = ["-m", "pytest", "--collect-only", "-q", "--dist=loadgroup", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [sys.executable, *command, str(folder / "test_grouped.py")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ids = [line.split("::", 1)[1] for line in result.stdout.splitlines() if "::" in line]
    assert ids == ["test_grouped[0]@together", "test_grouped[1]@together", "test_free"], ids


@pytest.mark.slow
def test_two_builds_of_one_exercise_at_once_both_succeed(tmp_path, monkeypatch):
    """make check in two terminals, or pytest -n: the second build waits for the first (a file
    lock in check_exercise.build) instead of emptying its folder under it. The folder starts
    with a stale stamp, so that each build would empty it; the second starts a moment later, while
    the first compiles."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    folder = load_tool("check_exercise").exercises_build_root() / "ch1_keyword_args_solution"
    folder.mkdir(parents=True)
    (folder / "sources.sha1").write_text("the stamp of an older source")
    command = [sys.executable, str(REPO / "tools" / "check_exercise.py"), "ch1/keyword_args"]
    runs = []
    for delay in (0, 4):
        time.sleep(delay)
        runs.append(
            subprocess.Popen(
                [*command, "--solution"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        )
    outputs = [run.communicate(timeout=600)[0].decode() for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs


FENCE = re.compile(r'^```\w+ title="([^"]+)"\n(.*?)^```$', flags=re.M | re.S)


# Each chapter folder builds and runs on its own, so the helpers several of them need are copies,
# not imports (README, "How the builds are kept honest"). Copies that drift apart are how one
# chapter ends up timing or checking differently from the next: they must stay identical.
SHARED_COPIES = {
    "build_utils.py": [
        "chapter1_cpp_to_python",
        "chapter2_tensor_api",
        "chapter3_cuda_kernels",
        "chapter4_autograd",
        "chapter5_extensions",
        "tools",
    ],
    "gpu_timer.py": [
        "chapter2_tensor_api",
        "chapter3_cuda_kernels",
        "chapter4_autograd",
        "chapter5_extensions/benchmarks",
        "tools",
    ],
    "plot_style.py": [
        "chapter3_cuda_kernels",
        "chapter4_autograd",
        "chapter5_extensions/benchmarks",
    ],
    "checks.h": ["chapter2_tensor_api", "chapter3_cuda_kernels", "chapter4_autograd"],
    "launch_utils.cuh": ["chapter3_cuda_kernels", "chapter4_autograd"],
}


@pytest.mark.parametrize("name", SHARED_COPIES)
def test_shared_helpers_are_identical_copies(name):
    first, *others = SHARED_COPIES[name]
    original = (REPO / first / name).read_bytes()
    differ = [folder for folder in others if (REPO / folder / name).read_bytes() != original]
    assert differ == [], (
        f"{name} in {differ} differs from {first}/{name}: edit one copy, then copy it over the "
        f"others (cp {first}/{name} <folder>/)"
    )


# Helpers and kernels that live in files which otherwise differ (another namespace, another API
# around them): the definitions themselves must stay the same text. chapter 5's stable package
# ports only the host code of custom_ops, which is why its results are the same bits.
SHARED_DEFINITIONS = {
    "checks.h": {
        "files": ["chapter2_tensor_api/checks.h", "chapter5_extensions/csrc/checks.h"],
        "names": ["check_floating", "check_like", "check_same_shape", "check_bias_op"],
    },
    "launch_utils.cuh": {
        "files": [
            "chapter3_cuda_kernels/launch_utils.cuh",
            "chapter5_extensions/csrc/cuda/launch_utils.cuh",
            "chapter5_extensions/stable/csrc/cuda/launch_utils.cuh",
        ],
        "names": ["AlignedVector", "ceil_div", "vector_width", "with_vector_width"],
    },
    "fused_bias_relu.cu": {
        "files": [
            "chapter5_extensions/csrc/cuda/fused_bias_relu.cu",
            "chapter5_extensions/stable/csrc/cuda/fused_bias_relu.cu",
        ],
        "names": "every kernel",
    },
    "relu.cu": {
        "files": [
            "chapter5_extensions/csrc/cuda/relu.cu",
            "chapter5_extensions/stable/csrc/cuda/relu.cu",
        ],
        "names": "every kernel",
    },
}


def cpp_definitions(path: Path) -> dict[str, str]:
    """A C++ file's top-level functions and structs by name: from the line that starts one at
    column 0 (with the template line above it) to its closing brace at column 0."""
    lines, found, start = path.read_text().splitlines(), {}, None
    for i, line in enumerate(lines):
        opens = line[:1].isalpha() or line.startswith("__")  # __global__, __device__
        if start is None and opens and "(" in line and not line.startswith("namespace"):
            start = i - 1 if lines[i - 1].startswith("template") else i
        if start is not None and (line in ("}", "};") or (line.endswith("}") and i == start)):
            signature = next(row for row in lines[start : i + 1] if "(" in row)
            name = signature.split("{" if signature.startswith("struct") else "(")[0].split()[-1]
            found[name] = "\n".join(lines[start : i + 1])
            start = None
    return found


@pytest.mark.parametrize("group", SHARED_DEFINITIONS)
def test_shared_definitions_are_the_same_text(group):
    """A fix to one copy must reach the others: this fails until it does."""
    first, *others = [REPO / f for f in SHARED_DEFINITIONS[group]["files"]]
    original = cpp_definitions(first)
    names = SHARED_DEFINITIONS[group]["names"]
    if names == "every kernel":
        names = [name for name, text in original.items() if "__global__" in text]
    assert names, f"nothing to compare in {first}"
    for other in others:
        theirs = cpp_definitions(other)
        differ = [name for name in names if theirs.get(name) != original.get(name)]
        assert differ == [], f"{other.relative_to(REPO)}: {differ} differ from {first.name}'s"


def python_function_body(path: Path, name: str) -> str:
    """The source lines of function `name` in `path`, comments included, docstring left out."""
    import ast

    lines = path.read_text().splitlines()
    (function,) = [n for n in ast.parse("\n".join(lines)).body if getattr(n, "name", "") == name]
    body = function.body[1:] if ast.get_docstring(function) else function.body
    return "\n".join(lines[body[0].lineno - 1 : function.end_lineno])


# Python functions that stand in files that must stay standalone (a chapter's loader, a setup.py
# that pip runs from a copy of its folder): (file, function) pairs whose code, docstrings aside and
# the chapter's number made N, is one text.
SHARED_FUNCTIONS = {
    "load_chapterN": [
        ("chapter3_cuda_kernels/load_chapter3.py", "load_chapter3"),
        ("chapter4_autograd/load_chapter4.py", "load_chapter4"),
    ],
    "cuda include paths": [
        ("chapter5_extensions/build_utils.py", "cuda_include_paths"),
        ("chapter5_extensions/setup.py", "cuda_include_dirs"),
    ],
    "use_cuda": [
        ("chapter5_extensions/setup.py", "use_cuda"),
        ("chapter5_extensions/stable/setup.py", "use_cuda"),
    ],
}


@pytest.mark.parametrize("group", SHARED_FUNCTIONS)
def test_shared_functions_are_the_same_code(group):
    """chapter 3 explains the loader's flags and chapter 4 reuses them; chapter 5's setup.py
    repeats build_utils' include search so that `pip install` works from a copy of the folder."""
    bodies = [
        re.sub(r"chapter( ?)\d(?!\d)", r"chapter\1N", python_function_body(REPO / path, name))
        for path, name in SHARED_FUNCTIONS[group]
    ]
    assert bodies[0].strip(), f"{group}: nothing to compare"
    first = SHARED_FUNCTIONS[group][0][0]
    assert bodies[1:] == bodies[:1] * (len(bodies) - 1), f"{group}: edit {first}, copy it over"


def test_no_chapter_defines_a_shared_helper_again():
    """The functions of the shared copies live there only: a second definition elsewhere is the
    drift the copies exist to prevent."""
    names = {
        "build_utils.py": [
            "build_root",
            "put_ninja_on_path",
            "cuda_include_paths",
            "can_build_cuda",
        ],
        "gpu_timer.py": ["event_ms", "class Timer"],
        "plot_style.py": ["zero_based_y", "legend_below", "log_axis", "log2_axis"],
    }
    found = []
    for path in [
        *REPO.glob("chapter*_*/*.py"),
        *REPO.glob("chapter*_*/*/*.py"),
        *REPO.glob("tools/*.py"),
    ]:
        if path.name in names:
            continue
        text = path.read_text()
        for helper in (h for hs in names.values() for h in hs):
            definition = helper if helper.startswith("class ") else f"def {helper}("
            if re.search(rf"^{re.escape(definition)}", text, flags=re.M):
                found.append(f"{path.relative_to(REPO)}: {definition}")
    assert found == []


# Every lesson page: a chapter's README.md, chapter 5's parts, each chapter's further/ pages.
LESSONS = [
    page
    for chapter in CHAPTERS
    for page in [
        chapter / "README.md",
        *sorted(p for p in chapter.glob("*.md") if p.name != "README.md"),
        *sorted(chapter.glob("further/*.md")),
    ]
]


MAIN_PATH_WORDS = 4_000  # about 30 minutes of reading
FURTHER_PAGE_WORDS = 3_000


def main_path(lesson: Path) -> str:
    """What a reader reads in one sitting: a lesson up to its `## Going further` list."""
    return lesson.read_text().split("\n## Going further", 1)[0]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_lesson_is_read_in_one_sitting(lesson):
    words = len(main_path(lesson).split())
    limit = FURTHER_PAGE_WORDS if lesson.parent.name == "further" else MAIN_PATH_WORDS
    assert words <= limit, (
        f"{lesson.relative_to(REPO)}: {words} words before Going further (at most {limit}); "
        "move what only some readers want to a page of its own in further/"
    )


@pytest.mark.parametrize(
    "lesson",
    [p for p in LESSONS if p.parent.name != "further"],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_a_lesson_opens_with_how_long_it_takes(lesson):
    """Before its first section a lesson says what you will learn, what you need and how long
    it takes; the time is the part a test can see."""
    opening = lesson.read_text().split("\n## ", 1)[0]
    assert re.search(r"\b\d+ minutes\b", opening), (
        f"{lesson.relative_to(REPO)}: say how long the lesson takes before its first section"
    )


@pytest.mark.parametrize(
    "page",
    [p for p in LESSONS if p.parent.name == "further"],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_an_optional_page_opens_with_what_it_adds(page):
    """A page of further/ is found from a link: its first paragraph, under the title, says in a
    line or two what it adds, and the page links back to a lesson."""
    lines = page.read_text().splitlines()
    assert lines[0].startswith("# "), f"{page.name}: the first line is the page's title"
    paragraph = " ".join(lines[2 : lines.index("", 2) if "" in lines[2:] else None])
    assert paragraph and not paragraph.startswith(("#", "|", "```", "-")), (
        f"{page.name}: under the title, one line saying what the page adds"
    )
    assert len(paragraph.split()) <= 60, f"{page.name}: the opening line is a paragraph"
    assert re.search(r"\]\(\.\./(README|part\d\w*)\.md", page.read_text()), (
        f"{page.name}: link back to the lesson it extends"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_lesson_quotes_its_code(chapter):
    assert FENCE.findall((chapter / "README.md").read_text()) or any(
        FENCE.findall(p.read_text()) for p in LESSONS if p.parent == chapter
    ), f"{chapter.name}'s lesson quotes no source file"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: str(p.relative_to(REPO)))
def test_code_quoted_in_a_lesson_is_the_code_in_its_file(lesson):
    """A block fenced as ```cpp title="addone.cpp" must appear, line for line, in that file
    (named from the lesson's own folder)."""
    for filename, block in FENCE.findall(lesson.read_text()):
        source = (lesson.parent / filename).read_text()
        assert block in source, f"{lesson.relative_to(REPO)} quotes {filename} text it lacks"


PERF_LINK = re.compile(r"\((?:\.\./)+(docs/perf/[\w/.-]+\.md)\)")


def measured_tables(lesson: str) -> list[tuple[str, list[str]]]:
    """(perf file, data rows) for each table in a lesson that follows a link to a docs/perf file
    in the same section: such a table quotes that file's measurements."""
    found, source, rows, in_table = [], None, [], False
    for line in [*lesson.splitlines(), ""]:
        if line.startswith("|"):
            if in_table and not set(line) <= set("|-: "):
                rows.append(line)
            in_table = True  # the first row of a table is its header
            continue
        if rows and source:
            found.append((source, rows))
        rows, in_table = [], False
        if line.startswith("#"):
            source = None
        if link := PERF_LINK.search(line):
            source = link.group(1)
    return found


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: str(p.relative_to(REPO)))
def test_numbers_in_a_lesson_are_the_numbers_its_script_wrote(lesson):
    """A table after a link to docs/perf/....md must be rows of that file, copied unchanged."""
    for source, rows in measured_tables(lesson.read_text()):
        measured = (REPO / source).read_text().splitlines()
        for row in rows:
            assert row in measured, f"{lesson.relative_to(REPO)}: {row!r} is not in {source}"


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} is not installed next to this Python (it comes with requirements.txt)")
    return str(path)


def test_python_is_ruff_clean():
    result = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout
    result = subprocess.run(
        [_tool("ruff"), "format", "--check", "--no-cache", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout


def test_cpp_and_cuda_are_clang_formatted():
    # The course's own sources, as `make lint` takes them: not the headers of whatever a build
    # folder holds (chapter 5's stable/build/ holds a whole second venv).
    sources = [
        str(p)
        for p in REPO.glob("chapter*_*/**/*")
        if p.suffix in {".cpp", ".cu", ".cuh", ".h"}
        and not any(part == "build" or part.startswith(".") for part in p.relative_to(REPO).parts)
    ]
    result = subprocess.run(
        [_tool("clang-format"), "--dry-run", "--Werror", *sources],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_use_cuda_0_builds_the_cpu_variants_and_make_tutorial_sets_it_without_a_gpu():
    """make tutorial on a machine without a GPU builds no CUDA code (no demo would run it): it
    sets USE_CUDA=0, which the chapters' loaders read through build_utils.can_build_cuda() and
    chapter 5's setup.py reads itself. make test leaves it unset and compiles every .cu file."""
    env = {**os.environ, "USE_CUDA": "0"}
    code = "import build_utils; print(build_utils.can_build_cuda())"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO / "tools", env=env, capture_output=True, text=True
    )
    assert result.stdout.strip() == "False", result.stderr
    tutorial = (REPO / "Makefile").read_text().split("\ntutorial:", 1)[1].split("\n\n", 1)[0]
    assert "torch.cuda.is_available()" in tutorial and "export USE_CUDA=0" in tutorial
    test = (REPO / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "USE_CUDA" not in test


@pytest.mark.parametrize("preset", [None, "8.0;9.0"], ids=["unset", "set-by-the-reader"])
def test_loaders_default_the_arch_list_as_the_makefile_does(preset):
    """A lesson's `python chapter3_cuda_kernels/load_chapter3.py` in a plain shell on a machine
    without a GPU must not die in torch's arch guess (IndexError): the loaders take the Makefile's
    default, 9.0, through build_utils.default_cuda_arch_list(); a reader's own list stands."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    if preset:
        env["TORCH_CUDA_ARCH_LIST"] = preset
    code = "import build_utils; print(build_utils.default_cuda_arch_list())"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO / "tools",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    expected = preset or ("" if torch.cuda.is_available() else "9.0")
    assert result.stdout.strip() == expected


# ---- no path of one machine in the repository --------------------------------------------------

# A path that names one machine's user or checkout: a home folder (/home/<user>/, /Users/<user>/,
# root's), a checkout in /work/<name>/ or in a folder of /tmp that holds the chapters or the JIT
# builds, a temporary folder named for a user (pytest's, Inductor's), or this checkout's own path.
# It must start a path: the "/home/" inside a URL or after another folder is not one. System paths
# (/usr/local/cuda, /dev/null) and the lessons' scratch folders (/tmp/scaled_gelu) pass. Written
# so that no line of this file is such a path itself.
NAME = r"\w[\w.-]*"
MACHINE_PATH = re.compile(
    r"(?<![\w.~])(?:"
    rf"/(?:(?:home|Users)/{NAME}|root)/|/work/{NAME}/"
    rf"|/tmp/(?:pytest-of-|torchinductor_){NAME}/"
    rf"|/tmp/{NAME}/(?:chapter\d+_\w+|build/torch_extensions)/"
    rf"|{re.escape(str(REPO))}/"
    r")"
)


def machine_paths_in(text: str) -> list[str]:
    """Each line of `text` that holds a machine's path, as `line N: ...the path...`."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in MACHINE_PATH.finditer(line):
            found.append(f"line {number}: ...{line[max(0, match.start() - 20) : match.end() + 40]}")
    return found


def _path(*parts: str) -> str:
    """The parts as an absolute path: written so, the examples below are no paths in this file."""
    return "/" + "/".join(parts)


@pytest.mark.parametrize(
    "text",
    [
        _path("work", "main", "chapter5_extensions", "load_jit.py"),
        _path("home", "alice", "course", "README.md"),
        f'File "{_path("root", ".pyenv", "versions", "3.11.7", "lib", "subprocess.py")}"',
        f"--prefix={_path('Users', 'bob', 'venv')}",
        _path("tmp", "base", "chapter2_tensor_api", "build_utils.py"),
        _path("tmp", "pytest-of-alice", "pytest-3", "x.txt"),
        f"PATH={_path('tmp', 'x', 'bin')}:{_path('home', 'alice', 'bin')}",
    ],
)
def test_machine_path_pattern_catches_a_user_or_checkout(text):
    assert machine_paths_in(text), text


@pytest.mark.parametrize(
    "text",
    [
        "/usr/local/cuda/bin/nvcc",
        "/dev/null",
        "python scaffold.py scaled_gelu --dest /tmp/scaled_gelu && ls /tmp/scaled_gelu/csrc/",
        "/tmp/reproduce_errors/ninja_missing/build.py",
        "https://github.com/pytorch/pytorch/home/x/",
        "~/work/course/chapter1_cpp_to_python/",
        "docs/tmp/chapter1_cpp_to_python/",
    ],
)
def test_machine_path_pattern_passes_system_and_scratch_paths(text):
    assert machine_paths_in(text) == [], text


def tracked_text_files() -> list[Path]:
    """`git ls-files` that exist and are text (no NUL byte, UTF-8): sources, lessons, notebooks."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: git ls-files names the tracked files")
    files = []
    for name in filter(None, listed.decode().split("\0")):
        path = REPO / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            data.decode()
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def test_no_tracked_file_holds_a_path_of_one_machine():
    """A log or an output pasted from one machine keeps its paths (the checkout's .venv/bin/python
    by its absolute path, a traceback's frames in a home folder): write them relative to the
    repository, or cut them as tools/reproduce_errors.py does ("[...]")."""
    found = {
        str(path.relative_to(REPO)): hits
        for path in tracked_text_files()
        if (hits := machine_paths_in(path.read_text()))
    }
    assert found == {}, "\n".join(f"{name}: {hit}" for name, hits in found.items() for hit in hits)


# ---- CUDA_HOME in a plain shell ----------------------------------------------------------------

# build_utils and each loader, imported from its folder as a lesson's command does.
CUDA_HOME_IMPORTS = [
    ("chapter2_tensor_api", "build_utils"),
    ("chapter1_cpp_to_python", "load_chapter1"),
    ("chapter1_cpp_to_python", "load_inline_example"),
    ("chapter2_tensor_api", "load_chapter2"),
    ("chapter3_cuda_kernels", "load_chapter3"),
    ("chapter4_autograd", "load_chapter4"),
    ("chapter5_extensions", "load_jit"),
]


@pytest.mark.skipif(
    not Path("/usr/local/cuda/bin/nvcc").exists(), reason="no toolkit in /usr/local/cuda"
)
@pytest.mark.parametrize(
    ("folder", "module"), CUDA_HOME_IMPORTS, ids=[m for _, m in CUDA_HOME_IMPORTS]
)
def test_a_plain_shell_is_told_the_cuda_home_the_builds_use(folder, module):
    """torch.utils.cpp_extension guesses CUDA_HOME as it is imported and, without a GPU, logs "No
    CUDA runtime is found, using CUDA_HOME=...". build_utils sets /usr/local/cuda first, so the
    line must name that folder, not /usr/local (the guess from a /usr/local/bin/nvcc launcher):
    build_utils is imported before torch.utils.cpp_extension, by every loader too."""
    venvs = {Path(sys.prefix) / "bin", REPO / ".venv" / "bin"}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) not in venvs]
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.pathsep.join(path)
    code = (
        f"import sys; sys.path.insert(0, {folder!r}); import {module}; "
        "import torch.utils.cpp_extension as c; print(c.CUDA_HOME)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    used = result.stdout.strip().splitlines()[-1]
    assert used == "/usr/local/cuda"
    logged = re.findall(r"using CUDA_HOME='([^']*)'", result.stderr)
    assert all(shown == used for shown in logged), result.stderr


# <torch/extension.h> (all of torch's C++ API) and <ATen/ATen.h> (every ATen op) cost a file
# several times the compile time of the headers it uses (docs/perf/cpu/chapter1_header_costs.md),
# and nvcc parses a .cu's headers several times over. The course's files include what they use
# (chapter 1, "Narrow headers"); the one-line way is named in the lessons, never used.
ALL_OF_TORCH = re.compile(r'^\s*#\s*include\s*[<"](torch/extension\.h|ATen/ATen\.h)[>"]', re.M)
CPP_SUFFIXES = (".cpp", ".h", ".cu", ".cuh", ".cpp.in", ".cu.in")


def test_no_source_includes_all_of_torch():
    sources = [path for path in tracked_text_files() if path.name.endswith(CPP_SUFFIXES)]
    assert len(sources) > 40
    everything = [str(p.relative_to(REPO)) for p in sources if ALL_OF_TORCH.search(p.read_text())]
    assert everything == [], f"include what a file uses, not all of torch: {everything}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_no_two_scripts_of_a_chapter_share_a_module_name(chapter):
    """A chapter's scripts import each other by putting their folders on sys.path, and tests of
    several folders run in one process: two files of one name (a profile_x.py in benchmarks/ and
    in kernel_languages/) mean one of them imports the other's module. Packages (folders with an
    __init__.py) and setup.py scripts have names of their own."""

    def in_a_package(path: Path) -> bool:
        return any((folder / "__init__.py").exists() for folder in path.parents[: -len(REPO.parts)])

    names = [
        p.stem
        for p in chapter.rglob("*.py")
        if "build" not in p.relative_to(chapter).parts
        and p.name != "setup.py"
        and not in_a_package(p)
    ]
    assert sorted({n for n in names if names.count(n) > 1}) == []
