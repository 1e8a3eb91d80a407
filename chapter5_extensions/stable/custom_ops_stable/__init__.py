"""custom_ops_stable: relu and fused_bias_relu built against PyTorch's stable ABI (chapter 5,
"Shipping one wheel for every torch: the stable ABI"). One wheel for every torch from 2.11 on.

    import custom_ops_stable
    y = custom_ops_stable.fused_bias_relu(x, bias, scale=0.5)  # torch.ops.custom_ops_stable.*

Importing the package loads custom_ops_stable._C, whose STABLE_TORCH_LIBRARY blocks register the
operators; ops.py then adds their fake kernels and autograd formulas, as custom_ops's ops.py.
"""

from __future__ import annotations

import torch  # first: _C calls into torch's shared libraries

try:
    from . import _C  # noqa: F401  (registers torch.ops.custom_ops_stable.*)
except ImportError as error:
    raise ImportError(
        "custom_ops_stable._C is not built: pip install --no-build-isolation "
        "./chapter5_extensions/stable, or python chapter5_extensions/stable/build_stable.py"
    ) from error
from .ops import fused_bias_relu, relu

__all__ = ["built_with_cuda", "fused_bias_relu", "relu"]


def built_with_cuda() -> bool:
    """Whether this build has CUDA kernels (USE_CUDA=1), whatever the machine has now."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("custom_ops_stable::relu", "CUDA")
