"""Tests for chapter 4: every op's forward and gradients against plain PyTorch autograd, gradcheck
in float64, what is saved and what is skipped, the modules, the training demo; bad inputs by
their messages. Tests marked `sanitize` rerun under compute-sanitizer.

    python chapter4_autograd/test_chapter4.py     # on its own
    pytest chapter4_autograd                      # or under pytest
"""

from __future__ import annotations

import math
import sys

import pytest
import torch

import functions
import load_chapter4

HAS_CUDA = torch.cuda.is_available()
ext = functions.ext


# Forward tolerances: one rounding of the output dtype (the kernels compute in float or double).
# Gradients of sums get more room in the half types: the reference rounds after each op.
TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}
DTYPES = list(TOLERANCES)
FUSED = {
    "python": functions.fused_bias_relu,
    "cpp": lambda x, bias, scale: ext.fused_bias_relu_cpp_autograd(x, bias, scale),
}


def random(shape, dtype, device, generator, requires_grad=False) -> torch.Tensor:
    t = torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)
    return t.requires_grad_(requires_grad)


def sum_tolerance(dtype: torch.dtype, terms: int) -> dict:
    """Each addition rounds once: allow terms * eps on top of the output's rounding."""
    eps = 2.0**-53 if dtype == torch.float64 else 2.0**-24
    base = TOLERANCES[dtype]
    return dict(rtol=base["rtol"], atol=base["atol"] + 8 * terms * eps)


def away_from_the_kink(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """x moved so that no x * scale + bias is within 0.05 of 0, where relu bends: there a float32
    or bfloat16 forward and the float64 reference can round to different sides, and the
    gradients then differ by a whole grad_y. (gradcheck needs the same margin.)"""
    with torch.no_grad():
        z = x.double() * scale + bias.double()
        push = torch.where(z.abs() < 0.05, 0.1 * torch.sign(z + 1e-30) / scale, 0)
        x.copy_(x.double() + push)  # in place: a transposed or strided x keeps its layout
    return x


def reference_fused_bias_relu(x, bias, scale):
    """The specification, computed in float64 by PyTorch's autograd."""
    return torch.relu(x.double() * scale + bias.double())


@pytest.mark.skipif(
    not load_chapter4.can_build_cuda(), reason="no nvcc or a CPU-only torch: CUDA is not built"
)
def test_cuda_sources_compile_and_link():
    assert ext.built_with_cuda


# ---- relu --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0,), (1,), (31,), (7, 33), (2, 3, 257)], ids=str)
def test_relu_forward_and_backward_match_torch(dtype, shape, device, generator):
    x = random(shape, dtype, device, generator, requires_grad=True)
    y = functions.relu(x)
    grad_y = random(shape, dtype, device, generator)
    (grad_x,) = torch.autograd.grad(y, x, grad_y) if x.numel() else (torch.zeros_like(x),)
    x_ref = x.detach().clone().requires_grad_()
    y_ref = torch.relu(x_ref)
    (grad_ref,) = torch.autograd.grad(y_ref, x_ref, grad_y) if x.numel() else (grad_x,)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=0)
    torch.testing.assert_close(grad_x, grad_ref, rtol=0, atol=0)


def test_relu_mask_is_an_output_without_gradient(device):
    x = torch.tensor([-1.0, 0.0, 2.0, float("nan")], device=device, requires_grad=True)
    y, mask = functions.ReLUFunction.apply(x)
    assert mask.dtype == torch.bool and not mask.requires_grad and y.requires_grad
    assert mask.tolist() == [False, False, True, True]  # NaN passes its gradient, as in torch
    torch.testing.assert_close(y, torch.relu(x), equal_nan=True)


def test_relu_passes_gradcheck_in_float64(device, generator):
    # Inputs away from 0, where relu has no derivative and finite differences disagree.
    x = random((4, 9), torch.float64, device, generator)
    x = (x + 0.2 * x.sign()).requires_grad_()
    assert torch.autograd.gradcheck(functions.relu, (x,))


def test_relu_refuses_double_backward(device):
    # The square makes grad_y depend on x, so a second derivative would need relu_backward's.
    x = torch.randn(5, device=device, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad((functions.relu(x) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="marked with @once_differentiable"):
        grad.sum().backward()


def test_relu_passes_the_gradient_of_nan_and_inf_like_torch(device):
    """relu keeps NaN, and PyTorch's backward zeroes the gradient only where y <= 0: a NaN or +inf
    input gets its gradient, -inf does not. A mask written as y > 0 would get NaN wrong."""
    values = torch.tensor(
        [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 2.0], device=device
    )
    x, x_ref = values.clone().requires_grad_(), values.clone().requires_grad_()
    grad_y = torch.arange(1.0, 7.0, device=device)
    torch.testing.assert_close(functions.relu(x), torch.relu(x_ref), equal_nan=True)
    (grad_x,) = torch.autograd.grad(functions.relu(x), x, grad_y)
    (grad_x_ref,) = torch.autograd.grad(torch.relu(x_ref), x_ref, grad_y)
    torch.testing.assert_close(grad_x, grad_x_ref)


def test_relu_backward_rejects_a_mask_that_is_not_bool(device):
    with pytest.raises(RuntimeError, match="relu_backward: mask must be a bool tensor, got Float"):
        ext.relu_backward(torch.ones(3, device=device), torch.ones(3, device=device))


# ---- fused_bias_relu ---------------------------------------------------------------------------

# Last dims that 4 and 8 divide take the vectorized backward (16-byte loads); odd ones the
# one-element path.
SHAPES = [
    (1,),
    (7,),
    (1, 1),
    (31, 17),
    (2, 3, 65),
    (33, 128),
    (9, 4096),
    (257, 1001),
    (64, 1002),
    (3, 0),
    (0, 5),
]


@pytest.mark.parametrize("version", FUSED)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fused_bias_relu_gradients_match_autograd(version, dtype, shape, device, generator):
    bias = random(shape[-1:], dtype, device, generator, requires_grad=True)
    x = away_from_the_kink(random(shape, dtype, device, generator), bias, 0.7)
    x.requires_grad_()
    y = FUSED[version](x, bias, 0.7)
    grad_y = random(shape, dtype, device, generator)
    grad_x, grad_bias = torch.autograd.grad(y, (x, bias), grad_y)

    y_ref = reference_fused_bias_relu(x, bias, 0.7)
    grad_x_ref, grad_bias_ref = torch.autograd.grad(y_ref, (x, bias), grad_y.double())
    torch.testing.assert_close(y, y_ref.to(dtype), **TOLERANCES[dtype])
    torch.testing.assert_close(grad_x, grad_x_ref.to(dtype), **TOLERANCES[dtype])
    rows = math.prod(shape[:-1])
    torch.testing.assert_close(grad_bias, grad_bias_ref.to(dtype), **sum_tolerance(dtype, rows))


@pytest.mark.parametrize("version", FUSED)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_bias_relu_handles_misaligned_tensors(version, dtype, device, generator):
    """x and grad_y that start one element into their storage: contiguous, but not on a 16-byte
    boundary, so the kernels must fall back from their vector width."""
    rows, cols = 17, 64

    def misaligned() -> torch.Tensor:
        return random(rows * cols + 1, dtype, device, generator)[1:].view(rows, cols)

    bias = random((cols,), dtype, device, generator, requires_grad=True)
    x = away_from_the_kink(misaligned(), bias, 0.7).requires_grad_()
    grad_y = misaligned()
    assert x.data_ptr() % 16 != 0 and grad_y.data_ptr() % 16 != 0
    y = FUSED[version](x, bias, 0.7)
    grads = torch.autograd.grad(y, (x, bias), grad_y)
    y_ref = reference_fused_bias_relu(x, bias, 0.7)
    grads_ref = torch.autograd.grad(y_ref, (x, bias), grad_y.double())
    torch.testing.assert_close(y, y_ref.to(dtype), **TOLERANCES[dtype])
    torch.testing.assert_close(grads[0], grads_ref[0].to(dtype), **TOLERANCES[dtype])
    torch.testing.assert_close(grads[1], grads_ref[1].to(dtype), **sum_tolerance(dtype, rows))


@pytest.mark.parametrize("version", FUSED)
def test_fused_bias_relu_passes_the_gradient_of_nan_like_torch(version, device):
    x = torch.tensor([[float("nan"), -1.0, 3.0], [2.0, float("nan"), -float("inf")]], device=device)
    bias = torch.tensor([0.5, 0.25, -1.0], device=device)
    grad_y = torch.arange(1.0, 7.0, device=device).view(2, 3)
    x, bias = x.requires_grad_(), bias.requires_grad_()
    grads = torch.autograd.grad(FUSED[version](x, bias, 2.0), (x, bias), grad_y)
    grads_ref = torch.autograd.grad(torch.relu(x * 2.0 + bias), (x, bias), grad_y)
    for got, want in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("version", FUSED)
@pytest.mark.parametrize(
    "make_x",
    [
        pytest.param(lambda t: t, id="contiguous-rank-3"),
        pytest.param(lambda t: t.transpose(0, 1), id="transposed"),
        pytest.param(lambda t: t[:, :, ::2], id="strided-last-dim"),
    ],
)
def test_fused_bias_relu_passes_gradcheck_in_float64(version, make_x, device, generator):
    x = make_x(random((3, 4, 10), torch.float64, device, generator))
    bias = random(x.shape[-1:], torch.float64, device, generator, requires_grad=True)
    x = away_from_the_kink(x, bias, 1.3).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, b: FUSED[version](x, b, 1.3), (x, bias))


@pytest.mark.parametrize("version", FUSED)
@pytest.mark.parametrize(
    "loss",
    [
        pytest.param(lambda y: y.sum(), id="sum-expanded-grad"),
        pytest.param(lambda y: (y.t() * 3).sum(), id="transposed-grad"),
        pytest.param(lambda y: y[:, ::3].sum(), id="sliced-grad"),
    ],
)
def test_fused_bias_relu_accepts_any_layout_of_grad_y(version, loss, device, generator):
    x = random((40, 24), torch.float32, device, generator, requires_grad=True)
    bias = random((24,), torch.float32, device, generator, requires_grad=True)
    grads = torch.autograd.grad(loss(FUSED[version](x, bias, 0.5)), (x, bias))
    expected = torch.autograd.grad(loss(torch.relu(x * 0.5 + bias)), (x, bias))
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("version", FUSED)
def test_fused_bias_relu_refuses_double_backward(version, device):
    x = torch.randn(3, 4, dtype=torch.float64, device=device, requires_grad=True)
    bias = torch.randn(4, dtype=torch.float64, device=device, requires_grad=True)
    # The Python Function fails when the double backward runs, the C++ one when it is recorded.
    with pytest.raises(
        RuntimeError, match=r"once_differentiable|double backward is not implemented"
    ):
        loss = (FUSED[version](x, bias, 1.0) ** 2).sum()
        (grad_x,) = torch.autograd.grad(loss, x, create_graph=True)
        grad_x.sum().backward()


@pytest.mark.parametrize(
    ("x_grad", "bias_grad"), [(True, False), (False, True)], ids=["x-only", "bias-only"]
)
def test_fused_bias_relu_computes_only_the_gradients_asked_for(
    x_grad, bias_grad, device, generator, monkeypatch
):
    calls = []
    real_backward = ext.fused_bias_relu_backward

    def spy(grad_y, y, scale, need_grad_x, need_grad_bias):
        calls.append((need_grad_x, need_grad_bias))
        return real_backward(grad_y, y, scale, need_grad_x, need_grad_bias)

    monkeypatch.setattr(ext, "fused_bias_relu_backward", spy)
    # (33, 128): the vectorized kernel, whose two halves (grad_x, the column sums) each can skip.
    x = random((33, 128), torch.float32, device, generator, requires_grad=x_grad)
    bias = random((128,), torch.float32, device, generator, requires_grad=bias_grad)
    x = away_from_the_kink(x.detach(), bias.detach(), 1.5).requires_grad_(x_grad)
    grad_y = random((33, 128), torch.float32, device, generator)
    functions.fused_bias_relu(x, bias, 1.5).backward(grad_y)
    assert calls == [(x_grad, bias_grad)]
    assert (x.grad is not None) == x_grad and (bias.grad is not None) == bias_grad

    # The one gradient that was computed is still right.
    x_ref = x.detach().double().requires_grad_(x_grad)
    bias_ref = bias.detach().double().requires_grad_(bias_grad)
    torch.relu(x_ref * 1.5 + bias_ref).backward(grad_y.double())
    got, want = (x.grad, x_ref.grad) if x_grad else (bias.grad, bias_ref.grad)
    torch.testing.assert_close(got, want.float(), **sum_tolerance(torch.float32, 33))


def test_fused_bias_relu_backward_returns_none_for_a_skipped_gradient(device):
    y = torch.rand(4, 3, device=device)
    grad_x, grad_bias = ext.fused_bias_relu_backward(torch.ones_like(y), y, 2.0, False, True)
    assert grad_x is None and grad_bias.shape == (3,)
    grad_x, grad_bias = ext.fused_bias_relu_backward(torch.ones_like(y), y, 2.0, True, False)
    assert grad_bias is None and grad_x.shape == (4, 3)


@pytest.mark.parametrize("version", FUSED)
def test_fused_bias_relu_saves_only_its_output(version, device, generator):
    """What autograd keeps between forward and backward: one tensor, the output itself (which the
    next layer holds anyway), not the input."""
    saved = []
    x = random((16, 8), torch.float32, device, generator, requires_grad=True)
    bias = random((8,), torch.float32, device, generator, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = FUSED[version](x, bias, 1.0)
    assert len(saved) == 1 and saved[0].data_ptr() == y.data_ptr()


@pytest.mark.cuda
@pytest.mark.parametrize("version", FUSED)
def test_fused_bias_relu_bias_gradient_is_deterministic(version, generator):
    x = random((4096, 300), torch.float32, "cuda", generator, requires_grad=True)
    bias = random((300,), torch.float32, "cuda", generator, requires_grad=True)
    grad_y = random((4096, 300), torch.float32, "cuda", generator)
    y = FUSED[version](x, bias, 1.0)
    first = torch.autograd.grad(y, bias, grad_y, retain_graph=True)[0]
    for _ in range(10):
        assert torch.equal(torch.autograd.grad(y, bias, grad_y, retain_graph=True)[0], first)


@pytest.mark.parametrize(
    ("x", "bias", "message"),
    [
        (torch.ones(3, 4), torch.ones(5), r"bias must have shape \(4,\) to match x.size\(-1\)"),
        (
            torch.ones(3, 4),
            torch.ones(4, dtype=torch.float64),
            "x and bias must have the same dtype",
        ),
        (
            torch.ones(3, 4, dtype=torch.int32),
            torch.ones(4, dtype=torch.int32),
            "x must be a floating",
        ),
        (torch.tensor(1.0), torch.ones(1), "x must have at least 1 dimension"),
    ],
    ids=["bias-size", "dtype-mismatch", "int-dtype", "0-dim"],
)
@pytest.mark.parametrize("version", FUSED)
def test_fused_bias_relu_rejects_bad_input(version, x, bias, message, device):
    with pytest.raises(RuntimeError, match=f"fused_bias_relu_forward: {message}"):
        FUSED[version](x.to(device), bias.to(device), 1.0)


@pytest.mark.cuda
def test_fused_bias_relu_rejects_mixed_devices():
    with pytest.raises(
        RuntimeError, match="x and bias must be on the same device, got cuda:0 and cpu"
    ):
        functions.fused_bias_relu(torch.ones(2, 3, device="cuda"), torch.ones(3))


# ---- the LSTM cell -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("sizes", [(1, 1, 1), (5, 7, 3), (16, 32, 64), (0, 4, 6)], ids=str)
def test_lstm_cell_matches_nn_lstmcell_forward_and_backward(dtype, sizes, device, generator):
    batch, input_size, hidden = sizes
    torch.manual_seed(0)
    reference = torch.nn.LSTMCell(input_size, hidden, device=device, dtype=dtype)
    ours = functions.LSTMCell(input_size, hidden, device=device, dtype=dtype)
    ours.load_state_dict(reference.state_dict())
    x = random((batch, input_size), dtype, device, generator, requires_grad=True)
    h = random((batch, hidden), dtype, device, generator, requires_grad=True)
    c = random((batch, hidden), dtype, device, generator, requires_grad=True)
    grad_h, grad_c = (random((batch, hidden), dtype, device, generator) for _ in range(2))

    def run(cell):
        h_next, c_next = cell(x, (h, c))
        inputs = (x, h, c, *cell.parameters())
        return (h_next, c_next, *torch.autograd.grad((h_next, c_next), inputs, (grad_h, grad_c)))

    tolerance = TOLERANCES[dtype] if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    for got, want in zip(run(ours), run(reference), strict=True):
        torch.testing.assert_close(got, want, **tolerance)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_lstm_cell_half_types_match_float32_on_cuda(dtype, generator):
    """In float16/bfloat16 both cells round every gate: compare each to the float32 cell, with
    room for a few roundings of the dtype (bfloat16 has 8 significant bits, float16 11)."""
    torch.manual_seed(0)
    reference = torch.nn.LSTMCell(48, 32, device="cuda")
    ours = functions.LSTMCell(48, 32, device="cuda", dtype=dtype)
    ours.load_state_dict(reference.state_dict())
    x, h, c = (random((16, n), torch.float32, "cuda", generator) for n in (48, 32, 32))
    grad_h, grad_c = (random((16, 32), torch.float32, "cuda", generator) for _ in range(2))

    def run(cell, dtype):
        inputs = [t.to(dtype).requires_grad_() for t in (x, h, c)]
        h_next, c_next = cell(inputs[0], (inputs[1], inputs[2]))
        grads = torch.autograd.grad(
            (h_next, c_next), (*inputs, *cell.parameters()), (grad_h.to(dtype), grad_c.to(dtype))
        )
        return [t.float() for t in (h_next, c_next, *grads)]

    tolerance = (
        dict(rtol=0.05, atol=0.05) if dtype == torch.bfloat16 else dict(rtol=5e-3, atol=5e-3)
    )
    for got, want in zip(run(ours, dtype), run(reference, torch.float32), strict=True):
        torch.testing.assert_close(got, want, **tolerance)


def test_lstm_cell_backward_rejects_saved_tensors_of_the_wrong_shape(device):
    x, h = torch.ones(2, 4, device=device), torch.ones(2, 3, device=device)
    w_ih, w_hh = torch.ones(12, 4, device=device), torch.ones(12, 3, device=device)
    with pytest.raises(
        RuntimeError, match=r"lstm_cell_backward: gates must have shape \[2, 12\], got \[2, 3\]"
    ):
        ext.lstm_cell_backward(h, h, x, h, h, w_ih, w_hh, h, h, [True] * 6)
    with pytest.raises(RuntimeError, match="lstm_cell_backward: c and tanh_c_next must have"):
        ext.lstm_cell_backward(
            h, h, x, h, h, w_ih, w_hh, torch.ones(2, 12, device=device), x, [True] * 6
        )


def test_lstm_cell_passes_gradcheck_in_float64(device, generator):
    b, i, hid = 3, 4, 5
    args = [
        random(shape, torch.float64, device, generator, requires_grad=True)
        for shape in [
            (b, i),
            (b, hid),
            (b, hid),
            (4 * hid, i),
            (4 * hid, hid),
            (4 * hid,),
            (4 * hid,),
        ]
    ]
    assert torch.autograd.gradcheck(functions.lstm_cell, args)


def test_lstm_cell_skips_gradients_nobody_needs(device, generator, monkeypatch):
    calls = []
    real_backward = ext.lstm_cell_backward
    monkeypatch.setattr(
        ext, "lstm_cell_backward", lambda *a: calls.append(list(a[-1])) or real_backward(*a)
    )
    cell = functions.LSTMCell(4, 3, device=device)
    cell.weight_ih.requires_grad_(False)
    x = random((2, 4), torch.float32, device, generator)  # data: no gradient wanted
    h_next, c_next = cell(x)
    (h_next.sum() + c_next.sum()).backward()
    assert calls == [[False, False, False, False, True, True]]
    assert cell.weight_ih.grad is None and cell.weight_hh.grad is not None


def test_lstm_cell_module_is_a_drop_in_for_nn_lstmcell():
    reference = torch.nn.LSTMCell(6, 4)
    ours = functions.LSTMCell(6, 4)
    assert list(ours.state_dict()) == list(reference.state_dict())
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(3, 6)
    for got, want in zip(ours(x), reference(x), strict=True):
        torch.testing.assert_close(got, want)


def test_lstm_cell_rejects_a_weight_of_the_wrong_shape(device):
    x, h = torch.ones(2, 4, device=device), torch.ones(2, 3, device=device)
    w_hh, b = torch.ones(12, 3, device=device), torch.ones(12, device=device)
    with pytest.raises(
        RuntimeError, match=r"lstm_cell_forward: w_ih must have shape \[12, 4\], got \[12, 5\]"
    ):
        functions.lstm_cell(x, h, h, torch.ones(12, 5, device=device), w_hh, b, b)


# ---- the module in a model, and the training demo ---------------------------------------------


def test_fused_bias_relu_module_trains_like_plain_pytorch(import_own_script):
    demo = import_own_script("train_demo")
    custom, plain = demo.train(steps=30, device="cpu")
    torch.testing.assert_close(torch.tensor(custom), torch.tensor(plain), rtol=1e-5, atol=1e-6)
    assert custom[-1] < 0.9 * custom[0]


@pytest.mark.cuda
def test_fused_bias_relu_module_trains_like_plain_pytorch_on_cuda(import_own_script):
    """On the GPU the two models add in different orders (our column sums against cuBLAS's
    bias gradient), so the losses agree to float32 rounding, not bit for bit."""
    demo = import_own_script("train_demo")
    custom, plain = demo.train(steps=30, device="cuda")
    torch.testing.assert_close(torch.tensor(custom), torch.tensor(plain), rtol=1e-4, atol=1e-6)
    assert custom[-1] < 0.9 * custom[0]


# ---- under compute-sanitizer: every kernel once, on small shapes ------------------------------


@pytest.mark.cuda
@pytest.mark.sanitize
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str
)
def test_every_kernel_on_small_shapes(dtype, generator):
    for shape in [(1, 1), (5, 37), (33, 128), (17, 1002)]:
        x = random(shape, dtype, "cuda", generator, requires_grad=True)
        bias = random(shape[-1:], dtype, "cuda", generator, requires_grad=True)
        y = functions.fused_bias_relu(x, bias, 0.5)
        grads = torch.autograd.grad(y.sum() + functions.relu(x).sum(), (x, bias))
        y_ref = reference_fused_bias_relu(x, bias, 0.5)
        grads_ref = torch.autograd.grad(y_ref.sum() + torch.relu(x.double()).sum(), (x, bias))
        torch.testing.assert_close(grads[0], grads_ref[0].to(dtype), **TOLERANCES[dtype])
        torch.testing.assert_close(
            grads[1], grads_ref[1].to(dtype), **sum_tolerance(dtype, shape[0])
        )
    cell = functions.LSTMCell(5, 7, device="cuda")
    h_next, c_next = cell(torch.randn(3, 5, device="cuda"))
    (h_next.sum() + c_next.sum()).backward()
    torch.cuda.synchronize()


# ---- the scripts a reader runs ------------------------------------------------------------------


def test_demo_runs(capsys, import_own_script):
    import_own_script("demo").main()
    out = capsys.readouterr().out
    assert "gradcheck passed" in out and "double backward" in out


@pytest.mark.skipif(HAS_CUDA, reason="checks the message a machine without a GPU prints")
def test_benchmark_says_it_needs_a_gpu(capsys, import_own_script):
    assert import_own_script("benchmark").main(["--quick"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


@pytest.mark.cuda
def test_benchmark_quick_run_writes_its_table(tmp_path, import_own_script):
    benchmark = import_own_script("benchmark")
    assert benchmark.main(["--quick", "--no-compile", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "chapter4_cuda.md").read_text().count("|") > 20


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))
