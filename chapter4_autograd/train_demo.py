"""Training with the custom layer: a small MLP on synthetic data, trained twice from the same
initial weights, once with FusedBiasReLU (our forward and backward) and once with plain PyTorch
(Linear with bias, then ReLU). The losses must agree step by step (lesson: "A model that trains").

    python chapter4_autograd/train_demo.py [--steps 200] [--device cuda] [--plot PATH]
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import torch

from functions import FusedBiasReLU


def make_models(device: str) -> tuple[torch.nn.Module, torch.nn.Module]:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--plot", type=Path, help="also save both curves as a PNG here")
    args = parser.parse_args(argv)
    custom, plain = train(args.steps, args.device)
    print(f"{'step':>5} {'FusedBiasReLU':>14} {'plain PyTorch':>14} {'difference':>11}")
    for step in sorted({0, 1, 2, args.steps // 4, args.steps // 2, args.steps - 1}):
        print(
            f"{step:5d} {custom[step]:14.6f} {plain[step]:14.6f} {custom[step] - plain[step]:11.1e}"
        )
    worst = max(abs(a - b) / abs(b) for a, b in zip(custom, plain, strict=True))
    print(f"largest relative difference over {args.steps} steps: {worst:.1e} ({args.device})")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(custom, label="FusedBiasReLU (chapter 4)")
        ax.plot(plain, "--", label="Linear + ReLU (PyTorch)")
        ax.set_xlabel("step")
        ax.set_ylabel("MSE loss")
        ax.set_yscale("log")
        ax.legend()
        fig.tight_layout()
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=110)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
