"""Shared pytest fixtures for every chapter of the course.

- `device`: run a test once on "cpu" and once on "cuda"; the CUDA case is skipped, with the
  reason printed, on a machine without a GPU (CI, most laptops).
- `@pytest.mark.cuda`: the same skip for a whole test that only makes sense on a GPU.
- `@pytest.mark.sanitize`: small-shape CUDA tests that `make gpu-check` reruns under
  compute-sanitizer (its checks make kernels many times slower, so only small shapes go there).
- `import_own_script`: load a script (demo.py, benchmark.py) from the test file's own folder.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from collections.abc import Callable
from types import ModuleType

import pytest
import torch


def _no_cuda_reason() -> str | None:
    """Why CUDA tests cannot run here, or None when they can."""
    if torch.version.cuda is None:
        return f"no CUDA: this torch ({torch.__version__}) is a CPU-only build"
    if not torch.cuda.is_available():
        return "no CUDA device: torch.cuda.is_available() is False (run make gpu-check on a GPU)"
    return None


NO_CUDA_REASON = _no_cuda_reason()
HAS_CUDA = NO_CUDA_REASON is None


def pytest_report_header(config: pytest.Config) -> list[str]:
    gpu = torch.cuda.get_device_name() if HAS_CUDA else NO_CUDA_REASON
    return [
        f"torch {torch.__version__} (CUDA {torch.version.cuda}), python {platform.python_version()}",
        f"gpu: {gpu}",
        f"TORCH_EXTENSIONS_DIR={os.environ.get('TORCH_EXTENSIONS_DIR', '(unset: chapter default)')}",
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Notebooks last: a chapter's tests build its extension in this process, and the notebook
    # (a separate kernel, under nbmake's timeout) then loads the cached build instead of
    # compiling it. (Collected in file order, chapterN.ipynb would come before test_chapterN.py.)
    items.sort(key=lambda item: item.path.suffix == ".ipynb")
    _group_xdist_groups(config, items)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Under pytest -n, the slow tests first, longest first (`slow(seconds=N)`: about how long
        # the test takes in make gpu-check): each starts on a worker of its own while the
        # thousands of quick tests fill the others, instead of one starting near the end and
        # keeping the whole run waiting for it.
        items.sort(key=_slow_first)
    if HAS_CUDA:
        return
    skip_cuda = pytest.mark.skip(reason=NO_CUDA_REASON)
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip_cuda)


def _group_xdist_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--dist loadgroup` sends the tests of one `xdist_group` to one worker by the group name
    that pytest-xdist appends to their node ids ("...[ch1/errors]@exercise_checker"). It appends
    it to `item._nodeid`, which pytest 9.2 no longer reads (a node's id is now `item._id`): the
    groups were silently spread over every worker, and each worker set up their shared fixture.
    So: append it where this pytest reads it (tests/test_repo.py checks that the groups hold).
    With an older pytest, which has no `item._id`, pytest-xdist's own way works and this does
    nothing."""
    # getattr: without pytest-xdist (the stable wheel's test venv), there is no such option.
    if getattr(config.option, "dist", None) != "loadgroup" and not getattr(
        config.option, "loadgroup", False
    ):
        return
    for item in items:
        groups = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        node_id = getattr(item, "_id", None)
        if groups and "@" not in item.nodeid and node_id is not None:
            item._id = type(node_id).parse(f"{item.nodeid}@{'_'.join(groups)}")


def _slow_first(item: pytest.Item) -> tuple[int, float]:
    slow = item.get_closest_marker("slow")
    return (1, 0.0) if slow is None else (0, -slow.kwargs.get("seconds", 0))


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each test that takes `device` runs on the CPU and, where there is one, on the GPU."""
    return torch.device(request.param)


@pytest.fixture
def generator() -> torch.Generator:
    """A seeded CPU generator: random test data that is the same on every run."""
    return torch.Generator().manual_seed(0)


@pytest.fixture
def import_own_script(request: pytest.FixtureRequest) -> Callable[[str], ModuleType]:
    """`import_own_script("demo")` loads demo.py from the test file's folder, by path: every
    chapter has a demo.py and a benchmark.py, and when one pytest run collects all chapters,
    `import demo` would find whichever chapter's came first on sys.path. A script in a subfolder
    is named by its path: `import_own_script("benchmarks/benchmark")`."""
    folder = request.path.parent

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(
            f"{folder.name}_{name.replace('/', '_')}", folder / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
