"""A bidirectional tagger over sentences of different lengths, trained twice from the same seed:
once with torch.nn.LSTM, once with custom_ops.LSTM in its place (chapter 5, Part 2, "Both
directions, projections, packed batches"). The two loss curves agree.

    python chapter5_extensions/examples/tagger_train.py              # CUDA when there is a GPU
    python chapter5_extensions/examples/tagger_train.py --steps 20 --device cpu --proj-size 16

The task: a sentence is 3 to 30 random tokens; each token's tag is (the token before it + the
token after it) mod 4, so no tag can be read in one direction alone. Sentences are padded to
the longest in the batch, packed with pack_padded_sequence (unsorted: the packing sorts and
unsorts), and the loss skips the padding.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the chapter folder
sys.path.insert(0, str(Path(__file__).resolve().parent))  # lstm_train, beside this file
from lstm_train import compare_curves

import build_inplace

VOCAB, TAGS, PAD = 16, 4, -100  # PAD: cross_entropy's ignore_index, in the target only


class Tagger(torch.nn.Module):
    """Embedding, a two-layer bidirectional LSTM over the packed batch, a tag per token."""

    def __init__(self, lstm_class, hidden: int = 64, proj_size: int = 0) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 32)
        self.lstm = lstm_class(
            32, hidden, num_layers=2, bidirectional=True, proj_size=proj_size, batch_first=True
        )
        self.head = torch.nn.Linear(2 * (proj_size or hidden), TAGS)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(
            self.embed(tokens), lengths, batch_first=True, enforce_sorted=False
        )
        y, _ = self.lstm(packed)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=tokens.shape[1])
        return self.head(y)  # (batch, longest, TAGS); the padded rows are zeros, and ignored


def batches(steps: int, batch: int, device, seed: int = 0):
    """(tokens, lengths, tags): tokens padded with 0, lengths on the CPU (as packing wants them),
    tags PAD beyond each sentence's end."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        lengths = torch.randint(3, 31, (batch,), generator=g)
        longest = int(lengths.max())
        tokens = torch.randint(0, VOCAB, (batch, longest), generator=g)
        inside = torch.arange(longest) < lengths.unsqueeze(1)
        tokens = tokens * inside
        before = torch.nn.functional.pad(tokens, (1, 0))[:, :-1]
        after = torch.nn.functional.pad(tokens, (0, 1))[:, 1:]  # 0 past the end: tokens are 0 there
        tags = torch.where(inside, (before + after) % TAGS, PAD)
        yield tokens.to(device), lengths, tags.to(device)


def train(lstm_class, steps: int, device, proj_size: int, init_state: dict | None = None):
    """Losses and final accuracy of `steps` Adam steps; the model starts from init_state when
    given, and the state it started from is returned."""
    torch.manual_seed(0)
    model = Tagger(lstm_class, proj_size=proj_size).to(device)
    if init_state is not None:
        model.load_state_dict(init_state)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses, accuracy = [], 0.0
    for tokens, lengths, tags in batches(steps, batch=32, device=device):
        logits = model(tokens, lengths)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tags.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        real = tags != PAD
        accuracy = (logits.argmax(-1)[real] == tags[real]).float().mean().item()
    return losses, accuracy, start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--proj-size", type=int, default=0, help="nn.LSTM's proj_size (0: none)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    build_inplace.build_inplace()
    import custom_ops

    theirs, acc_theirs, start = train(torch.nn.LSTM, args.steps, args.device, args.proj_size)
    ours, acc_ours, _ = train(
        custom_ops.LSTM, args.steps, args.device, args.proj_size, init_state=start
    )
    print(f"tag accuracy on the last batch: {acc_theirs:.3f} (nn.LSTM), {acc_ours:.3f} (ours)")
    return compare_curves(theirs, ours, args.device, "cross-entropy")


if __name__ == "__main__":
    raise SystemExit(main())
