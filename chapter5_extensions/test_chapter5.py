"""Tests for chapter 5's operators: every op against a plain PyTorch reference, gradients and
gradcheck, opcheck, torch.compile(fullgraph=True), any strides, autocast, the modules, bad inputs
by their messages. Tests marked `sanitize` rerun under compute-sanitizer. The package as a user
meets it (wheel, DDP, scaffold, the scripts) is tested in test_package.py, the LSTM layer in
test_lstm_layer.py.

    python chapter5_extensions/test_chapter5.py     # on its own
    pytest chapter5_extensions                      # or under pytest
"""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

import build_inplace
import build_utils

build_inplace.build_inplace()
import custom_ops  # noqa: E402  (importable once built)

HAS_CUDA = torch.cuda.is_available()
CAN_BUILD_CUDA = torch.version.cuda is not None and build_utils.CUDA_HOME is not None
ops = torch.ops.custom_ops


# One rounding of the output dtype (the kernels compute half types in float); sums get more room.
TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}
DTYPES = list(TOLERANCES)


def random(shape, dtype, device, generator, requires_grad=False) -> torch.Tensor:
    t = torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)
    return t.requires_grad_(requires_grad)


def away_from_the_kink(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """x moved so that no x * scale + bias is within 0.05 of 0 (where relu bends and a low
    precision forward and the float64 reference may round to different sides)."""
    with torch.no_grad():
        z = x.double() * scale + bias.double()
        x.copy_(x.double() + torch.where(z.abs() < 0.05, 0.1 * torch.sign(z + 1e-30) / scale, 0))
    return x


# ---- the references: plain PyTorch, the specification of each op -------------------------------


def reference_fused_bias_relu(x, bias, scale):
    return torch.relu(x.double() * scale + bias.double())


def reference_conv_rnn(x, kernel, hidden):
    """The recurrence as a Python loop of PyTorch ops: what conv_rnn's kernel replaces. kernel
    (K,) or (1, 1, K); autograd through the loop is the reference for conv_rnn_backward."""
    h, outputs, weight = hidden, [], kernel.reshape(1, 1, -1)
    for t in range(x.shape[1]):
        conv = F.conv1d(h[:, None], weight, padding=weight.shape[-1] // 2)[:, 0]
        h = torch.tanh(x[:, t] + conv)
        outputs.append(h)
    return torch.stack(outputs, dim=1) if outputs else torch.empty_like(x)


# ---- the build ---------------------------------------------------------------------------------


def test_cuda_kernels_are_built_when_nvcc_is_there():
    """In CI (no GPU, but nvcc) the .cu files must compile and link, and register CUDA kernels."""
    assert custom_ops.built_with_cuda() == CAN_BUILD_CUDA


OPS = [
    "relu",
    "relu_backward",
    "fused_bias_relu",
    "fused_bias_relu_backward",
    "reduce_sum",
    "lstm_cell",
    "lstm_cell_backward",
    "conv_rnn",
    "conv_rnn_backward",
    "lstm",
    "lstm_backward",
    "lstm_packed",
    "lstm_packed_backward",
]


@pytest.mark.parametrize("name", OPS)
def test_every_op_has_kernels_a_fake_and_an_autograd_formula(name):
    """CPU (and CUDA where built) from C++; Meta (where register_fake puts the fake kernel) and
    Autograd from ops.py."""
    keys = ["CPU", "Meta", "Autograd"] + (["CUDA"] if CAN_BUILD_CUDA else [])
    for key in keys:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"custom_ops::{name}", key), key


# ---- relu, fused_bias_relu, reduce_sum: values and gradients ----------------------------------

SHAPES = [(0,), (1,), (7,), (31, 17), (2, 3, 65), (33, 128), (257, 1001), (3, 0)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fused_bias_relu_and_its_gradients_match_pytorch(dtype, shape, device, generator):
    bias = random(shape[-1:], dtype, device, generator, requires_grad=True)
    x = away_from_the_kink(random(shape, dtype, device, generator), bias, 0.7).requires_grad_()
    y = custom_ops.fused_bias_relu(x, bias, 0.7)
    grad_y = random(shape, dtype, device, generator)
    grads = torch.autograd.grad(y, (x, bias), grad_y)
    y_ref = reference_fused_bias_relu(x, bias, 0.7)
    grads_ref = torch.autograd.grad(y_ref, (x, bias), grad_y.double())
    rows = x.numel() // max(1, shape[-1])
    torch.testing.assert_close(y, y_ref.to(dtype), **TOLERANCES[dtype])
    torch.testing.assert_close(grads[0], grads_ref[0].to(dtype), **TOLERANCES[dtype])
    sum_atol = TOLERANCES[dtype]["atol"] + rows * 2e-7
    torch.testing.assert_close(
        grads[1], grads_ref[1].to(dtype), rtol=TOLERANCES[dtype]["rtol"], atol=sum_atol
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_relu_matches_torch_including_nan_and_inf(dtype, device):
    values = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 0.5, 2.0]
    x = torch.tensor(values, device=device, dtype=dtype, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    grad_y = torch.arange(1.0, 8.0, device=device, dtype=dtype)
    y, y_ref = custom_ops.relu(x), torch.relu(x_ref)
    torch.testing.assert_close(y, y_ref, equal_nan=True)
    torch.testing.assert_close(
        torch.autograd.grad(y, x, grad_y)[0], torch.autograd.grad(y_ref, x_ref, grad_y)[0]
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
# 2**22 + 3: enough vectors that some threads of a full grid take a step past the main loop.
@pytest.mark.parametrize("numel", [0, 1, 7, 1000, 2**22 + 3], ids=str)
def test_reduce_sum_matches_a_float64_sum(dtype, numel, device, generator):
    x = random((numel,), dtype, device, generator, requires_grad=True)
    total = custom_ops.reduce_sum(x)
    assert total.shape == () and total.dtype == dtype
    # Each addition in float rounds by 2^-24 relative: allow that per term, and the output's own
    # rounding in the half types.
    expected = x.double().sum()
    atol = TOLERANCES[dtype]["atol"] + numel * 2**-24 * 4
    torch.testing.assert_close(total.double(), expected, rtol=TOLERANCES[dtype]["rtol"], atol=atol)
    (grad,) = torch.autograd.grad(total, x, torch.tensor(2.0, device=device, dtype=dtype))
    assert torch.equal(grad, torch.full_like(x, 2.0))


def test_reduce_sum_is_deterministic(device, generator):
    x = random((3_000_001,), torch.float32, device, generator)
    first = custom_ops.reduce_sum(x)
    for _ in range(5):
        assert torch.equal(custom_ops.reduce_sum(x), first)


def test_reduce_sum_on_the_cpu_does_not_depend_on_the_thread_count(generator):
    # float64 values over 30 orders of magnitude: a different order of additions would show.
    x = random((1_000_003,), torch.float64, "cpu", generator) * 10.0 ** torch.randint(
        -15, 15, (1_000_003,), generator=generator
    )
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = custom_ops.reduce_sum(x)
        torch.set_num_threads(max(2, threads))
        assert torch.equal(custom_ops.reduce_sum(x), one)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_misaligned_inputs_take_the_narrow_path(dtype, device, generator):
    """x[1:] of a contiguous buffer: contiguous, but not on a 16-byte boundary."""
    buffer = random(17 * 64 + 1, dtype, device, generator)
    x = buffer[1:].view(17, 64)
    bias = random((64,), dtype, device, generator)
    torch.testing.assert_close(
        custom_ops.fused_bias_relu(x, bias, 0.5),
        reference_fused_bias_relu(x, bias, 0.5).to(dtype),
        **TOLERANCES[dtype],
    )
    torch.testing.assert_close(
        custom_ops.reduce_sum(buffer[1:]).double(),
        buffer[1:].double().sum(),
        rtol=TOLERANCES[dtype]["rtol"],
        atol=0.05,
    )


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda x, b: custom_ops.fused_bias_relu(x, b, 1.3), id="fused_bias_relu"),
        pytest.param(lambda x, b: custom_ops.relu(x * 1.3 + b), id="relu"),
        pytest.param(lambda x, b: custom_ops.reduce_sum(x * b), id="reduce_sum"),
    ],
)
def test_gradcheck_in_float64(op, device, generator):
    bias = random((10,), torch.float64, device, generator, requires_grad=True)
    x = away_from_the_kink(random((3, 4, 10), torch.float64, device, generator), bias, 1.3)
    assert torch.autograd.gradcheck(op, (x.requires_grad_(), bias))


def _lstm_h(x, b):
    weight, bias = x.new_full((16, 4), 0.1), x.new_zeros(16)
    return custom_ops.lstm_cell(x, x, x, weight, weight, bias, bias)[0]


@pytest.mark.parametrize(
    ("forward", "backward_op"),
    [
        (lambda x, b: custom_ops.fused_bias_relu(x, b, 1.0), "fused_bias_relu_backward"),
        (lambda x, b: custom_ops.relu(x + b), "relu_backward"),
        (_lstm_h, "lstm_cell_backward"),
        (lambda x, b: custom_ops.conv_rnn(x[None], b[:3], x[:1]), "conv_rnn_backward"),
    ],
    ids=["fused_bias_relu", "relu", "lstm_cell", "conv_rnn"],
)
def test_double_backward_is_refused_with_the_op_named(forward, backward_op, device):
    x = torch.randn(3, 4, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, device=device, requires_grad=True)
    (grad_x,) = torch.autograd.grad((forward(x, b) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=f"{backward_op}: double backward is not implemented"):
        grad_x.sum().backward()


# ---- lstm_cell ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("sizes", [(1, 1, 1), (5, 7, 3), (16, 32, 64), (0, 4, 6)], ids=str)
def test_lstm_cell_matches_nn_lstmcell(dtype, sizes, device, generator):
    batch, input_size, hidden = sizes
    torch.manual_seed(0)
    reference = torch.nn.LSTMCell(input_size, hidden, device=device, dtype=dtype)
    ours = custom_ops.LSTMCell(input_size, hidden, device=device, dtype=dtype)
    ours.load_state_dict(reference.state_dict())
    x, h, c = (
        random((batch, n), dtype, device, generator, True) for n in (input_size, hidden, hidden)
    )
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
    torch.manual_seed(0)
    reference = torch.nn.LSTMCell(48, 32, device="cuda")
    ours = custom_ops.LSTMCell(48, 32, device="cuda", dtype=dtype)
    ours.load_state_dict(reference.state_dict())
    x, h, c = (random((16, n), torch.float32, "cuda", generator) for n in (48, 32, 32))
    h_ref, c_ref = reference(x, (h, c))
    h_next, c_next = ours(x.to(dtype), (h.to(dtype), c.to(dtype)))
    tolerance = (
        dict(rtol=0.05, atol=0.05) if dtype == torch.bfloat16 else dict(rtol=5e-3, atol=5e-3)
    )
    torch.testing.assert_close(h_next.float(), h_ref, **tolerance)
    torch.testing.assert_close(c_next.float(), c_ref, **tolerance)


def test_lstm_cell_passes_gradcheck_in_float64(device, generator):
    b, i, hid = 3, 4, 5
    shapes = [(b, i), (b, hid), (b, hid), (4 * hid, i), (4 * hid, hid), (4 * hid,), (4 * hid,)]
    args = [random(s, torch.float64, device, generator, requires_grad=True) for s in shapes]
    assert torch.autograd.gradcheck(custom_ops.lstm_cell, args)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_lstm_cell_module_is_a_drop_in_for_nn_lstmcell(bias):
    reference = torch.nn.LSTMCell(6, 4, bias=bias)
    ours = custom_ops.LSTMCell(6, 4, bias=bias)
    assert list(ours.state_dict()) == list(reference.state_dict())
    ours.load_state_dict(reference.state_dict())
    x, state = torch.randn(3, 6), (torch.randn(3, 4), torch.randn(3, 4))
    calls = [
        lambda cell: cell(x),
        lambda cell: cell(x, hx=state),  # torch's keyword
        lambda cell: cell(x[0], (state[0][0], state[1][0])),  # unbatched
    ]
    for call in calls:
        for got, want in zip(call(ours), call(reference), strict=True):
            torch.testing.assert_close(got, want)


LSTM_CELL_LOSSES = ["h.sum() + c.sum()", "h_next alone", "c_next alone", "both, transposed"]


@pytest.mark.parametrize("loss", LSTM_CELL_LOSSES)
def test_lstm_cell_gradients_however_the_loss_reaches_it(loss, device, generator):
    """The gradients autograd hands the backward come in several forms: expanded (stride 0, from
    a sum), undefined (an output the loss does not use), any view. The backward reads them as
    they come; every form must give nn.LSTMCell's gradients. With the sum, as in benchmark.py,
    the state needs no gradient, so the backward returns none for it."""
    torch.manual_seed(0)
    reference = torch.nn.LSTMCell(5, 6, device=device, dtype=torch.float64)
    ours = custom_ops.LSTMCell(5, 6, device=device, dtype=torch.float64)
    ours.load_state_dict(reference.state_dict())
    state_needs_grad = loss != "h.sum() + c.sum()"
    x = random((4, 5), torch.float64, device, generator, requires_grad=True)
    h, c = (random((4, 6), torch.float64, device, generator, state_needs_grad) for _ in range(2))
    grad_h, grad_c = (transposed(random((4, 6), torch.float64, device, generator)) for _ in "hc")

    def run(cell):
        h_next, c_next = cell(x, (h, c))
        outputs, grads = {
            "h.sum() + c.sum()": ((h_next.sum() + c_next.sum(),), None),
            "h_next alone": ((h_next,), (grad_h,)),
            "c_next alone": ((c_next,), (grad_c,)),
            "both, transposed": ((h_next, c_next), (grad_h, grad_c)),
        }[loss]
        inputs = (x, h, c) if state_needs_grad else (x,)
        return torch.autograd.grad(outputs, (*inputs, *cell.parameters()), grads)

    for got, want in zip(run(ours), run(reference), strict=True):
        torch.testing.assert_close(got, want, **TOLERANCES[torch.float64])


def test_lstm_cell_records_a_cpp_autograd_node_only_when_needed(device, generator):
    """Its autograd is C++ (csrc/autograd.cpp), as relu's is: no node when no input requires
    grad, a C++ node (not register_autograd's Python one) when one does, the same values both
    ways, and the two outputs kept for the backward are not differentiable."""
    shapes = [(3, 4), (3, 5), (3, 5), (20, 4), (20, 5), (20,), (20,)]
    args = [random(s, torch.float64, device, generator) for s in shapes]
    plain = ops.lstm_cell.default(*args)
    assert all(t.grad_fn is None for t in plain)
    args[5].requires_grad_()  # b_ih alone is enough
    recorded = ops.lstm_cell.default(*args)
    assert "CppNode" in recorded[0].grad_fn.name()
    assert [t.requires_grad for t in recorded] == [True, True, False, False]
    for got, want in zip(recorded, plain, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_lstm_cell_backward_computes_only_the_gradients_asked_for(device, generator):
    """output_mask leaves out a gradient (None, its product not run); those asked for are the
    ones the full call gives."""
    shapes = [(3, 5), (3, 5), (3, 4), (3, 5), (3, 5), (20, 4), (20, 5), (3, 20), (3, 5)]
    args = [random(s, torch.float64, device, generator) for s in shapes]
    full = ops.lstm_cell_backward.default(*args)
    mask = [True, False, False, True, False, True]
    masked = ops.lstm_cell_backward.default(*args, mask)
    for got, want, asked in zip(masked, full, mask, strict=True):
        if asked:
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        else:
            assert got is None


# ---- conv_rnn ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    ("batch", "time", "features", "taps"),
    [(1, 1, 1, 1), (2, 5, 6, 3), (3, 17, 33, 5), (4, 8, 1500, 3), (0, 4, 8, 3), (2, 0, 8, 3)],
    ids=str,
)
def test_conv_rnn_matches_the_python_loop(dtype, batch, time, features, taps, device, generator):
    x = random((batch, time, features), dtype, device, generator)
    kernel = random((taps,), dtype, device, generator) / taps
    hidden = random((batch, features), dtype, device, generator)
    expected = reference_conv_rnn(x.double(), kernel.double(), hidden.double())
    # The kernel keeps h in float between steps; the half types round each step's output only.
    tolerance = (
        TOLERANCES[dtype] if dtype in (torch.float32, torch.float64) else dict(rtol=2e-2, atol=2e-2)
    )
    torch.testing.assert_close(
        custom_ops.conv_rnn(x, kernel, hidden), expected.to(dtype), **tolerance
    )


@pytest.mark.cuda
def test_conv_rnn_with_a_hidden_state_beyond_48_kib_of_shared_memory(generator):
    """8192 float features: 64 KiB of double-buffered state, above the default limit per block."""
    x, kernel, hidden = conv_rnn_inputs((2, 6, 8192, 3), torch.float32, "cuda", generator)
    out, expected = custom_ops.conv_rnn(x, kernel, hidden), reference_conv_rnn(x, kernel, hidden)
    torch.testing.assert_close(out, expected)
    # The backward's dz takes as much, and its per-thread kernel sums 12 KiB more. Reference in
    # float64; the kernel's gradient sums 98,304 terms, hence its 1e-3.
    grad_out = random(out.shape, torch.float32, "cuda", generator)
    got = conv_rnn_gradients((x, kernel, hidden), grad_out, custom_ops.conv_rnn)
    inputs64 = [t.detach().double().requires_grad_() for t in (x, kernel, hidden)]
    want = conv_rnn_gradients(inputs64, grad_out.double(), reference_conv_rnn)
    for g, w, tol in zip(got, want, (1e-5, 1e-3, 1e-5), strict=True):
        torch.testing.assert_close(g.double(), w, rtol=tol, atol=tol)


@pytest.mark.cuda
def test_conv_rnn_backward_takes_fewer_threads_when_shared_memory_is_short(generator):
    """28,000 float features: dz takes 219 KiB, which leaves room for fewer than 1024 threads'
    kernel sums on an H100 (227 KiB a block); the backward launches fewer threads, each looping
    over more features, and still matches."""
    inputs = conv_rnn_inputs((2, 3, 28_000, 3), torch.float32, "cuda", generator)
    grad_out = random(inputs[0].shape, torch.float32, "cuda", generator)
    got = conv_rnn_gradients(inputs, grad_out, custom_ops.conv_rnn)
    inputs64 = [t.detach().double().requires_grad_() for t in inputs]
    want = conv_rnn_gradients(inputs64, grad_out.double(), reference_conv_rnn)
    for g, w, tol in zip(got, want, (1e-5, 1e-3, 1e-5), strict=True):
        torch.testing.assert_close(g.double(), w, rtol=tol, atol=tol)


# Sizes for gradcheck: taps 1, 3 and 5 (more taps than features too), features 1 and odd, time
# 0 and 1.
CONV_RNN_GRADCHECK_SIZES = [
    (1, 1, 1, 1),
    (2, 3, 5, 3),
    (2, 4, 7, 5),
    (3, 2, 1, 3),
    (2, 1, 4, 5),
    (1, 3, 3, 5),
    (2, 0, 5, 3),
]


def conv_rnn_inputs(sizes, dtype, device, generator, kernel_shape=None):
    """x (B, T, F), kernel (K,) (or kernel_shape) scaled by 1/K and hidden (B, F), requiring
    grad: tanh stays away from saturation, where every gradient would be near zero."""
    batch, time, features, taps = sizes
    x = random((batch, time, features), dtype, device, generator)
    kernel = (random((taps,), dtype, device, generator) / taps).reshape(kernel_shape or (taps,))
    hidden = random((batch, features), dtype, device, generator)
    return x.requires_grad_(), kernel.requires_grad_(), hidden.requires_grad_()


@pytest.mark.parametrize("sizes", CONV_RNN_GRADCHECK_SIZES, ids=str)
def test_conv_rnn_passes_gradcheck_in_float64(sizes, device, generator):
    inputs = conv_rnn_inputs(sizes, torch.float64, device, generator)
    assert torch.autograd.gradcheck(custom_ops.conv_rnn, inputs)


def test_conv_rnn_takes_a_conv1d_weight_and_gives_its_gradient_that_shape(device, generator):
    """The seed's call: x (2, 10, 64), a conv1d weight (1, 1, 3), hidden (2, 64)."""
    x, weight, hidden = conv_rnn_inputs((2, 10, 64, 3), torch.float64, device, generator, (1, 1, 3))
    out = custom_ops.conv_rnn(x, weight, hidden)
    torch.testing.assert_close(out, custom_ops.conv_rnn(x, weight.detach().reshape(3), hidden))
    expected = reference_conv_rnn(x, weight, hidden)
    torch.testing.assert_close(out, expected)
    grad_out = random(out.shape, torch.float64, device, generator)
    grads = torch.autograd.grad(out, (x, weight, hidden), grad_out)
    assert grads[1].shape == (1, 1, 3)
    expected_grads = torch.autograd.grad(expected, (x, weight, hidden), grad_out)
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want)
    small = conv_rnn_inputs((2, 3, 5, 3), torch.float64, device, generator, (1, 1, 3))
    assert torch.autograd.gradcheck(custom_ops.conv_rnn, small)


def conv_rnn_gradients(inputs, grad_out, forward):
    x, kernel, hidden = inputs
    return torch.autograd.grad(forward(x, kernel, hidden), (x, kernel, hidden), grad_out)


def test_conv_rnn_gradients_reach_views_and_take_an_expanded_grad_out(device, generator):
    """x transposed, the kernel stepped, hidden transposed, and out.sum()'s gradient (one value
    expanded to out's shape, strides 0): the gradients land in the bases, as for PyTorch's ops."""
    bases = (
        random((3, 6, 5), torch.float64, device, generator, requires_grad=True),
        random((6,), torch.float64, device, generator, requires_grad=True),
        random((6, 3), torch.float64, device, generator, requires_grad=True),
    )

    def views(seq, kernel, hidden):
        return seq.transpose(1, 2), kernel[::2], hidden.t()  # (3, 5, 6), (3,), (3, 6)

    got = torch.autograd.grad(custom_ops.conv_rnn(*views(*bases)).sum(), bases)
    want = torch.autograd.grad(reference_conv_rnn(*views(*bases)).sum(), bases)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize(
    "sizes", [(4, 16, 33, 3), (3, 9, 64, 5), (2, 5, 6, 1), (2, 7, 1100, 3)], ids=str
)
def test_conv_rnn_gradients_match_the_python_loop_in_float32(sizes, device, generator):
    """Against autograd through the Python loop in float64. float32 rounds each step (about 6e-8
    relative) and the errors carried back through the steps stay near 1e-6 here; the kernel's
    gradient adds up every step of every sequence (up to 15,000 terms), so it gets 1e-4."""
    inputs = conv_rnn_inputs(sizes, torch.float32, device, generator)
    grad_out = random(inputs[0].shape, torch.float32, device, generator)
    got = conv_rnn_gradients(inputs, grad_out, custom_ops.conv_rnn)
    inputs64 = [t.detach().double().requires_grad_() for t in inputs]
    want = conv_rnn_gradients(inputs64, grad_out.double(), reference_conv_rnn)
    names = ("grad_x", "grad_kernel", "grad_hidden")
    tolerances = (1e-5, 1e-4, 1e-5)
    for name, g, w, tol in zip(names, got, want, tolerances, strict=True):
        assert g.dtype == torch.float32, name
        torch.testing.assert_close(g.double(), w, rtol=tol, atol=tol, msg=name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_conv_rnn_half_type_gradients_match_float64(dtype, device, generator):
    """The kernels keep dz and the sums in float; what the half types lose is the rounding of
    the saved h_t (1 - h_t^2 is taken from it) and of each stored gradient: about 1e-3 relative
    (float16) or 8e-3 (bfloat16) per value, carried back over 12 steps."""
    inputs = conv_rnn_inputs((3, 12, 40, 3), dtype, device, generator)
    grad_out = random(inputs[0].shape, dtype, device, generator)
    got = conv_rnn_gradients(inputs, grad_out, custom_ops.conv_rnn)
    inputs64 = [t.detach().double().requires_grad_() for t in inputs]
    want = conv_rnn_gradients(inputs64, grad_out.double(), reference_conv_rnn)
    tol = 2e-2 if dtype == torch.float16 else 8e-2
    for name, g, w in zip(("grad_x", "grad_kernel", "grad_hidden"), got, want, strict=True):
        assert g.dtype == dtype, name
        torch.testing.assert_close(g.double(), w, rtol=tol, atol=tol, msg=name)


def test_conv_rnn_backward_is_deterministic(device, generator):
    """The kernel's gradient is a sum over every sequence: partial sums per sequence, added in a
    fixed order, so two runs give the same bits."""
    inputs = conv_rnn_inputs((16, 20, 300, 5), torch.float32, device, generator)
    grad_out = random(inputs[0].shape, torch.float32, device, generator)
    first = conv_rnn_gradients(inputs, grad_out, custom_ops.conv_rnn)
    second = conv_rnn_gradients(inputs, grad_out, custom_ops.conv_rnn)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


@pytest.mark.slow(seconds=120)
def test_conv_rnn_forward_and_backward_compile_with_fullgraph(device, generator):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), custom_ops.ConvRNN(8, 3)).to(device)
    x = random((2, 5, 8), torch.float32, device, generator)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    loss, loss_compiled = model(x).square().sum(), compiled(x).square().sum()
    torch.testing.assert_close(loss_compiled, loss)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    grads_compiled = torch.autograd.grad(loss_compiled, list(model.parameters()))
    for got, want in zip(grads_compiled, grads, strict=True):
        torch.testing.assert_close(got, want)


def test_conv_rnn_module_learns_a_kernel(device):
    """ConvRNN fits the sequences a known kernel produced: 40 Adam steps bring the loss down to a
    tenth of where it starts, and the kernel close to the known one."""
    torch.manual_seed(0)
    teacher = torch.tensor([0.5, -0.8, 0.3], device=device)
    x = torch.randn(8, 12, 16, device=device)
    with torch.no_grad():
        target = custom_ops.conv_rnn(x, teacher, torch.zeros(8, 16, device=device))
    rnn = custom_ops.ConvRNN(16, 3, device=device)
    assert [name for name, _ in rnn.named_parameters()] == ["kernel"]
    optimizer = torch.optim.Adam(rnn.parameters(), lr=0.05)
    losses = []
    for _ in range(40):
        loss = F.mse_loss(rnn(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0], losses
    torch.testing.assert_close(rnn.kernel.detach(), teacher, rtol=0, atol=0.1)


def conv_rnn_backward_call(device, **changes):
    """conv_rnn_backward on good inputs (B=2, T=3, F=4, K=3), but for the shapes or dtypes in
    `changes` (name -> shape, or name -> (shape, dtype))."""
    args = {"grad_out": (2, 3, 4), "out": (2, 3, 4), "kernel": (3,), "hidden": (2, 4)}
    tensors = {}
    for name, shape in args.items():
        spec = changes.get(name, shape)
        shape, dtype = spec if isinstance(spec[-1], torch.dtype) else (spec, torch.float32)
        tensors[name] = torch.ones(shape, device=device).to(dtype)
    return lambda: ops.conv_rnn_backward(*tensors.values())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"grad_out": (2, 3, 5)},
            r"conv_rnn_backward: out and grad_out must have the same shape, got \[2, 3, 4\] and "
            r"\[2, 3, 5\]",
        ),
        ({"kernel": (4,)}, "conv_rnn_backward: kernel must be 1-D with an odd length"),
        (
            {"kernel": (2, 1, 3)},
            r"conv_rnn_backward: .* or a conv1d weight of shape \[1, 1, K\] with K odd, got "
            r"\[2, 1, 3\]",
        ),
        ({"hidden": (3, 4)}, r"conv_rnn_backward: hidden must have shape \[2, 4\]"),
        (
            {"out": (2, 12), "grad_out": (2, 12)},
            r"conv_rnn_backward: out must be 3-D \(batch, time, features\), got \[2, 12\]",
        ),
        (
            {"kernel": ((3,), torch.float64)},
            "conv_rnn_backward: out and kernel must have the same dtype, got Float and Double",
        ),
        (
            {name: (shape, torch.int32) for name, shape in [("out", (2, 3, 4))]},
            "conv_rnn_backward: out must be a floating-point tensor",
        ),
    ],
    ids=[
        "grad-out-shape",
        "even-kernel",
        "weight-channels",
        "hidden-shape",
        "out-2d",
        "dtype",
        "int",
    ],
)
def test_conv_rnn_backward_rejects_bad_input(changes, message, device):
    with pytest.raises(RuntimeError, match=message):
        conv_rnn_backward_call(device, **changes)()


@pytest.mark.cuda
def test_conv_rnn_refuses_a_hidden_state_beyond_shared_memory():
    """40,000 float features need 320 KB of shared memory, more than any block can have."""
    x = torch.zeros(1, 2, 40_000, device="cuda")
    with pytest.raises(RuntimeError, match=r"conv_rnn: the hidden state .* more than the"):
        custom_ops.conv_rnn(x, torch.ones(3, device="cuda"), torch.zeros(1, 40_000, device="cuda"))
    kernel, hidden = torch.ones(3, device="cuda"), torch.zeros(1, 40_000, device="cuda")
    with pytest.raises(
        RuntimeError, match=r"conv_rnn_backward: the hidden state's gradient .* more than the"
    ):
        ops.conv_rnn_backward(x, x, kernel, hidden)


def test_conv_rnn_module_runs_a_sequence():
    rnn = custom_ops.ConvRNN(features=8, kernel_size=3)
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(rnn(x), reference_conv_rnn(x, rnn.kernel, torch.zeros(2, 8)))
    hidden = torch.randn(2, 8)
    torch.testing.assert_close(rnn(x, hidden), reference_conv_rnn(x, rnn.kernel, hidden))
    with pytest.raises(ValueError, match="kernel_size must be odd"):
        custom_ops.ConvRNN(features=8, kernel_size=4)


# ---- what PyTorch's tooling checks: opcheck and torch.compile ---------------------------------


def opcheck_cases(device):
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return random(shape, torch.float32, device, g, requires_grad=True)

    y = (torch.rand(5, 8, device=device) - 0.3).requires_grad_()
    lstm = [r(2, 3), r(2, 4), r(2, 4), r(16, 3), r(16, 4), r(16), r(16)]
    gates = torch.rand(2, 16, device=device, requires_grad=True)
    tanh_c = torch.rand(2, 4, device=device, requires_grad=True)
    return {
        "relu": (ops.relu.default, (r(5, 8),)),
        "relu_backward": (ops.relu_backward.default, (r(5, 8), y)),
        "fused_bias_relu": (ops.fused_bias_relu.default, (r(5, 8), r(8), 0.5)),
        "fused_bias_relu_backward": (ops.fused_bias_relu_backward.default, (r(5, 8), y, 0.5)),
        "reduce_sum": (ops.reduce_sum.default, (r(5, 8),)),
        "lstm_cell": (ops.lstm_cell.default, tuple(lstm)),
        "lstm_cell_backward": (
            ops.lstm_cell_backward.default,
            (r(2, 4), r(2, 4), *lstm[:5], gates, tanh_c),
        ),
        "lstm_cell_backward-masked": (
            ops.lstm_cell_backward.default,
            (r(2, 4), r(2, 4), *lstm[:5], gates, tanh_c, [True, False, False, True, True, False]),
        ),
        "conv_rnn": (ops.conv_rnn.default, (r(2, 5, 6), r(3), r(2, 6))),
        "conv_rnn-conv1d-weight": (ops.conv_rnn.default, (r(2, 5, 6), r(1, 1, 3), r(2, 6))),
        "conv_rnn_backward": (
            ops.conv_rnn_backward.default,
            (r(2, 5, 6), torch.tanh(r(2, 5, 6)), r(1, 1, 5), r(2, 6)),
        ),
    }


def transposed(t: torch.Tensor) -> torch.Tensor:
    """The same values as t, stored transposed in memory: t is a view with strides (1, rows)."""
    return t.t().contiguous().t()


def opcheck_view_cases(device):
    """The differentiable ops on views (transposed, stepped, sliced): the fake kernel must promise
    the real kernel's contiguous output, whatever the input's strides."""
    g = torch.Generator().manual_seed(1)
    base = random((9, 16), torch.float32, device, g)
    bias = random((16,), torch.float32, device, g)
    return {
        "relu-transposed": (ops.relu.default, (transposed(base).requires_grad_(),)),
        "fused_bias_relu-stepped": (
            ops.fused_bias_relu.default,
            (base[:, ::2].requires_grad_(), bias[::2].requires_grad_(), 0.5),
        ),
        "reduce_sum-sliced": (ops.reduce_sum.default, (base[1:, 3:].requires_grad_(),)),
        "relu_backward-transposed": (ops.relu_backward.default, (transposed(base), base)),
        "fused_bias_relu_backward-transposed": (
            ops.fused_bias_relu_backward.default,
            (transposed(base), transposed(base.relu()), 0.5),
        ),
    }


@pytest.mark.parametrize("name", list(opcheck_view_cases("cpu")))
def test_opcheck_on_views(name, device):
    op, args = opcheck_view_cases(device)[name]
    opcheck(op, args)


# Ops whose backward is a refusal: AOTAutograd's check traces a backward, which must raise for
# them, so they get opcheck's other three checks (on inputs that require grad, so that the
# autograd-registration check has something to check).
NO_BACKWARD = {
    "relu_backward",
    "fused_bias_relu_backward",
    "lstm_cell_backward",
    "lstm_cell_backward-masked",
    "conv_rnn_backward",
}


@pytest.mark.parametrize("name", list(opcheck_cases("cpu")))
def test_opcheck(name, device):
    """Schema, fake kernel, autograd registration, and the op traced by AOTAutograd; opcheck
    raises on the first check that fails."""
    op, args = opcheck_cases(device)[name]
    checks = ("test_schema", "test_autograd_registration", "test_faketensor")
    if name not in NO_BACKWARD:
        checks += ("test_aot_dispatch_dynamic",)
    opcheck(op, args, test_utils=checks)


class TinyModel(torch.nn.Module):
    """Every differentiable op in one forward, as a network would use them."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(12, 16, bias=False)
        self.act = custom_ops.FusedBiasReLU(16, scale=0.5)
        self.cell = custom_ops.LSTMCell(16, 8)

    def forward(self, x):
        h, c = self.cell(self.act(self.linear(x)))
        return custom_ops.reduce_sum(custom_ops.relu(h) * c)


@pytest.mark.slow(seconds=120)
def test_a_model_of_custom_ops_compiles_with_fullgraph_and_matches_eager(device):
    torch.manual_seed(0)
    model = TinyModel().to(device)
    x = torch.randn(6, 12, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    loss, loss_compiled = model(x), compiled(x)
    torch.testing.assert_close(loss_compiled, loss)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    grads_compiled = torch.autograd.grad(loss_compiled, list(model.parameters()))
    for got, want in zip(grads_compiled, grads, strict=True):
        torch.testing.assert_close(got, want)


# ---- any strides, as PyTorch's own ops take -----------------------------------------------------

VIEWS = {
    "transposed": lambda t: transposed(t),
    "stepped": lambda t: t[:, ::2],
    "sliced": lambda t: t[1:, 3:],
    # Contiguous, but one element past the 16-byte boundary the kernels' vectors need.
    "misaligned": lambda t: t.flatten()[1 : 1 + (t.shape[0] - 1) * t.shape[1]].view(-1, t.shape[1]),
    "expanded": lambda t: t[:1].expand(t.shape[0], -1),
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_op_takes_any_strides(view, dtype, device, generator):
    """A view in, the reference's values out (contiguous), gradients included; the view's
    gradient lands in the base tensor with the view's strides, as for any PyTorch op."""
    base = random((37, 66), dtype, device, generator, requires_grad=True)
    x = VIEWS[view](base)
    bias = random(x.shape[-1:], dtype, device, generator, requires_grad=True)
    # Away from relu's kink, through the view (its first row alone for the expanded one, whose
    # rows share memory).
    target = x.detach()[:1] if view == "expanded" else x.detach()
    target.copy_(away_from_the_kink(target.clone(), bias, 0.7))
    tol = TOLERANCES[dtype]
    y = custom_ops.fused_bias_relu(x, bias, 0.7)
    assert y.is_contiguous()
    torch.testing.assert_close(y, reference_fused_bias_relu(x, bias, 0.7).to(dtype), **tol)
    torch.testing.assert_close(custom_ops.relu(x), torch.relu(x), **tol)
    torch.testing.assert_close(
        custom_ops.reduce_sum(x).double(),
        x.double().sum(),
        rtol=tol["rtol"],
        atol=tol["atol"] + x.numel() * 2**-24 * 4,
    )
    # A gradient that is itself a view (stride 0 along rows): what .expand() in a loss gives.
    grad_y = random(x.shape[-1:], dtype, device, generator).expand_as(x)
    grads = torch.autograd.grad(custom_ops.fused_bias_relu(x, bias, 0.7), (base, bias), grad_y)
    grads_ref = torch.autograd.grad(reference_fused_bias_relu(x, bias, 0.7), (base, bias), grad_y)
    rows = x.shape[0]
    torch.testing.assert_close(grads[0], grads_ref[0].to(dtype), **tol)
    torch.testing.assert_close(
        grads[1], grads_ref[1].to(dtype), rtol=tol["rtol"], atol=tol["atol"] + rows * 2e-7
    )


@pytest.mark.cuda
def test_more_row_tiles_than_a_grid_can_hold(generator):
    """2^24 + 8 rows of 4 floats: the forward's grid stops at 65,535 row tiles and the backward's
    at 65,535 row splits, so both kernels' loops must run more than once."""
    x = random((2**24 + 8, 4), torch.float32, "cuda", generator, requires_grad=True)
    bias = random((4,), torch.float32, "cuda", generator, requires_grad=True)
    y = custom_ops.fused_bias_relu(x, bias, 0.5)
    grad_y = random(x.shape, torch.float32, "cuda", generator)
    grads = torch.autograd.grad(y, (x, bias), grad_y)
    expected = torch.relu(x * 0.5 + bias)
    torch.testing.assert_close(y, expected)
    grads_ref = torch.autograd.grad(expected, (x, bias), grad_y)
    torch.testing.assert_close(grads[0], grads_ref[0])
    torch.testing.assert_close(grads[1], grads_ref[1], rtol=1e-4, atol=1e-1)


def test_gradcheck_on_a_slice(device, generator):
    base = random((6, 20), torch.float64, device, generator)
    bias = random((5,), torch.float64, device, generator, requires_grad=True)
    away_from_the_kink(base[1:, 3:18:3], bias, 1.3)  # in place, through the view
    base.requires_grad_()

    def op(base, bias):
        sliced = base[1:, 3:18:3]  # strides (20, 3), starting 23 elements in
        return custom_ops.fused_bias_relu(sliced, bias, 1.3), custom_ops.relu(sliced.t())

    assert torch.autograd.gradcheck(op, (base, bias))


def test_lstm_cell_and_conv_rnn_take_views(device, generator):
    x = transposed(random((5, 3), torch.float64, device, generator))
    h = random((10, 4), torch.float64, device, generator)[::2]
    c = transposed(random((5, 4), torch.float64, device, generator))
    reference = torch.nn.LSTMCell(3, 4, device=device, dtype=torch.float64)
    params = [p.detach() for p in reference.parameters()]
    got = custom_ops.lstm_cell(x, h, c, *params)
    want = reference(x, (h, c))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    seq = random((3, 6, 5), torch.float64, device, generator)  # (B, F, T), read as (B, T, F)
    kernel = random((6,), torch.float64, device, generator)[::2]
    hidden = transposed(random((3, 6), torch.float64, device, generator))
    torch.testing.assert_close(
        custom_ops.conv_rnn(seq.transpose(1, 2), kernel, hidden),
        reference_conv_rnn(seq.transpose(1, 2), kernel, hidden),
    )


# ---- torch.autocast: the same model of custom_ops and of PyTorch ops ----------------------------


class AutocastModel(torch.nn.Module):
    """Linear without bias -> bias + relu -> LSTM cell -> relu -> sum, with `act`, `cell`, `relu`
    and `total` either custom_ops' or PyTorch's own; both share one initialisation."""

    def __init__(self, ours: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(24, 32, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(32) * 0.1)
        self.cell = (custom_ops.LSTMCell if ours else torch.nn.LSTMCell)(32, 16)
        self.ours = ours

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.linear(x)
        if self.ours:
            a = custom_ops.fused_bias_relu(z, self.bias, 0.5)
        else:
            a = torch.relu(z * 0.5 + self.bias)
        h, c = self.cell(a)
        out = custom_ops.relu(h) * c if self.ours else torch.relu(h) * c
        return (custom_ops.reduce_sum(out) if self.ours else out.sum()) / out.shape[0]


def autocast_cases():
    cases = [pytest.param("cpu", torch.bfloat16, id="cpu-bfloat16")]
    for dtype in (torch.bfloat16, torch.float16):
        cases.append(
            pytest.param(
                "cuda",
                dtype,
                id=f"cuda-{str(dtype).removeprefix('torch.')}",
                marks=pytest.mark.cuda,
            )
        )
    return cases


@pytest.mark.parametrize(("device_type", "dtype"), autocast_cases())
def test_reduce_sum_under_autocast_has_torch_sums_dtype(device_type, dtype):
    """CUDA autocast runs torch.sum in float32; CPU autocast leaves it alone: so does reduce_sum."""
    x = torch.randn(1000, device=device_type, dtype=dtype)
    with torch.autocast(device_type, dtype=dtype):
        ours, theirs = custom_ops.reduce_sum(x), torch.sum(x)
    assert ours.dtype == theirs.dtype
    torch.testing.assert_close(ours, theirs, rtol=1e-2, atol=1e-1)


@pytest.mark.parametrize(("device_type", "dtype"), autocast_cases())
def test_training_under_autocast_matches_pytorch_ops(device_type, dtype):
    """Five SGD steps of the same model, custom_ops against PyTorch ops, both under autocast:
    the losses agree to the low precision's rounding, and the ops ran in that precision."""
    x = torch.randn(16, 24, generator=torch.Generator().manual_seed(2)).to(device_type)
    losses = {}
    for ours in (True, False):
        model = AutocastModel(ours).to(device_type)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses[ours] = []
        for _ in range(5):
            with torch.autocast(device_type, dtype=dtype):
                loss = model(x)
                if ours:
                    act = custom_ops.fused_bias_relu(model.linear(x), model.bias, 0.5)
                    assert act.dtype == dtype  # the float32 bias was cast, not x promoted
            optimizer.zero_grad()
            loss.float().backward()
            optimizer.step()
            losses[ours].append(loss.float().item())
        assert all(p.dtype == torch.float32 for p in model.parameters())
    # bfloat16 keeps 8 bits of mantissa (relative rounding 2^-8), float16 11.
    rtol = 3e-2 if dtype == torch.bfloat16 else 5e-3
    torch.testing.assert_close(losses[True], losses[False], rtol=rtol, atol=rtol)


# ---- bad input, by the message it must produce -------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda d: custom_ops.fused_bias_relu(
                torch.ones(3, 4, device=d), torch.ones(5, device=d)
            ),
            r"fused_bias_relu: bias must have shape \(4,\) to match x.size\(-1\), got \[5\]",
        ),
        (
            lambda d: custom_ops.fused_bias_relu(
                torch.ones(3, 4, device=d), torch.ones(4, device=d, dtype=torch.float64)
            ),
            "fused_bias_relu: x and bias must have the same dtype, got Float and Double",
        ),
        (
            lambda d: custom_ops.relu(torch.ones(3, device=d, dtype=torch.int32)),
            "relu: x must be a floating-point tensor",
        ),
        (
            lambda d: custom_ops.lstm_cell(
                *(
                    torch.ones(s, device=d)
                    for s in [(2, 4), (2, 3), (2, 3), (12, 5), (12, 3), (12,), (12,)]
                )
            ),
            r"lstm_cell: w_ih must have shape \[12, 4\], got \[12, 5\]",
        ),
        (
            lambda d: custom_ops.conv_rnn(
                torch.ones(2, 3, 4, device=d), torch.ones(2, device=d), torch.ones(2, 4, device=d)
            ),
            "conv_rnn: kernel must be 1-D with an odd length",
        ),
        (
            lambda d: custom_ops.conv_rnn(
                torch.ones(2, 3, 4, device=d), torch.ones(3, device=d), torch.ones(3, 4, device=d)
            ),
            r"conv_rnn: hidden must have shape \[2, 4\]",
        ),
        (
            lambda d: custom_ops.conv_rnn(
                torch.ones(2, 3, 4, device=d),
                torch.ones(1, 2, 3, device=d),
                torch.ones(2, 4, device=d),
            ),
            r"conv_rnn: .* or a conv1d weight of shape \[1, 1, K\] with K odd, got \[1, 2, 3\]",
        ),
    ],
    ids=[
        "bias-shape",
        "dtype-mismatch",
        "int-dtype",
        "lstm-weight",
        "even-kernel",
        "hidden-shape",
        "conv1d-weight-channels",
    ],
)
def test_rejects_bad_input(call, message, device):
    with pytest.raises(RuntimeError, match=message):
        call(device)


@pytest.mark.cuda
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: custom_ops.fused_bias_relu(torch.ones(2, 3, device="cuda"), torch.ones(3)),
            "fused_bias_relu: x and bias must be on the same device, got cuda:0 and cpu",
        ),
        (
            lambda: custom_ops.conv_rnn(
                torch.ones(2, 3, 4, device="cuda"), torch.ones(3), torch.ones(2, 4, device="cuda")
            ),
            "conv_rnn: x and kernel must be on the same device, got cuda:0 and cpu",
        ),
        (
            lambda: ops.conv_rnn_backward(
                torch.ones(2, 3, 4),
                torch.ones(2, 3, 4, device="cuda"),
                torch.ones(3, device="cuda"),
                torch.ones(2, 4, device="cuda"),
            ),
            "conv_rnn_backward: out and grad_out must be on the same device, got cuda:0 and cpu",
        ),
        (
            lambda: custom_ops.lstm_cell(
                torch.ones(2, 4, device="cuda"),
                *(torch.ones(s) for s in [(2, 3), (2, 3), (12, 4), (12, 3), (12,), (12,)]),
            ),
            "lstm_cell: x and h must be on the same device, got cuda:0 and cpu",
        ),
    ],
    ids=["bias-on-cpu", "kernel-on-cpu", "grad-out-on-cpu", "state-on-cpu"],
)
def test_rejects_mixed_devices(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---- the cheap ops: autograd in C++ (csrc/autograd.cpp) --------------------------------------


@pytest.mark.parametrize("name", ["relu", "fused_bias_relu", "reduce_sum"])
def test_cheap_ops_record_a_cpp_autograd_node(name, device):
    """Their autograd is registered in C++ (csrc/autograd.cpp), so a call records a C++ node,
    not the Python one register_autograd would add: what keeps a call as cheap as torch.relu's."""
    x = torch.randn(4, 8, device=device, requires_grad=True)
    b = torch.randn(8, device=device, requires_grad=True)
    calls = {
        "relu": lambda: custom_ops.relu(x),
        "fused_bias_relu": lambda: custom_ops.fused_bias_relu(x, b, 0.5),
        "reduce_sum": lambda: custom_ops.reduce_sum(x),
    }
    assert "CppNode" in calls[name]().grad_fn.name()


@pytest.mark.parametrize("name", ["relu", "fused_bias_relu", "reduce_sum"])
def test_cheap_ops_record_no_node_when_no_gradient_is_needed(name, device, generator):
    """csrc/autograd.cpp builds a graph node only when grad mode is on and an input requires
    grad; otherwise the call goes straight to the kernel and gives the same values."""
    x = random((4, 8), torch.float64, device, generator)
    b = random((8,), torch.float64, device, generator)
    calls = {
        "relu": (lambda x, b: custom_ops.relu(x), lambda x, b: torch.relu(x)),
        "fused_bias_relu": (
            lambda x, b: custom_ops.fused_bias_relu(x, b, 0.5),
            lambda x, b: torch.relu(x * 0.5 + b),
        ),
        "reduce_sum": (lambda x, b: custom_ops.reduce_sum(x), lambda x, b: x.sum()),
    }
    op, reference = calls[name]
    plain = op(x, b)
    assert plain.grad_fn is None and not plain.requires_grad
    torch.testing.assert_close(plain, reference(x, b))
    with torch.no_grad():
        assert op(x.requires_grad_(), b.requires_grad_()).grad_fn is None


def test_a_forward_mode_tangent_is_refused_not_dropped(device, generator):
    """The ops have no forward-mode formula: a dual tensor gets an error that says so (from
    torch::autograd::Function), never an output whose tangent silently vanished."""
    import torch.autograd.forward_ad as fwAD

    x = random((4, 8), torch.float64, device, generator)
    with fwAD.dual_level(), pytest.raises(RuntimeError, match="jvp is not implemented"):
        custom_ops.relu(fwAD.make_dual(x, torch.ones_like(x)))


def test_fused_bias_relu_gives_a_gradient_to_bias_alone(device, generator):
    """With only bias requiring grad, the node is recorded all the same (one input is enough)
    and bias's gradient matches PyTorch's."""
    x = random((6, 8), torch.float64, device, generator)
    b = random((8,), torch.float64, device, generator, requires_grad=True)
    (grad_bias,) = torch.autograd.grad(custom_ops.fused_bias_relu(x, b, 0.5).sum(), b)
    (expected,) = torch.autograd.grad(torch.relu(x * 0.5 + b).sum(), b)
    torch.testing.assert_close(grad_bias, expected)


# ---- under compute-sanitizer: every CUDA kernel once, on small shapes --------------------------


@pytest.mark.cuda
@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_every_cuda_kernel_on_small_shapes(dtype, generator):
    # (300, 130): several blocks, so reduce_sum's last-block finish and the backward's row
    # splits run; 130 columns take 2-element vectors in float32.
    for shape in [(1, 1), (5, 37), (33, 128), (300, 130)]:
        bias = random(shape[-1:], dtype, "cuda", generator, requires_grad=True)
        x = away_from_the_kink(random(shape, dtype, "cuda", generator), bias, 0.5).requires_grad_()
        loss = custom_ops.reduce_sum(
            custom_ops.fused_bias_relu(x, bias, 0.5)
        ) + custom_ops.reduce_sum(custom_ops.relu(x))
        grads = torch.autograd.grad(loss, (x, bias))
        loss_ref = reference_fused_bias_relu(x, bias, 0.5).sum() + torch.relu(x.double()).sum()
        grads_ref = torch.autograd.grad(loss_ref, (x, bias))
        torch.testing.assert_close(grads[0], grads_ref[0].to(dtype), **TOLERANCES[dtype])
    cell = custom_ops.LSTMCell(5, 7, device="cuda", dtype=dtype)
    h_next, c_next = cell(torch.randn(3, 5, device="cuda", dtype=dtype))
    (h_next.sum() + c_next.sum()).backward()
    x = random((2, 4, 40), dtype, "cuda", generator)
    out = custom_ops.conv_rnn(
        x,
        torch.ones(3, device="cuda", dtype=dtype) / 3,
        torch.zeros(2, 40, device="cuda", dtype=dtype),
    )
    torch.testing.assert_close(
        out.double(),
        reference_conv_rnn(
            x.double(),
            torch.ones(3, device="cuda", dtype=torch.float64) / 3,
            torch.zeros(2, 40, device="cuda", dtype=torch.float64),
        ),
        rtol=2e-2,
        atol=2e-2,
    )
    torch.cuda.synchronize()


@pytest.mark.cuda
@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_conv_rnn_forward_and_backward_kernels_on_small_shapes(dtype, generator):
    """Both kernels under the sanitizers: one feature, one step, more features than a block has
    threads (1100 > 1024), the conv1d weight layout, and no step at all."""
    tol = TOLERANCES[torch.float32] if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    for sizes, kernel_shape in [
        ((1, 1, 1, 1), None),
        ((2, 4, 40, 3), None),
        ((2, 3, 1100, 5), None),
        ((3, 5, 33, 3), (1, 1, 3)),
    ]:
        inputs = conv_rnn_inputs(sizes, dtype, "cuda", generator, kernel_shape)
        grad_out = random(inputs[0].shape, dtype, "cuda", generator)
        got = conv_rnn_gradients(inputs, grad_out, custom_ops.conv_rnn)
        inputs64 = [t.detach().double().requires_grad_() for t in inputs]
        want = conv_rnn_gradients(inputs64, grad_out.double(), reference_conv_rnn)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g.double(), w, **tol)
    # No step (the reference's empty output has no graph): the backward kernel still runs, for
    # grad_hidden, and nothing reaches the kernel or the hidden state.
    inputs = conv_rnn_inputs((2, 0, 8, 3), dtype, "cuda", generator)
    grads = conv_rnn_gradients(inputs, torch.ones_like(inputs[0]), custom_ops.conv_rnn)
    assert grads[0].shape == (2, 0, 8) and not grads[1].any() and not grads[2].any()
    torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))
