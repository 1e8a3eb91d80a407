"""The in-place build that chapter 5's tests and scripts share (build_utils.build_inplace_with_setup_py),
on a tiny C extension so that each build takes a second: an unchanged build skips setup.py, a
touched header rebuilds, two builds started at once both succeed. And chapter 5's setup.py lists
every header as a dependency, .cuh included."""

from __future__ import annotations

import runpy
import subprocess
import sys
import time
from pathlib import Path

import pytest
import setuptools

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import build_utils  # noqa: E402

SETUP_PY = """
from setuptools import Extension, setup
setup(
    name="tiny",
    packages=["tiny"],
    ext_modules=[Extension("tiny._C", ["csrc/tiny.c"], depends=["csrc/value.cuh"])],
)
"""

TINY_C = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "value.cuh"
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&module);
  PyModule_AddIntConstant(m, "VALUE", VALUE);
  return m;
}
"""


def make_package(folder: Path, value: int) -> Path:
    (folder / "csrc").mkdir(parents=True)
    (folder / "tiny").mkdir()
    (folder / "tiny" / "__init__.py").write_text("")
    (folder / "setup.py").write_text(SETUP_PY)
    (folder / "csrc" / "tiny.c").write_text(TINY_C)
    (folder / "csrc" / "value.cuh").write_text(f"#define VALUE {value}\n")
    return folder


def built_value(folder: Path) -> int:
    """VALUE as the built module has it, read in a new process (this one may have loaded it)."""
    script = "import tiny._C; print(tiny._C.VALUE)"
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, check=True
    )
    return int(out.stdout)


def test_an_unchanged_build_skips_setup_py_and_a_touched_header_rebuilds(tmp_path):
    folder = make_package(tmp_path / "pkg", value=1)
    assert build_utils.build_inplace_with_setup_py(folder).startswith("built in")
    assert built_value(folder) == 1
    assert build_utils.build_inplace_with_setup_py(folder) == "up to date"
    # A header alone changes: the stamp no longer matches, and setuptools (which compares the
    # .so's time with the sources and `depends`) recompiles.
    time.sleep(0.01)
    (folder / "csrc" / "value.cuh").write_text("#define VALUE 2\n")
    assert build_utils.build_inplace_with_setup_py(folder).startswith("built in")
    assert built_value(folder) == 2
    # So does a build variable: the same sources built for another configuration.
    assert build_utils.build_inplace_with_setup_py(folder, {"DEBUG": "1"}).startswith("built in")


@pytest.mark.slow
def test_two_builds_started_at_once_both_succeed(tmp_path):
    """What pytest -n 8, or `make test` in one terminal and `make check` in another, does: the
    second waits on the lock, then finds the first's build (no half-written .so is loaded)."""
    folder = make_package(tmp_path / "pkg", value=7)
    script = (
        f"import sys; sys.path.insert(0, {str(REPO / 'tools')!r}); import build_utils; "
        f"print(build_utils.build_inplace_with_setup_py(__import__('pathlib').Path({str(folder)!r})))"
    )
    builds = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    # The last line each printed: what it did (the build announces itself on the lines before).
    said = [b.communicate(timeout=300)[0].strip().splitlines()[-1] for b in builds]
    assert [b.returncode for b in builds] == [0, 0]
    # One compiled; the other found its work done, after waiting on the lock or not at all.
    built = [s for s in said if s.startswith("built in")]
    assert len(built) == 1, said
    assert set(said) - set(built) <= {"built by another process", "up to date"}, said
    assert built_value(folder) == 7


def test_chapter5_setup_py_lists_every_header_as_a_dependency(monkeypatch):
    """setuptools rebuilds only when a source or a listed dependency is newer than the .so: a
    header missing from `depends` (launch_utils.cuh once was) can leave a stale build loaded."""
    captured = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: captured.update(kwargs))
    for folder in (REPO / "chapter5_extensions", REPO / "chapter5_extensions" / "stable"):
        monkeypatch.chdir(folder)
        runpy.run_path(str(folder / "setup.py"))
        (extension,) = captured["ext_modules"]
        headers = {
            str(p.relative_to(folder))
            for p in (folder / "csrc").rglob("*")
            if p.suffix in {".h", ".cuh", ".hpp"}
        }
        assert headers and headers <= set(extension.depends), folder
