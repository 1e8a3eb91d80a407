"""Chapter 4's ops joined to autograd: torch.autograd.Functions over the C++/CUDA forward and
backward kernels, and the nn.Modules a model uses (lesson: "Joining autograd").

    from functions import relu, fused_bias_relu, lstm_cell, FusedBiasReLU, LSTMCell
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

import load_chapter4

ext = load_chapter4.load_chapter4()


class ReLUFunction(torch.autograd.Function):
    """y = relu(x), returned with its mask (False where y <= 0). The backward needs only the mask:
    one byte per element, cheaper than keeping x or y (two to eight bytes) when nothing else
    holds them."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, mask = ext.relu_forward(x)
        ctx.save_for_backward(mask)
        # The mask is an output too, but a bool: no gradient flows through it.
        ctx.mark_non_differentiable(mask)
        return y, mask

    @staticmethod
    @once_differentiable  # on CUDA relu_backward is a kernel autograd cannot see into
    def backward(ctx, grad_y: torch.Tensor, _grad_mask: torch.Tensor) -> torch.Tensor:
        # _grad_mask: autograd still passes one gradient per output; for the non-differentiable
        # mask it is all zeros, and nothing uses it.
        (mask,) = ctx.saved_tensors
        return ext.relu_backward(grad_y, mask)


def relu(x: torch.Tensor) -> torch.Tensor:
    """relu(x) with chapter 4's kernels; x of any shape and floating dtype, on CPU or CUDA."""
    return ReLUFunction.apply(x)[0]


class FusedBiasReLUFunction(torch.autograd.Function):
    """y = relu(x * scale + bias), bias over the last dimension of x. Saves only the output y:
    the backward's mask is "y not <= 0", and a model keeps y alive anyway as the next layer's
    input."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
        y = ext.fused_bias_relu_forward(x, bias, scale)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        (y,) = ctx.saved_tensors
        need_grad_x, need_grad_bias, _ = ctx.needs_input_grad
        # A gradient nobody asked for is not computed at all: the kernel skips its writes.
        grad_x, grad_bias = ext.fused_bias_relu_backward(
            grad_y, y, ctx.scale, need_grad_x, need_grad_bias
        )
        return grad_x, grad_bias, None  # scale is a Python float: no gradient


def fused_bias_relu(x: torch.Tensor, bias: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """relu(x * scale + bias): x (..., F), bias (F,), same dtype and device; differentiable in
    x and bias."""
    return FusedBiasReLUFunction.apply(x, bias, scale)


class LSTMCellFunction(torch.autograd.Function):
    """One LSTM step with the backward of chapter 4: its pointwise part one CUDA kernel on GPU."""

    @staticmethod
    def forward(ctx, x, h, c, w_ih, w_hh, b_ih, b_hh):
        h_next, c_next, gates, tanh_c_next = ext.lstm_cell_forward(x, h, c, w_ih, w_hh, b_ih, b_hh)
        ctx.save_for_backward(x, h, c, w_ih, w_hh, gates, tanh_c_next)
        return h_next, c_next

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h_next, grad_c_next):
        x, h, c, w_ih, w_hh, gates, tanh_c_next = ctx.saved_tensors
        need = ctx.needs_input_grad
        needs = [need[0], need[1], need[2], need[3], need[4], need[5] or need[6]]
        grad_x, grad_h, grad_c, grad_w_ih, grad_w_hh, grad_bias = ext.lstm_cell_backward(
            grad_h_next, grad_c_next, x, h, c, w_ih, w_hh, gates, tanh_c_next, needs
        )
        # b_ih and b_hh are added together: each gets the whole bias gradient.
        return (
            grad_x,
            grad_h,
            grad_c,
            grad_w_ih,
            grad_w_hh,
            grad_bias if need[5] else None,
            grad_bias if need[6] else None,
        )


def lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh) -> tuple[torch.Tensor, torch.Tensor]:
    """(h_next, c_next) for x (B, I), h and c (B, H), w_ih (4H, I), w_hh (4H, H), b_* (4H,),
    gate order i, f, g, o as in torch.nn.LSTMCell."""
    return LSTMCellFunction.apply(x, h, c, w_ih, w_hh, b_ih, b_hh)


class FusedBiasReLU(torch.nn.Module):
    """relu(x * scale + bias) with a learned bias of `features` elements: put it after a
    `Linear(..., bias=False)` in place of the linear's bias and a ReLU."""

    def __init__(self, features: int, scale: float = 1.0, device=None, dtype=None) -> None:
        super().__init__()
        self.scale = scale
        self.bias = torch.nn.Parameter(torch.zeros(features, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_bias_relu(x, self.bias, self.scale)

    def extra_repr(self) -> str:
        return f"features={self.bias.numel()}, scale={self.scale}"


class LSTMCell(torch.nn.LSTMCell):
    """torch.nn.LSTMCell with chapter 4's forward and backward: same parameters, same state_dict,
    so weights load either way."""

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None):
        if state is None:
            zeros = x.new_zeros(x.shape[0], self.hidden_size)
            state = (zeros, zeros)
        return lstm_cell(x, *state, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
