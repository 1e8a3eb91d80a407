"""custom_ops: the course's kernels as a library of PyTorch operators (chapter 5).

    import custom_ops
    y = custom_ops.fused_bias_relu(x, bias, scale=0.5)      # or torch.ops.custom_ops.fused_bias_relu
    layer = custom_ops.FusedBiasReLU(features=4096)

Importing the package loads custom_ops._C, whose static initializers register the operators
with PyTorch's dispatcher; ops.py then adds their fake kernels and autograd formulas.
"""

from __future__ import annotations

import torch  # first: _C links against torch's own shared libraries

try:
    from . import _C  # noqa: F401  (registers torch.ops.custom_ops.*)
except ImportError as error:
    raise ImportError(
        "custom_ops._C is not built: pip install --no-build-isolation ./chapter5_extensions, or "
        "python chapter5_extensions/build_inplace.py for the course's in-place build"
    ) from error
from .modules import LSTM, ConvRNN, FusedBiasReLU, LSTMCell
from .ops import (
    conv_rnn,
    fused_bias_relu,
    lstm,
    lstm_cell,
    lstm_packed,
    lstm_paths,
    reduce_sum,
    relu,
)

# The names of the classic "Chapter 5" README this package grew from (README: "Coming from the
# classic layout"): the same op and module, nothing of their own.
fused_op_forward = fused_bias_relu  # relu(x * scale + bias), the op custom_ops::fused_bias_relu
FusedOpLayer = FusedBiasReLU  # FusedOpLayer(features, scale): a learned bias, zero at the start

__all__ = [
    "LSTM",
    "ConvRNN",
    "FusedBiasReLU",
    "FusedOpLayer",
    "LSTMCell",
    "built_with_cuda",
    "conv_rnn",
    "fused_bias_relu",
    "fused_op_forward",
    "lstm",
    "lstm_cell",
    "lstm_packed",
    "lstm_paths",
    "reduce_sum",
    "relu",
]


def built_with_cuda() -> bool:
    """Whether this build has CUDA kernels (USE_CUDA=1), whatever the machine has now."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("custom_ops::relu", "CUDA")
