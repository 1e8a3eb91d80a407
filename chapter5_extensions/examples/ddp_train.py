"""The custom layers beyond one process: train two small models, one with FusedBiasReLU and one
with the LSTM layer (custom_ops.LSTM), under DistributedDataParallel, then check that each ends
where one process on the whole batch ends.

    torchrun --standalone --nproc_per_node=2 chapter5_extensions/examples/ddp_train.py --device cpu
    torchrun --standalone --nproc_per_node=2 chapter5_extensions/examples/ddp_train.py --device cuda  # 2 GPUs

Each process gets half of the batch; DDP averages the gradients across processes after every
backward (gloo on the CPU, NCCL between GPUs), which for equal halves and a mean loss is exactly
the whole batch's gradient. Nothing in the custom op knows about any of this: DDP works on the
parameters and their gradients, which our autograd formula fills like any other op's.
Build the package first (python chapter5_extensions/build_inplace.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the chapter folder

import custom_ops


def make_mlp() -> torch.nn.Module:
    torch.manual_seed(0)  # the same initial weights in every process and in the reference
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32, bias=False),
        custom_ops.FusedBiasReLU(32, scale=0.5),
        torch.nn.Linear(32, 1),
    )


class SequenceModel(torch.nn.Module):
    """custom_ops.LSTM over a sequence (batch, time, 16); its last output through a Linear."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lstm = custom_ops.LSTM(16, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def make_data(time_steps: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """64 examples of 16 features (or of time_steps x 16) and a target that depends on them."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, *([time_steps] if time_steps else []), 16, generator=generator)
    last = x[:, -1] if time_steps else x
    return x, (last[:, :1] * 2 - last[:, 1:2]).tanh()


# Each model with its data: (name, a new model with the same initial weights, inputs and targets).
MODELS = [
    ("FusedBiasReLU", make_mlp, lambda: make_data()),
    ("LSTM", SequenceModel, lambda: make_data(time_steps=8)),
]


def train(model, x, y, steps: int) -> torch.nn.Module:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)

    local_rank = int(os.environ["LOCAL_RANK"])  # set by torchrun, like RANK and WORLD_SIZE
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        # Full float32 products: TF32 would round a half batch's sums and the whole batch's
        # differently, and the comparison below is of the arithmetic, not of TF32.
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend="nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    for name, make_model, data in MODELS:
        x, y = data()
        shard_x, shard_y = x.chunk(world)[rank].to(device), y.chunk(world)[rank].to(device)
        ddp = DistributedDataParallel(
            make_model().to(device), device_ids=[local_rank] if args.device == "cuda" else None
        )
        train(ddp, shard_x, shard_y, args.steps)

        if rank == 0:
            reference = train(make_model().to(device), x.to(device), y.to(device), args.steps)
            worst = max(
                (a - b).abs().max().item()
                for a, b in zip(ddp.module.parameters(), reference.parameters(), strict=True)
            )
            verdict = "matches" if worst < 1e-5 else "DOES NOT match"
            print(
                f"{name} model: DDP ({world} process{'es' if world > 1 else ''}) {verdict} one "
                f"process: largest weight difference {worst:.1e}"
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
