"""nn.Modules over custom_ops: what a model uses.

FusedBiasReLU(features)   relu(x * scale + bias) with a learned bias, after Linear(bias=False)
LSTMCell(input, hidden)   a drop-in for torch.nn.LSTMCell: same parameters and state_dict
ConvRNN(features, k)      the convolutional RNN, forward only (the kernel is a buffer)
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import ops


class FusedBiasReLU(torch.nn.Module):
    """relu(x * scale + bias) with a learned bias of `features` elements."""

    def __init__(self, features: int, scale: float = 1.0, device=None, dtype=None) -> None:
        super().__init__()
        self.scale = scale
        self.bias = torch.nn.Parameter(torch.zeros(features, device=device, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        return ops.fused_bias_relu(x, self.bias, self.scale)

    def extra_repr(self) -> str:
        return f"features={self.bias.numel()}, scale={self.scale}"


class LSTMCell(torch.nn.LSTMCell):
    """torch.nn.LSTMCell computed by custom_ops.lstm_cell: same constructor, parameters,
    state_dict and call (`cell(x, hx=(h, c))`, unbatched 1-D input, bias=False)."""

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
        unbatched = input.dim() == 1
        x = input.unsqueeze(0) if unbatched else input
        if hx is None:
            zeros = x.new_zeros(x.shape[0], self.hidden_size)
            hx = (zeros, zeros)
        h, c = (t.unsqueeze(0) for t in hx) if unbatched else hx
        if self.bias:
            b_ih, b_hh = self.bias_ih, self.bias_hh
        else:  # the op always adds biases: zeros, which get no gradient
            b_ih = b_hh = x.new_zeros(4 * self.hidden_size)
        h_next, c_next = ops.lstm_cell(x, h, c, self.weight_ih, self.weight_hh, b_ih, b_hh)
        return (h_next.squeeze(0), c_next.squeeze(0)) if unbatched else (h_next, c_next)


class ConvRNN(torch.nn.Module):
    """h_t = tanh(x_t + conv(h_{t-1}, kernel)) over x (batch, time, features); forward only.

    The kernel is a buffer, not a parameter: conv_rnn has no backward, so it cannot be learned.
    """

    def __init__(self, features: int, kernel_size: int = 3, device=None, dtype=None) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError(f"ConvRNN: kernel_size must be odd, got {kernel_size}")
        self.features = features
        kernel = torch.randn(kernel_size, device=device, dtype=dtype) / kernel_size
        self.register_buffer("kernel", kernel)

    def forward(self, x: Tensor, hidden: Tensor | None = None) -> Tensor:
        if hidden is None:
            hidden = x.new_zeros(x.shape[0], x.shape[2])
        return ops.conv_rnn(x, self.kernel, hidden)

    def extra_repr(self) -> str:
        return f"features={self.features}, kernel_size={self.kernel.numel()}"
