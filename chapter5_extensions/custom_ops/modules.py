"""nn.Modules over custom_ops: what a model uses.

FusedBiasReLU(features)   relu(x * scale + bias) with a learned bias, after Linear(bias=False)
LSTMCell(input, hidden)   a drop-in for torch.nn.LSTMCell: same parameters and state_dict
LSTM(input, hidden, ...)  a drop-in for torch.nn.LSTM: the time loop in C++/CUDA
ConvRNN(features, k)      the convolutional RNN, with a learned kernel of k taps
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

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
    """torch.nn.LSTM computed by custom_ops, one op call per layer and direction: the same
    constructor, parameters (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_hr_l0
    with proj_size, the same with _reverse for the second direction), initialisation, state_dict
    and call (`lstm(x, (h0, c0))` -> `y, (h_n, c_n)`), for every option of nn.LSTM: num_layers,
    bias, batch_first, dropout, bidirectional, proj_size, unbatched (2-D) input, and a
    PackedSequence in and out.

    A padded tensor without a projection runs custom_ops.lstm, the layer kernel (the second
    direction on the input flipped in time); a PackedSequence or a projection runs
    custom_ops.lstm_packed, whose every step computes on the sequences still running only.

    On CUDA the two directions of a layer are independent recurrences, and the second can run on
    a stream of its own so that the GPU overlaps them: `concurrent_directions` True or False, or
    None (the default) for two streams where they were measured faster back to back
    (docs/perf/h100/lstm_options.md): a padded batch from batch * hidden_size = 2**16, a
    PackedSequence from 2**18 (TWO_STREAMS_FROM below). Under torch.compile and while a CUDA graph
    is being captured, one stream.

    A plain Module, not a subclass of torch.nn.LSTM: torch.compile refuses every subclass of
    nn.RNNBase ("Dynamo does not support RNN, GRU, or LSTM"), and this one compiles with
    fullgraph=True."""

    concurrent_directions: bool | None = None

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
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError("custom_ops.LSTM: hidden_size and num_layers must be positive")
        if not 0 <= proj_size < hidden_size:
            raise ValueError(
                f"custom_ops.LSTM: proj_size must be 0 (no projection) or between 1 and "
                f"hidden_size - 1 = {hidden_size - 1}, got {proj_size}"
            )
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        out = proj_size or hidden_size  # the size of h, and of y per direction
        factory = dict(device=device, dtype=dtype)
        # The names in nn.LSTM's order, per layer and direction: what _flat_weights_names,
        # _all_weights and all_weights list, and the order of parameters().
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(directions):
                shapes = {
                    "weight_ih": (4 * hidden_size, input_size if layer == 0 else out * directions),
                    "weight_hh": (4 * hidden_size, out),
                }
                if bias:
                    shapes |= {"bias_ih": (4 * hidden_size,), "bias_hh": (4 * hidden_size,)}
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                for name, shape in shapes.items():
                    p = torch.nn.Parameter(torch.empty(shape, **factory))
                    self.register_parameter(name + suffix, p)
                self._all_weights.append([name + suffix for name in shapes])
        self._flat_weights_names = [name for names in self._all_weights for name in names]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in +-1/sqrt(hidden_size), as torch.nn.LSTM initialises."""
        bound = self.hidden_size**-0.5
        for p in self.parameters():
            torch.nn.init.uniform_(p, -bound, bound)

    @property
    def _flat_weights(self) -> list[Tensor]:
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Tensor]]:
        """The parameters per layer and direction, as torch.nn.LSTM.all_weights lists them."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """Does nothing, and is there because training scripts call it. nn.LSTM copies its
        weights into one contiguous buffer for cuDNN; our kernels read each parameter where it
        is, so there is nothing to flatten."""

    def extra_repr(self) -> str:  # what nn.LSTM prints: only the options that differ from default
        s = f"{self.input_size}, {self.hidden_size}"
        defaults = dict(proj_size=0, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                        bidirectional=False)  # fmt: skip
        for name, default in defaults.items():
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        return s

    def _direction(self, x, batch_sizes, h0, c0, layer: int, direction: int):
        """One direction of one layer: (y, h_n, c_n). batch_sizes is None for a padded batch
        without projection, which the layer op runs; otherwise x is packed rows."""
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        w_ih, w_hh = getattr(self, "weight_ih" + suffix), getattr(self, "weight_hh" + suffix)
        if self.bias:
            b_ih, b_hh = getattr(self, "bias_ih" + suffix), getattr(self, "bias_hh" + suffix)
        else:  # the ops always add biases: zeros, which get no gradient
            b_ih = b_hh = x.new_zeros(4 * self.hidden_size)
        if batch_sizes is not None:
            w_hr = getattr(self, "weight_hr" + suffix) if self.proj_size else None
            return ops.lstm_packed(
                x, batch_sizes, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse=direction == 1
            )
        if direction == 0:
            return ops.lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh)
        # each sequence read from its end: the same layer on x flipped in time
        y, h, c = ops.lstm(x.flip(0), h0, c0, w_ih, w_hh, b_ih, b_hh)
        return y.flip(0), h, c

    def _both_directions(self, x, batch_sizes, h0, c0, layer: int, packed: bool):
        """Both directions of a layer; on CUDA the second on a side stream, which the caller's
        stream waits for before it goes on (autograd runs each backward on its forward's
        stream). packed: the input was a PackedSequence (not a padded batch)."""
        forward, reverse = (2 * layer, 0), (2 * layer + 1, 1)  # (state index, direction)
        # One stream off the GPU, while compiling or capturing; otherwise as asked, or by size.
        # (The size is looked at only here: under torch.compile a packed batch's is a symbol.)
        serial = (
            not x.is_cuda
            or torch.compiler.is_compiling()
            or torch.cuda.is_current_stream_capturing()
        )
        if not serial:
            concurrent = self.concurrent_directions
            if concurrent is None:
                start = TWO_STREAMS_FROM_PACKED if packed else TWO_STREAMS_FROM
                concurrent = h0.shape[1] * self.hidden_size >= start
            serial = not concurrent
        if serial:
            return [
                self._direction(x, batch_sizes, h0[k], c0[k], layer, d)
                for k, d in (forward, reverse)
            ]
        main = torch.cuda.current_stream(x.device)
        side = _side_stream(x.device)
        side.wait_stream(main)  # the inputs are ready
        with torch.cuda.stream(side):
            k, d = reverse
            second = self._direction(x, batch_sizes, h0[k], c0[k], layer, d)
        k, d = forward
        first = self._direction(x, batch_sizes, h0[k], c0[k], layer, d)
        main.wait_stream(side)
        for t in second:  # made on the side stream, used on the main one: free only after it
            t.record_stream(main)
        return [first, second]

    def _check_state(self, name: str, state: Tensor, batch: int, size: int) -> None:
        shape = (self.num_layers * (2 if self.bidirectional else 1), batch, size)
        if tuple(state.shape) != shape:
            raise RuntimeError(
                f"custom_ops.LSTM: {name} must have shape (num_layers * num_directions, batch, "
                f"{'proj_size' if name == 'h0' and self.proj_size else 'hidden_size'}) = {shape}"
                f", or that without batch for unbatched input; got {tuple(state.shape)}"
            )

    def forward(self, input: Tensor | PackedSequence, hx: tuple[Tensor, Tensor] | None = None):
        packed = isinstance(input, PackedSequence)
        unbatched = not packed and input.dim() == 2
        if packed:
            x, batch_sizes, sorted_indices, unsorted_indices = input
            batch = int(batch_sizes[0]) if batch_sizes.numel() else 0
        else:
            x = input.unsqueeze(1) if unbatched else input
            if self.batch_first and not unbatched:
                x = x.transpose(0, 1)  # the ops are time-major; they make x contiguous themselves
            batch = x.shape[1]
        directions = 2 if self.bidirectional else 1
        out = self.proj_size or self.hidden_size
        if hx is None:
            h0 = x.new_zeros(self.num_layers * directions, batch, out)
            c0 = x.new_zeros(self.num_layers * directions, batch, self.hidden_size)
        else:
            h0, c0 = (t.unsqueeze(1) for t in hx) if unbatched else hx
            self._check_state("h0", h0, batch, out)
            self._check_state("c0", c0, batch, self.hidden_size)
            if packed and sorted_indices is not None:  # the state of the i-th sequence as sorted
                h0, c0 = h0.index_select(1, sorted_indices), c0.index_select(1, sorted_indices)
        if not packed and self.proj_size:  # a padded batch is a packed one whose steps are full
            steps = x.shape[0]
            x = x.reshape(steps * batch, x.shape[2])
            batch_sizes = torch.full((steps,), batch, dtype=torch.int64)
        elif not packed:
            batch_sizes = None  # a padded batch without projection: the layer op
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            if directions == 1:
                outs = [self._direction(x, batch_sizes, h0[layer], c0[layer], layer, 0)]
            else:
                outs = self._both_directions(x, batch_sizes, h0, c0, layer, packed)
            for _, h, c in outs:
                h_n.append(h)
                c_n.append(c)
            x = outs[0][0] if directions == 1 else torch.cat([y for y, _, _ in outs], dim=-1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = torch.nn.functional.dropout(x, self.dropout, training=True)
        h_n, c_n = torch.stack(h_n), torch.stack(c_n)
        if packed:
            if unsorted_indices is not None:  # back to the caller's order of sequences
                h_n, c_n = (
                    h_n.index_select(1, unsorted_indices),
                    c_n.index_select(1, unsorted_indices),
                )
            return PackedSequence(x, batch_sizes, sorted_indices, unsorted_indices), (h_n, c_n)
        if self.proj_size:
            x = x.view(steps, batch, out * directions)
        y = x.transpose(0, 1) if self.batch_first and not unbatched else x
        if unbatched:
            return y.squeeze(1), (h_n.squeeze(1), c_n.squeeze(1))
        return y, (h_n, c_n)


# batch * hidden from which two directions run on two streams by default, from runs of
# benchmarks/lstm_options.py. A padded batch's loops (with a projection too: every step full) are
# replayed from CUDA graphs, and on 2026-11-27 two streams were faster back to back from B = 64 at
# H = 1024 (2^16). A PackedSequence's lengths change from batch to batch in training, its loops are
# then launched step by step, the host sets the pace at B = 64, and two streams pay only from
# B = 256 (2^18, 2026-11-26).
TWO_STREAMS_FROM = 2**16
TWO_STREAMS_FROM_PACKED = 2**18

_SIDE_STREAMS: dict[int, torch.cuda.Stream] = {}


def _side_stream(device: torch.device) -> torch.cuda.Stream:
    """One side stream per GPU, made once: a new stream per call would cost a driver call."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SIDE_STREAMS:
        _SIDE_STREAMS[index] = torch.cuda.Stream(device=index)
    return _SIDE_STREAMS[index]


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
