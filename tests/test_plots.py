"""Every plot the lessons show, drawn again from its committed JSON with the course's plot style
(plot_style.py): a PNG as wide as the style promises, on a transparent background (the site shows
it on a light page and a dark one), with a throughput's axis from 0 and a log axis labelled in
plain numbers. No GPU and no extension build: each script's --plot-from reads only the JSON.

    .venv/bin/python -m pytest -q tests/test_plots.py
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]

# PNG -> (the script that draws it, whether its y axis is a throughput and starts at 0). The JSON
# beside each PNG holds what the script measured.
PLOTS = {
    "docs/perf/h100/chapter3_cuda.png": ("chapter3_cuda_kernels/benchmark.py", True),
    "docs/perf/h100/chapter3_block_sweep.png": ("chapter3_cuda_kernels/block_sweep.py", True),
    "docs/perf/h100/chapter5_cuda.png": ("chapter5_extensions/benchmarks/benchmark.py", True),
    "docs/perf/h100/kernel_languages.png": (
        "chapter5_extensions/kernel_languages/benchmark_kernel_languages.py",
        True,
    ),
    # GPU ms and a loss, on log axes: no zero there.
    "docs/perf/h100/lstm_layer.png": ("chapter5_extensions/benchmarks/benchmark_lstm.py", False),
    "docs/perf/cpu/chapter4_training.png": ("chapter4_autograd/train_demo.py", False),
}
MAX_BYTES = 300_000  # a page with three plots stays quick to load on a phone


def load_script(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script at `path`, imported by path under a name of its own (two chapters have a
    benchmark.py), its folder first on sys.path as when it runs (until the test ends)."""
    monkeypatch.syspath_prepend(str(path.parent))
    name = "_".join(path.relative_to(REPO).with_suffix("").parts)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plot_style() -> ModuleType:
    """Chapter 3's plot_style.py (each chapter that plots has an identical copy)."""
    path = REPO / "chapter3_cuda_kernels" / "plot_style.py"
    spec = importlib.util.spec_from_file_location("plot_style", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def transparent_background(png: Image.Image) -> bool:
    """An alpha channel, and the top-left corner (outside every axes) fully transparent."""
    return png.mode == "RGBA" and png.getpixel((0, 0))[3] == 0


@pytest.mark.parametrize("png", PLOTS)
def test_plot_is_redrawn_from_its_json_in_the_course_style(png, tmp_path, monkeypatch):
    """`script --plot-from X.json` writes X.png: as wide as the style says, transparent around
    the axes, small. A throughput's bars and lines are compared by height: its axis starts at 0.
    A log axis says 1, 2, 5, 10, not 10^0 and 10^1."""
    script, zero_based = PLOTS[png]
    module = load_script(REPO / script, monkeypatch)
    figures = []  # what plot() returned, for its axes
    plot = module.plot
    monkeypatch.setattr(module, "plot", lambda *args: figures.append(plot(*args)) or figures[-1])
    data = shutil.copy(REPO / png.replace(".png", ".json"), tmp_path)

    assert module.main(["--plot-from", str(data)]) in (None, 0)
    drawn = tmp_path / Path(png).name
    with Image.open(drawn) as image:
        assert image.width == module.plot_style.WIDTH_PX
        assert transparent_background(image)
    assert drawn.stat().st_size < MAX_BYTES
    (fig,) = figures
    assert fig.get_axes()
    for ax in fig.get_axes():
        title = ax.get_title(loc="left")
        if zero_based:
            assert ax.get_ylim()[0] == 0, f"{title}: its y axis starts at {ax.get_ylim()[0]}"
        if ax.get_yscale() == "log":
            low, high = ax.get_ylim()
            ticks = [t for t in ax.get_yticklabels() if low <= t.get_position()[1] <= high]
            labels = [t.get_text() for t in ticks]
            assert len(labels) >= 3, f"{title}: {labels}"
            assert all(re.fullmatch(r"[\d,.]+", label) for label in labels), f"{title}: {labels}"


@pytest.mark.parametrize("png", PLOTS)
def test_committed_plot_is_in_the_course_style(png):
    """The PNG the lessons link: redrawn after the last change to the style (--plot-from)."""
    redraw = f"redraw it: python {PLOTS[png][0]} --plot-from {png.replace('.png', '.json')}"
    with Image.open(REPO / png) as image:
        assert image.width == plot_style().WIDTH_PX, redraw
        assert transparent_background(image), redraw
    assert (REPO / png).stat().st_size < MAX_BYTES
