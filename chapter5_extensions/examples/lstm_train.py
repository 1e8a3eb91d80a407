"""The same small sequence model trained twice from the same seed, once with torch.nn.LSTM and once
with custom_ops.LSTM in its place (chapter 5, "A whole LSTM layer"): the two loss curves agree.

    python chapter5_extensions/examples/lstm_train.py              # CUDA when there is a GPU, else the CPU
    python chapter5_extensions/examples/lstm_train.py --steps 20 --device cpu

The task: read 48 steps of a noisy sum of two sines and predict the next value at every step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the chapter folder
import build_inplace


class Forecaster(torch.nn.Module):
    """Two LSTM layers and a linear read-out of every step's hidden state."""

    def __init__(self, lstm_class, hidden: int = 64) -> None:
        super().__init__()
        self.lstm = lstm_class(1, hidden, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0])


def batches(steps: int, batch: int, length: int, device, seed: int = 0):
    """(input, target) pairs: target is the input shifted one step to the left."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        t = torch.arange(length + 1) * 0.2 + torch.rand(batch, 1, generator=g) * 6.28
        freq = 0.5 + torch.rand(batch, 1, generator=g)
        wave = torch.sin(t) + 0.5 * torch.sin(freq * t) + 0.05 * torch.randn(t.shape, generator=g)
        wave = wave.unsqueeze(-1).to(device)
        yield wave[:, :-1], wave[:, 1:]


def train(lstm_class, steps: int, device, init_state: dict | None = None) -> tuple[list, dict]:
    """Losses of `steps` Adam steps; the model starts from init_state when given."""
    torch.manual_seed(0)
    model = Forecaster(lstm_class).to(device)
    if init_state is not None:
        model.load_state_dict(init_state)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for x, target in batches(steps, batch=32, length=48, device=device):
        loss = torch.nn.functional.mse_loss(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    build_inplace.build_inplace()
    import custom_ops

    theirs, start = train(torch.nn.LSTM, args.steps, args.device)
    ours, _ = train(custom_ops.LSTM, args.steps, args.device, init_state=start)
    return compare_curves(theirs, ours, args.device, "MSE loss")


def compare_curves(theirs: list[float], ours: list[float], device: str, what: str) -> int:
    """Prints the two loss curves side by side and their largest relative gap; 1 (a failure)
    when it is beyond what the device's arithmetic explains, else 0. tagger_train.py uses it too."""
    steps, every = len(theirs), max(len(theirs) // 10, 1)
    print(f"{steps} Adam steps on {device}; {what} every {every}:")
    print(" step  torch.nn.LSTM  custom_ops.LSTM")
    for step in range(0, steps, every):
        print(f"{step:5d}  {theirs[step]:13.6f}  {ours[step]:15.6f}")
    gap = max(abs(a - b) / abs(a) for a, b in zip(theirs, ours, strict=True))
    print(f"last loss {theirs[-1]:.6f} vs {ours[-1]:.6f}; largest relative gap {gap:.2e}")
    # On the CPU both run in float32 with the same products; on CUDA both use TF32 (cuDNN's
    # default for RNNs, which ours follows) but not the same kernels, and the rounding differences
    # grow over the steps of training.
    tolerance = 1e-5 if device == "cpu" else 3e-2
    if gap > tolerance:
        print(f"FAILED: the curves differ by more than {tolerance:.0e}")
        return 1
    print(f"the two curves agree within {tolerance:.0e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
