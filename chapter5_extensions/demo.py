"""A tour of chapter 5's package: build it in place, list what it registered with PyTorch's
dispatcher, then run the user's side (examples/example_usage.py).

    python chapter5_extensions/demo.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "examples"))

import example_usage  # noqa: E402

import build_inplace  # noqa: E402


def registered_ops(namespace: str) -> list[str]:
    """Every operator the dispatcher holds under `namespace`, as "name" or "name.overload".

    The dispatcher's own list, not `dir(torch.ops.<namespace>)`: that shows only the ops Python
    has already looked up, which depends on what ran before."""
    prefix = f"{namespace}::"
    return sorted(
        name.removeprefix(prefix)
        for name in torch._C._dispatch_get_all_op_names()
        if name.startswith(prefix)
    )


def main() -> None:
    build_inplace.build_inplace()
    import custom_ops  # noqa: F401  (registers the ops)

    print("operators registered under custom_ops, and the devices with a kernel for each:")
    for name in registered_ops("custom_ops"):
        op, _, overload = name.partition(".")
        schema = getattr(getattr(torch.ops.custom_ops, op), overload or "default")._schema
        keys = [
            key
            for key in ("CPU", "CUDA")
            if torch._C._dispatch_has_kernel_for_dispatch_key(f"custom_ops::{name}", key)
        ]
        # An op without a tensor argument (a setting) has one kernel for every device.
        print(f"  {schema}   [{', '.join(keys) or 'any device: no tensor argument'}]")
    print()
    example_usage.main()


if __name__ == "__main__":
    main()
