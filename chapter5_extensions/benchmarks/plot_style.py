"""The course's one plot style: every benchmark plot is drawn with it, so that each reads on the
website (shown 800 px wide, in light or dark mode) and on a phone.

    import plot_style
    fig = plot_style.figure(height=4.5)          # 8 inches wide
    ax = fig.subplots()                          # or fig.subplots(1, 2), fig.subfigures(2, 1)
    ax.plot(sizes, floor, **plot_style.REFERENCE, label="copy_")  # a floor or a baseline: dashed
    ax.plot(sizes, gbps, label="v4")             # a result: the style's colours and markers
    plot_style.zero_based_y(ax, "GB/s")          # a throughput: its axis starts at 0
    plot_style.legend_below(fig, ncols=2)
    plot_style.save(fig, path)                   # 1,600 px wide, transparent background

Identical copies live in chapter3_cuda_kernels/, chapter4_autograd/ and
chapter5_extensions/benchmarks/, so that each chapter folder runs on its own;
tests/test_repo.py fails if they differ, tests/test_plots.py draws every committed plot with it.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure, FigureBase
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

WIDTH_INCHES = 8.0
DPI = 200  # 1,600 px: sharp where the site shows it 800 px wide, and on a phone's denser screen
WIDTH_PX = round(WIDTH_INCHES * DPI)

# Text, spines, ticks and grid: a mid gray has about 4:1 contrast on a white page and on the
# site's dark one (#1e2129), and the PNG's background is transparent, so it sits on either.
GRAY = "#808080"
# Series colours chosen the same way (luminance between the two pages': 3:1 or more on both),
# told apart by marker too, where lines overlap or a reader cannot tell hues apart.
COLORS = ["#3a7fd5", "#e07b00", "#2e9e44", "#e0474c", "#a463f2", "#0f9d9a", "#d9559f", "#b58900"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
# A line that is a yardstick rather than a result (copy_'s bandwidth, torch.sum): gray, dashed,
# drawn over the results, which often run along it.
REFERENCE = {"color": GRAY, "linestyle": "--", "linewidth": 2.0, "marker": "", "zorder": 2.5}

# Sizes in points at 200 dpi. The site shows a plot 800 px wide, half its size: 13 pt is 18 px
# there, and 9 px on a phone 390 px wide (which has two or three device pixels to each).
STYLE = {
    "font.size": 14,
    "axes.titlesize": 15,
    "axes.labelsize": 14,
    "xtick.labelsize": 13,
    "ytick.labelsize": 13,
    "legend.fontsize": 13,
    "figure.titlesize": 13,
    "text.color": GRAY,
    "axes.labelcolor": GRAY,
    "axes.titlecolor": GRAY,
    "axes.edgecolor": GRAY,
    "xtick.color": GRAY,
    "ytick.color": GRAY,
    "grid.color": GRAY,
    "grid.alpha": 0.35,
    "axes.grid": True,
    "axes.axisbelow": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": cycler(color=COLORS) + cycler(marker=MARKERS),
    "lines.linewidth": 2.0,
    "lines.markersize": 6,
    "legend.frameon": False,
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.transparent": True,
}


def figure(height: float) -> Figure:
    """An empty Figure WIDTH_INCHES wide and `height` inches tall in the course's style, laid out
    by matplotlib's constrained layout (legends outside the axes included). Sets matplotlib's
    rcParams for the rest of the process: a script draws in one style."""
    matplotlib.rcParams.update(STYLE)
    # A Figure of its own, not pyplot's: no backend to choose, nothing left open after saving.
    return Figure(figsize=(WIDTH_INCHES, height), layout="constrained")


def zero_based_y(ax: Axes, label: str) -> None:
    """A y axis that starts at 0, labelled `label`, its ticks with thousands separators (2,500):
    for a throughput, a ratio or a fraction of a floor, where the bar's or the line's height is
    what a reader compares."""
    ax.set_ylim(bottom=0)
    ax.set_ylabel(label)
    ax.yaxis.set_major_formatter(FuncFormatter(_plain_number))


def legend_below(fig: FigureBase, ncols: int) -> None:
    """One legend under the figure (or a subfigure: one panel's legend under that panel), outside
    the data: each label once, from whichever of its axes has it."""
    handles = {}
    for ax in fig.get_axes():
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncols=ncols)


def _axis(ax: Axes, which: str):
    return {"x": ax.xaxis, "y": ax.yaxis}[which]


def log_axis(ax: Axes, which: str) -> None:
    """A log axis labelled with plain numbers at 1-2-5 steps (0.5, 1, 2, 5, 10, 20), not 10^k;
    at every step of 1 to 9 (0.3, 0.4, 0.5) where the data spans less than a decade. Call it
    after plotting: the steps depend on the data's range."""
    getattr(ax, f"set_{which}scale")("log")
    low, high = getattr(ax, f"get_{which}lim")()
    axis = _axis(ax, which)
    axis.set_major_locator(LogLocator(10, subs=(1, 2, 5) if high / low > 10 else range(1, 10)))
    axis.set_major_formatter(FuncFormatter(_plain_number))
    axis.set_minor_formatter(NullFormatter())


def log2_axis(ax: Axes, which: str, ticks: list[int], *, powers: bool = True) -> None:
    """A base-2 log axis with a tick at each of `ticks` only (a few: a phone shows them too),
    labelled 2^k (powers=True) or as plain numbers (1, 4, 16, 1,024: powers=False)."""
    getattr(ax, f"set_{which}scale")("log", base=2)
    axis = _axis(ax, which)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(_power_of_two if powers else _plain_number))


def _power_of_two(value: float, _position) -> str:
    return f"$2^{{{round(math.log2(value))}}}$"


def _plain_number(value: float, _position) -> str:
    return f"{value:,g}"  # 0.5, 20, 2,500


def save(fig: Figure, path: Path) -> None:
    """PNG at DPI, WIDTH_PX wide, on a transparent background, without the metadata (software,
    date) that would make every redraw a new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, transparent=True, metadata={"Software": None})
