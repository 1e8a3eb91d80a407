"""The custom layer beyond one process: train a small model with FusedBiasReLU under
DistributedDataParallel, then check that it ends where one process on the whole batch ends.

    torchrun --standalone --nproc_per_node=2 chapter5_extensions/ddp_train.py --device cpu
    torchrun --standalone --nproc_per_node=2 chapter5_extensions/ddp_train.py --device cuda  # 2 GPUs

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import custom_ops


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)  # the same initial weights in every process and in the reference
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32, bias=False),
        custom_ops.FusedBiasReLU(32, scale=0.5),
        torch.nn.Linear(32, 1),
    )


def make_data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, 16, generator=generator)
    return x, (x[:, :1] * 2 - x[:, 1:2]).tanh()


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
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend="nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    x, y = make_data()
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
            f"DDP ({world} processes) {verdict} one process: largest weight difference {worst:.1e}"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
