"""Training with the custom layer: a small MLP on synthetic data, trained twice from the same
initial weights, once with FusedBiasReLU (our forward and backward) and once with plain PyTorch
(Linear with bias, then ReLU). The losses must agree step by step (lesson: "A model that trains").

    python chapter4_autograd/train_demo.py [--steps 200] [--device cuda] [--plot PATH.png]
    python chapter4_autograd/train_demo.py --plot-from PATH.json  # PATH.png again from --plot's losses

--plot writes the losses beside the PNG, as PATH.json; --plot-from redraws from them without
training (and without building chapter 4's extension).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
from pathlib import Path

import torch
from matplotlib.figure import Figure

import plot_style


def make_models(device: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    # Imported here, not above: importing functions builds chapter 4's extension (or loads the
    # cached build), which --plot-from does not need.
    from functions import FusedBiasReLU

    torch.manual_seed(0)
    plain = torch.nn.Sequential(
        torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)
    ).to(device)
    custom = torch.nn.Sequential(
        torch.nn.Linear(32, 128, bias=False), FusedBiasReLU(128), torch.nn.Linear(128, 1)
    ).to(device)
    # The same numbers in both: the first Linear's bias moves into FusedBiasReLU.
    with torch.no_grad():
        custom[0].weight.copy_(plain[0].weight)
        custom[1].bias.copy_(plain[0].bias)
        custom[2].load_state_dict(copy.deepcopy(plain[2].state_dict()))
    return custom, plain


def train(steps: int = 200, device: str = "cpu") -> tuple[list[float], list[float]]:
    """Loss per step for (custom, plain), full-batch SGD on y = sin(x . w) + noise."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(1024, 32, generator=generator)
    y = torch.sin(x @ torch.randn(32, 1, generator=generator)) + 0.05 * torch.randn(
        1024, 1, generator=generator
    )
    x, y = x.to(device), y.to(device)
    curves = []
    for model in make_models(device):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for _ in range(steps):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        curves.append(losses)
    return curves[0], curves[1]


def plot(result: dict, path: Path) -> Figure:
    """The loss per step of both models, on a log axis: two curves that lie on top of each other."""
    fig = plot_style.figure(height=4.5)
    ax = fig.subplots()
    ax.plot(result["custom"], label="FusedBiasReLU (chapter 4)", marker="")
    ax.plot(result["plain"], label="Linear + ReLU (PyTorch)", marker="", linestyle="--")
    ax.set_xlabel("step")
    plot_style.log_axis(ax, "y")
    ax.set_ylabel("MSE loss")
    ax.set_title("The same model trained two ways", loc="left")
    plot_style.legend_below(fig, ncols=2)
    fig.suptitle(f"{result['device'].upper()}, torch {result['torch']}, {result['date']}")
    plot_style.save(fig, path)
    return fig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--plot", type=Path, help="also save both curves as a PNG here, their losses as .json"
    )
    parser.add_argument(
        "--plot-from", type=Path, help="only redraw the PNG beside this JSON of --plot's losses"
    )
    args = parser.parse_args(argv)
    if args.plot_from:
        plot(json.loads(args.plot_from.read_text()), args.plot_from.with_suffix(".png"))
        print(f"plot: {args.plot_from.with_suffix('.png')}")
        return
    custom, plain = train(args.steps, args.device)
    print(f"{'step':>5} {'FusedBiasReLU':>14} {'plain PyTorch':>14} {'difference':>11}")
    for step in sorted({0, 1, 2, args.steps // 4, args.steps // 2, args.steps - 1}):
        print(
            f"{step:5d} {custom[step]:14.6f} {plain[step]:14.6f} {custom[step] - plain[step]:11.1e}"
        )
    worst = max(abs(a - b) / abs(b) for a, b in zip(custom, plain, strict=True))
    print(f"largest relative difference over {args.steps} steps: {worst:.1e} ({args.device})")
    if args.plot:
        result = {
            "device": args.device,
            "torch": torch.__version__,
            "date": datetime.date.today().isoformat(),
            "custom": custom,
            "plain": plain,
        }
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        args.plot.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
        plot(result, args.plot)
        print(f"plot: {args.plot} (losses: {args.plot.with_suffix('.json')})")


if __name__ == "__main__":
    main()
