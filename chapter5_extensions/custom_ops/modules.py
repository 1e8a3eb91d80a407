"""nn.Modules over custom_ops: what a model uses.

FusedBiasReLU(features)   relu(x * scale + bias) with a learned bias, after Linear(bias=False)
LSTMCell(input, hidden)   a drop-in for torch.nn.LSTMCell: same parameters and state_dict
LSTM(input, hidden, ...)  a drop-in for torch.nn.LSTM (one direction): the time loop in C++/CUDA
ConvRNN(features, k)      the convolutional RNN, with a learned kernel of k taps
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


class LSTM(torch.nn.Module):
    """torch.nn.LSTM computed by custom_ops.lstm, one call per layer: the same constructor,
    parameters (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, ...), initialisation,
    state_dict and call (`lstm(x, (h0, c0))` -> `y, (h_n, c_n)`), for num_layers, bias,
    batch_first, dropout and unbatched (2-D) input. Refuses bidirectional=True, proj_size > 0 and
    PackedSequence input, which the op does not implement.

    A plain Module, not a subclass of torch.nn.LSTM: torch.compile refuses every subclass of
    nn.RNNBase ("Dynamo does not support RNN, GRU, or LSTM"), and this one compiles with
    fullgraph=True."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if bidirectional:
            raise ValueError("custom_ops.LSTM: bidirectional=True is not supported (one direction)")
        if proj_size:
            raise ValueError("custom_ops.LSTM: proj_size > 0 is not supported")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError("custom_ops.LSTM: hidden_size and num_layers must be positive")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = False, 0
        factory = dict(device=device, dtype=dtype)
        for layer in range(num_layers):
            fan_in = input_size if layer == 0 else hidden_size
            shapes = {
                "weight_ih": (4 * hidden_size, fan_in),
                "weight_hh": (4 * hidden_size, hidden_size),
            }
            if bias:
                shapes |= {"bias_ih": (4 * hidden_size,), "bias_hh": (4 * hidden_size,)}
            for name, shape in shapes.items():
                self.register_parameter(
                    f"{name}_l{layer}", torch.nn.Parameter(torch.empty(shape, **factory))
                )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in +-1/sqrt(hidden_size), as torch.nn.LSTM initialises."""
        bound = self.hidden_size**-0.5
        for p in self.parameters():
            torch.nn.init.uniform_(p, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        return s

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
        if not isinstance(input, Tensor):  # a PackedSequence
            raise TypeError("custom_ops.LSTM: takes a padded tensor, not a PackedSequence")
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else input
        if self.batch_first and not unbatched:
            x = x.transpose(0, 1)  # the op is time-major; it makes x contiguous itself
        if hx is None:
            h0 = c0 = x.new_zeros(self.num_layers, x.shape[1], self.hidden_size)
        else:
            h0, c0 = (t.unsqueeze(1) for t in hx) if unbatched else hx
        for name, state in (("h0", h0), ("c0", c0)):  # the op checks each layer's (B, H)
            if state.dim() != 3 or state.shape[0] != self.num_layers:
                raise RuntimeError(
                    f"custom_ops.LSTM: {name} must have shape (num_layers={self.num_layers}, "
                    f"batch, hidden), or (num_layers, hidden) for unbatched input; got "
                    f"{tuple(state.shape)}"
                )
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            w_ih = getattr(self, f"weight_ih_l{layer}")
            w_hh = getattr(self, f"weight_hh_l{layer}")
            if self.bias:
                b_ih, b_hh = getattr(self, f"bias_ih_l{layer}"), getattr(self, f"bias_hh_l{layer}")
            else:  # the op always adds biases: zeros, which get no gradient
                b_ih = b_hh = x.new_zeros(4 * self.hidden_size)
            x, h, c = ops.lstm(x, h0[layer], c0[layer], w_ih, w_hh, b_ih, b_hh)
            h_n.append(h)
            c_n.append(c)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = torch.nn.functional.dropout(x, self.dropout, training=True)
        y = x.transpose(0, 1) if self.batch_first and not unbatched else x
        h_n, c_n = torch.stack(h_n), torch.stack(c_n)
        if unbatched:
            return y.squeeze(1), (h_n.squeeze(1), c_n.squeeze(1))
        return y, (h_n, c_n)


class ConvRNN(torch.nn.Module):
    """h_t = tanh(x_t + conv(h_{t-1}, kernel)) over x (batch, time, features), starting from
    `hidden` (batch, features), zeros when not given; returns h_1 ... h_T as (batch, time,
    features).

    `kernel` is a parameter of `kernel_size` taps (odd; shape (kernel_size,)), learned through
    conv_rnn's backward, which runs the time loop in reverse in one kernel.
    """

    def __init__(self, features: int, kernel_size: int = 3, device=None, dtype=None) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError(f"ConvRNN: kernel_size must be odd, got {kernel_size}")
        self.features = features
        kernel = torch.randn(kernel_size, device=device, dtype=dtype) / kernel_size
        self.kernel = torch.nn.Parameter(kernel)

    def forward(self, x: Tensor, hidden: Tensor | None = None) -> Tensor:
        if hidden is None:
            hidden = x.new_zeros(x.shape[0], x.shape[2])
        return ops.conv_rnn(x, self.kernel, hidden)

    def extra_repr(self) -> str:
        return f"features={self.features}, kernel_size={self.kernel.numel()}"
