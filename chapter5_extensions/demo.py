"""A tour of chapter 5's package: build it in place, list what it registered with PyTorch's
dispatcher, then run the user's side (example_usage.py).

    python chapter5_extensions/demo.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import build_inplace  # noqa: E402
import example_usage  # noqa: E402


def main() -> None:
    build_inplace.build_inplace()
    import custom_ops  # noqa: F401  (registers the ops)

    print("operators in torch.ops.custom_ops, and the devices with a kernel for each:")
    for name in sorted(n for n in dir(torch.ops.custom_ops) if not n.startswith("_")):
        packet = getattr(torch.ops.custom_ops, name)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        keys = [
            key
            for key in ("CPU", "CUDA")
            if torch._C._dispatch_has_kernel_for_dispatch_key(f"custom_ops::{name}", key)
        ]
        print(f"  {packet.default._schema}   [{', '.join(keys)}]")
    print()
    example_usage.main()


if __name__ == "__main__":
    main()
