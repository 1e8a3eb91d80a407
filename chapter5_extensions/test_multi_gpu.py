"""Every op of custom_ops on the GPU that is *not* the current one: inputs on cuda:1 while cuda:0
is current, and the other way round. A launcher without a device guard, or one that takes the
current device's stream or properties instead of its input's, runs on the wrong GPU here and fails
or gives wrong values; on one GPU that bug cannot show. Skipped with the reason on fewer than two
GPUs.

    python chapter5_extensions/test_multi_gpu.py      # on its own (a machine with 2+ GPUs)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_inplace

build_inplace.build_inplace()
import custom_ops  # noqa: E402

GPUS = torch.cuda.device_count()
pytestmark = pytest.mark.skipif(
    GPUS < 2, reason=f"needs two GPUs (torch.cuda.device_count() is {GPUS})"
)


def run_case(case: Callable, device: torch.device) -> list[torch.Tensor]:
    """case(device) builds its inputs and module on `device` from a fixed seed, runs forward and
    backward, and returns every output and gradient (moved to the CPU)."""
    torch.manual_seed(0)
    return [t.detach().cpu() for t in case(device)]


def relu(device):
    x = torch.randn(33, 65, dtype=torch.float64).to(device).requires_grad_()
    y = custom_ops.relu(x)
    y.backward(torch.ones_like(y))
    return [y, x.grad]


def fused_bias_relu(device):
    layer = custom_ops.FusedBiasReLU(65, scale=0.5, dtype=torch.float64)
    torch.nn.init.normal_(layer.bias)  # on the CPU, from the seed, then moved: the same values
    layer = layer.to(device)
    x = torch.randn(33, 65, dtype=torch.float64).to(device).requires_grad_()
    y = layer(x)
    (y * y).sum().backward()
    return [y, x.grad, layer.bias.grad]


def reduce_sum(device):
    return [custom_ops.reduce_sum(torch.randn(2**20 + 3, dtype=torch.float64).to(device))]


def lstm_cell(device):
    cell = custom_ops.LSTMCell(8, 16, dtype=torch.float64).to(device)
    x = torch.randn(4, 8, dtype=torch.float64).to(device).requires_grad_()
    h, c = cell(x)
    (h.sum() + c.square().sum()).backward()
    return [h, c, x.grad, *(p.grad for p in cell.parameters())]


def lstm(device):
    model = custom_ops.LSTM(8, 16, num_layers=2, batch_first=True, dtype=torch.float64).to(device)
    x = torch.randn(3, 5, 8, dtype=torch.float64).to(device).requires_grad_()
    y, (h, c) = model(x)
    (y.square().sum() + h.sum() + c.sum()).backward()
    return [y, h, c, x.grad, *(p.grad for p in model.parameters())]


def conv_rnn(device):
    model = custom_ops.ConvRNN(32, kernel_size=3, dtype=torch.float64).to(device)
    x = torch.randn(2, 10, 32, dtype=torch.float64).to(device).requires_grad_()
    y = model(x)
    y.square().sum().backward()
    return [y, x.grad, model.kernel.grad]


CASES = [relu, fused_bias_relu, reduce_sum, lstm_cell, lstm, conv_rnn]


@pytest.mark.parametrize("current, other", [(0, 1), (1, 0)], ids=["cuda0-current", "cuda1-current"])
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_every_op_runs_on_the_gpu_of_its_inputs(case, current, other):
    """The same seed on the CPU (the reference: the CPU kernels are checked against PyTorch in
    the other test files) and on the GPU that is not current; float64, so the sums agree closely."""
    expected = run_case(case, torch.device("cpu"))
    with torch.cuda.device(current):
        got = run_case(case, torch.device("cuda", other))
        torch.cuda.synchronize(other)
        assert torch.cuda.current_device() == current  # the op's guard restored it
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-9, atol=1e-9)


def test_outputs_stay_on_the_device_of_the_inputs():
    with torch.cuda.device(0):
        x = torch.randn(7, 5, device="cuda:1")
        assert custom_ops.fused_bias_relu(x, torch.zeros(5, device="cuda:1")).device == x.device
        assert custom_ops.reduce_sum(x).device == x.device


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))
