"""Tests for custom_ops.lstm, the whole LSTM layer (chapter 5, "A whole LSTM layer"), and for
custom_ops.LSTM, the drop-in for torch.nn.LSTM. The specification is torch.nn.LSTM itself: the same
weights give the same outputs and the same gradients for every input and parameter.

    python chapter5_extensions/test_lstm_layer.py     # on its own
    pytest chapter5_extensions/test_lstm_layer.py     # or under pytest
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from torch.library import opcheck

import build_inplace

build_inplace.build_inplace()
import custom_ops  # noqa: E402  (importable once built)

HAS_CUDA = torch.cuda.is_available()
HERE = Path(__file__).resolve().parent

# Against torch.nn.LSTM in float64 on the CPU. float32 runs with TF32 off (strict_float32 below);
# the half types round every h_t and every gate gradient, and a weight gradient sums T*B of them.
TOLERANCES = {
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.float32: dict(rtol=1e-4, atol=1e-5),
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=5e-2, atol=5e-2),
}


def strict_float32():
    """TF32 off for cuDNN's RNN (and so for ours, which follows the same flag)."""
    return torch.backends.cudnn.flags(enabled=True, allow_tf32=False)


def pair(input_size, hidden, device, dtype, **kwargs):
    """torch.nn.LSTM in float64 on the CPU (the reference) and custom_ops.LSTM with the same
    weights on `device` in `dtype`, loaded through state_dict as a user would."""
    torch.manual_seed(0)
    reference = torch.nn.LSTM(input_size, hidden, dtype=torch.float64, **kwargs)
    ours = custom_ops.LSTM(input_size, hidden, dtype=torch.float64, **kwargs)
    ours.load_state_dict(reference.state_dict())
    return reference, ours.to(device, dtype)


def random(shape, generator, device="cpu", dtype=torch.float64) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)


def compare_forward_and_backward(reference, ours, x, hx, device, dtype):
    """Runs both modules on x (and hx = (h0, c0) or None), backpropagates the same loss through
    every output, and compares outputs and the gradients of x, h0, c0 and every parameter."""
    x_ref = x.clone().requires_grad_()
    x_ours = x.to(device, dtype).requires_grad_()
    hx_ref = hx_ours = None
    if hx is not None:
        hx_ref = tuple(t.clone().requires_grad_() for t in hx)
        hx_ours = tuple(t.to(device, dtype).requires_grad_() for t in hx)
    y_ref, (h_ref, c_ref) = reference(x_ref, hx_ref)
    y, (h, c) = ours(x_ours, hx_ours)
    tol = TOLERANCES[dtype]
    for got, want in ((y, y_ref), (h, h_ref), (c, c_ref)):
        assert got.dtype == dtype and got.shape == want.shape
        torch.testing.assert_close(got.double().cpu(), want, **tol)

    # Weighted sums so that every output element gets a different gradient.
    def loss(y, h, c):
        w = torch.linspace(-1, 1, y.numel(), dtype=torch.float64).view(y.shape)
        return (y.double() * w.to(y.device)).sum() + h.double().pow(2).sum() + c.double().sum()

    loss(y_ref, h_ref, c_ref).backward()
    loss(y, h, c).backward()
    torch.testing.assert_close(x_ours.grad.double().cpu(), x_ref.grad, **tol)
    if hx is not None:
        for got, want in zip(hx_ours, hx_ref, strict=True):
            torch.testing.assert_close(got.grad.double().cpu(), want.grad, **tol)
    for (name, p_ref), p in zip(reference.named_parameters(), ours.parameters(), strict=True):
        torch.testing.assert_close(p.grad.double().cpu(), p_ref.grad, **tol, msg=name)


# ---- values and gradients against torch.nn.LSTM ------------------------------------------------

SHAPES = [
    pytest.param((1, 1, 1, 1), id="T1-B1-I1-H1"),
    pytest.param((5, 3, 7, 5), id="T5-B3-I7-H5-odd"),
    pytest.param((9, 4, 16, 32), id="T9-B4-I16-H32"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("sizes", SHAPES)
@pytest.mark.parametrize("layers", [1, 2], ids=["1-layer", "2-layers"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["time-first", "batch-first"])
def test_matches_nn_lstm(dtype, sizes, layers, batch_first, device, generator):
    steps, batch, input_size, hidden = sizes
    reference, ours = pair(
        input_size, hidden, device, dtype, num_layers=layers, batch_first=batch_first
    )
    shape = (batch, steps, input_size) if batch_first else (steps, batch, input_size)
    hx = tuple(random((layers, batch, hidden), generator) for _ in range(2))
    with strict_float32():
        compare_forward_and_backward(reference, ours, random(shape, generator), hx, device, dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("sizes", SHAPES[1:])
def test_half_types_match_nn_lstm_on_cuda(dtype, sizes, generator):
    steps, batch, input_size, hidden = sizes
    reference, ours = pair(input_size, hidden, "cuda", dtype, num_layers=2)
    x = random((steps, batch, input_size), generator)
    compare_forward_and_backward(reference, ours, x, None, "cuda", dtype)


def test_no_initial_state_means_zeros(device, generator):
    """hx=None is h0 = c0 = 0, as in torch.nn.LSTM; and bias=False adds no bias."""
    reference, ours = pair(4, 6, device, torch.float64, bias=False)
    compare_forward_and_backward(
        reference, ours, random((5, 2, 4), generator), None, device, torch.float64
    )


def test_unbatched_input(device, generator):
    """A 2-D x (T, I) with h0 and c0 (layers, H), as torch.nn.LSTM takes it."""
    reference, ours = pair(3, 4, device, torch.float64, num_layers=2)
    hx = tuple(random((2, 4), generator) for _ in range(2))
    compare_forward_and_backward(
        reference, ours, random((6, 3), generator), hx, device, torch.float64
    )


def test_unbatched_input_without_a_state(device, generator):
    reference, ours = pair(3, 4, device, torch.float64)
    compare_forward_and_backward(
        reference, ours, random((6, 3), generator), None, device, torch.float64
    )


def test_a_loss_on_y_alone_with_frozen_weights(device, generator):
    """Only x requires grad and only y reaches the loss: the gradients of h_n and c_n arrive as
    zeros, and the weights need none; x's gradient still matches torch.nn.LSTM's."""
    reference, ours = pair(4, 5, device, torch.float64, num_layers=2)
    for p in [*reference.parameters(), *ours.parameters()]:
        p.requires_grad_(False)
    x = random((7, 3, 4), generator)
    x_ref, x_ours = x.clone().requires_grad_(), x.to(device).requires_grad_()
    (grad_ref,) = torch.autograd.grad(reference(x_ref)[0].pow(2).sum(), x_ref)
    (grad_ours,) = torch.autograd.grad(ours(x_ours)[0].pow(2).sum(), x_ours)
    torch.testing.assert_close(grad_ours.cpu(), grad_ref, **TOLERANCES[torch.float64])


def test_an_empty_batch(device, generator):
    """B = 0 with T > 0: empty outputs of the right shapes, and a backward that runs."""
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = layer_inputs(device, requires_grad=True, sizes=(4, 0, 3, 5))
    y, h, c = custom_ops.lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh)
    assert y.shape == (4, 0, 5) and h.shape == c.shape == (0, 5)
    (y.sum() + h.sum() + c.sum()).backward()
    assert w_ih.grad.abs().sum() == 0 and x.grad.shape == x.shape


def test_module_refuses_a_state_with_the_wrong_number_of_layers(generator):
    ours = custom_ops.LSTM(3, 4, num_layers=2)
    state = torch.zeros(1, 2, 4)
    with pytest.raises(
        RuntimeError,
        match=r"h0 must have shape \(num_layers \* num_directions, batch, hidden_size\) = \(2, 2, 4\)",
    ):
        ours(torch.zeros(5, 2, 3), (state, state))


def test_an_empty_sequence_returns_the_initial_state(device, generator):
    """T = 0: no step, y is empty and (h_n, c_n) = (h0, c0); gradients flow to h0 and c0.
    (torch.nn.LSTM refuses T = 0, so this is checked against what it must be.)"""
    x = random((0, 3, 4), generator, device)
    h0, c0 = (random((3, 5), generator, device).requires_grad_() for _ in range(2))
    w_ih, w_hh = random((20, 4), generator, device), random((20, 5), generator, device)
    b = random((20,), generator, device)
    y, h, c = custom_ops.lstm(x, h0, c0, w_ih, w_hh, b, b)
    assert y.shape == (0, 3, 5)
    torch.testing.assert_close(h, h0.detach(), rtol=0, atol=0)
    torch.testing.assert_close(c, c0.detach(), rtol=0, atol=0)
    (h.sum() + 2 * c.sum()).backward()
    torch.testing.assert_close(h0.grad, torch.ones_like(h0), rtol=0, atol=0)
    torch.testing.assert_close(c0.grad, 2 * torch.ones_like(c0), rtol=0, atol=0)


def test_takes_any_strides(device, generator):
    """x as a transposed view, h0 and a weight as slices: the same result as contiguous copies
    (to rounding: the CPU's BLAS may sum in another order for a transposed operand)."""
    x = random((3, 7, 4), generator, device).transpose(0, 1)  # (7, 3, 4), not contiguous
    h0 = random((3, 10), generator, device)[:, ::2]
    c0 = random((3, 5), generator, device)
    w_ih = random((20, 8), generator, device)[:, 1::2]
    w_hh, b = random((20, 5), generator, device), random((20,), generator, device)
    for got, want in zip(
        custom_ops.lstm(x, h0, c0, w_ih, w_hh, b, b),
        custom_ops.lstm(x.contiguous(), h0.contiguous(), c0, w_ih.contiguous(), w_hh, b, b),
        strict=True,
    ):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def layer_inputs(device, dtype=torch.float64, requires_grad=False, sizes=(4, 2, 3, 5), seed=0):
    steps, batch, input_size, hidden = sizes
    g = torch.Generator().manual_seed(seed)
    shapes = [
        (steps, batch, input_size),
        (batch, hidden),
        (batch, hidden),
        (4 * hidden, input_size),
        (4 * hidden, hidden),
        (4 * hidden,),
        (4 * hidden,),
    ]
    return [random(s, g, device, dtype).requires_grad_(requires_grad) for s in shapes]


@pytest.fixture
def paths():
    """paths(persistent=..., step_graphs=...) sets the CUDA paths of custom_ops::lstm for the rest
    of the test (custom_ops.lstm_paths), and they are put back after it."""
    with contextlib.ExitStack() as stack:
        yield lambda **choice: stack.enter_context(custom_ops.lstm_paths(**choice))


# The three ways the CUDA forward and backward can run: one persistent kernel a pass, the step loop
# launched step by step, the step loop replayed from a CUDA graph (from the first call on).
CUDA_PATHS = [
    pytest.param(dict(persistent="always"), id="persistent"),
    pytest.param(dict(persistent="never", step_graphs="never"), id="step-loop"),
    pytest.param(dict(persistent="never", step_graphs="always"), id="step-graph"),
]


def clusters_available() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


# (Without a GPU the tests' cuda mark skips them, with its own reason.)
needs_clusters = pytest.mark.skipif(
    torch.cuda.is_available() and not clusters_available(),
    reason="thread-block clusters need a GPU of compute capability 9.0 or newer (H100)",
)


def test_lstm_paths_refuses_an_unknown_choice_and_changes_nothing():
    before = torch.ops.custom_ops._lstm_paths.default("", "")
    with pytest.raises(
        RuntimeError, match='step_graphs must be "auto", "always" or "never", got "1"'
    ):
        torch.ops.custom_ops._lstm_paths.default("never", "1")
    with pytest.raises(RuntimeError, match='tensor_cores must be "auto", "always" or "never"'):
        torch.ops.custom_ops._lstm_paths.default("never", "never", "yes")
    with pytest.raises(RuntimeError, match='clusters must be "auto", "always" or "never"'):
        torch.ops.custom_ops._lstm_paths.default("never", "never", "never", "on")
    assert torch.ops.custom_ops._lstm_paths.default("", "") == before
    with custom_ops.lstm_paths(persistent="never", tensor_cores="always", clusters="never"):
        assert torch.ops.custom_ops._lstm_paths.default("", "") == [
            "never",
            before[1],
            "always",
            "never",
        ]
    assert torch.ops.custom_ops._lstm_paths.default("", "") == before


def fwd_bwd_results(args, grad_y):
    """custom_ops.lstm's outputs and the gradients of every input, detached."""
    y, h, c = custom_ops.lstm(*args)
    grads = torch.autograd.grad((y, h, c), args, (grad_y, grad_y[-1], grad_y[0]))
    return [t.detach().clone() for t in (y, h, c, *grads)]


@pytest.mark.cuda
@pytest.mark.parametrize("on_side_stream", [False, True], ids=["current-stream", "side-stream"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    ("sizes", "persistent"),
    [
        ((2, 3, 5, 7), "never"),
        ((17, 64, 24, 128), "never"),
        # In float32 at H = 1024, B = 8 only the forward fits the persistent kernel: its output
        # goes to a slot, and the backward's loop is replayed from the slot's graph.
        ((5, 8, 16, 1024), "always"),
    ],
    ids=str,
)
def test_a_step_graph_gives_what_the_step_loop_gives(
    sizes, persistent, dtype, on_side_stream, paths
):
    """The same kernels recorded once and replayed: bit for bit the step loop's results, forward
    and backward, in the call that records the graph and in the calls that replay it, on the
    default stream and on a stream of the caller's."""
    paths(persistent=persistent)
    args = layer_inputs("cuda", dtype, requires_grad=True, sizes=sizes)
    grad_y = random(sizes[:2] + sizes[3:], torch.Generator().manual_seed(2), "cuda", dtype)
    with custom_ops.lstm_paths(step_graphs="never"):
        want = fwd_bwd_results(args, grad_y)
    stream = torch.cuda.Stream() if on_side_stream else torch.cuda.current_stream()
    stream.wait_stream(torch.cuda.current_stream())
    with custom_ops.lstm_paths(step_graphs="always"), torch.cuda.stream(stream):
        runs = [fwd_bwd_results(args, grad_y) for _ in range(3)]
    torch.cuda.current_stream().wait_stream(stream)
    for got in runs:
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=0, atol=0)


@pytest.mark.cuda
def test_a_step_graphs_memory_is_reused_only_once_its_outputs_are_dropped(paths):
    """A call's y is the memory of the slot whose graph wrote it: while y (or a view of it) lives,
    the next call gets another slot, and once it is dropped, the next call takes that slot again;
    the held y keeps its values meanwhile."""
    paths(persistent="never", step_graphs="always")
    args = layer_inputs("cuda", torch.float32, sizes=(6, 64, 8, 32))
    first = custom_ops.lstm(*args)[0]
    kept = first.clone()
    address = first.data_ptr()
    view = first[1:]
    del first
    second = custom_ops.lstm(*layer_inputs("cuda", torch.float32, sizes=(6, 64, 8, 32), seed=1))[0]
    assert second.data_ptr() != address  # the view still holds the first slot
    torch.testing.assert_close(view, kept[1:], rtol=0, atol=0)
    del view, second
    third = custom_ops.lstm(*args)[0]
    assert third.data_ptr() == address  # the first slot, whose outputs are all gone
    torch.testing.assert_close(third, kept, rtol=0, atol=0)


@pytest.mark.cuda
def test_a_step_graph_made_under_inference_mode_serves_only_inference_mode(paths):
    """Under torch.inference_mode a slot's tensors are inference tensors, which may not be written
    in place outside it: a call outside gets a slot of its own, and both give the step loop's
    values."""
    paths(persistent="never")
    args = layer_inputs("cuda", torch.float32, sizes=(4, 64, 8, 32))
    with custom_ops.lstm_paths(step_graphs="never"):
        want = custom_ops.lstm(*args)[0]
    with custom_ops.lstm_paths(step_graphs="always"):
        with torch.inference_mode():
            inferred = custom_ops.lstm(*args)[0].clone()  # its output dropped: the slot is idle
        got = custom_ops.lstm(*args)[0]
    torch.testing.assert_close(inferred, want, rtol=0, atol=0)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.cuda
def test_freeing_an_outputs_storage_leaves_the_step_graphs_memory_alone(paths):
    """untyped_storage().resize_(0) (what activation-offloading code does) frees the caller's
    storage, not the slot's: the next call, which takes the slot again, is right."""
    paths(persistent="never", step_graphs="always")
    args = layer_inputs("cuda", torch.float32, sizes=(4, 64, 8, 32))
    y = custom_ops.lstm(*args)[0]
    want = y.clone()
    y.untyped_storage().resize_(0)
    del y
    torch.testing.assert_close(custom_ops.lstm(*args)[0], want, rtol=0, atol=0)


def test_gradcheck_in_float64(device):
    """Every input: x, h0, c0, both weights and both biases, by finite differences."""
    assert torch.autograd.gradcheck(custom_ops.lstm, layer_inputs(device, requires_grad=True))


def test_opcheck(device):
    """Schema, fake kernel (torch.compile's view), autograd registration, AOT dispatch."""
    opcheck(torch.ops.custom_ops.lstm.default, tuple(layer_inputs(device, requires_grad=True)))


def test_opcheck_of_the_backward(device):
    args = layer_inputs(device)
    y, h, c, gates, cs = torch.ops.custom_ops.lstm.default(*args)
    x, h0, _, w_ih, w_hh, _, _ = args
    grads = (torch.randn_like(y), torch.randn_like(h), torch.randn_like(c))
    opcheck(torch.ops.custom_ops.lstm_backward.default, (*grads, x, h0, w_ih, w_hh, y, gates, cs))


# ---- the module as a drop-in ---------------------------------------------------------------------


def test_a_checkpoint_of_nn_lstm_loads_into_ours_and_back():
    """Same parameter names and shapes: state_dicts move both ways with strict loading."""
    theirs = torch.nn.LSTM(8, 16, num_layers=3, batch_first=True, dropout=0.1)
    ours = custom_ops.LSTM(8, 16, num_layers=3, batch_first=True, dropout=0.1)
    ours.load_state_dict(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


def test_dropout_between_layers_only_in_training(generator):
    """In eval, dropout is off and the two modules agree; in training, ours drops (outputs
    differ from eval's) as torch.nn.LSTM's does."""
    reference, ours = pair(4, 6, "cpu", torch.float64, num_layers=2, dropout=0.5)
    reference.eval()
    ours.eval()
    x = random((5, 2, 4), generator)
    compare_forward_and_backward(reference, ours, x, None, "cpu", torch.float64)
    ours.train()
    assert not torch.equal(ours(x)[0], ours.eval()(x)[0])


# ---- bidirectional, projections, packed sequences ------------------------------------------------
# Every option nn.LSTM has, against nn.LSTM with the same state_dict. A packed batch takes
# custom_ops.lstm_packed, whose steps shrink with the batch; so does a projected one.

LENGTHS = {  # a batch of four: lengths of 1, and a longest 10x the shortest
    "sorted": ([10, 7, 3, 1], True),
    "unsorted": ([3, 10, 1, 7], False),
}


def run_drop_in(module, x, hx, lengths, batch_first):
    """The module on x (padded; packed first when `lengths` is given as (lengths, sorted)), and a
    loss through every output back to x, h0, c0 and the parameters: -> outputs then gradients."""
    x = x.detach().requires_grad_()
    hx = tuple(t.detach().requires_grad_() for t in hx) if hx is not None else None
    inputs = x
    if lengths is not None:
        inputs = torch.nn.utils.rnn.pack_padded_sequence(
            x, torch.tensor(lengths[0]), batch_first=batch_first, enforce_sorted=lengths[1]
        )
    y, (h_n, c_n) = module(inputs, hx)
    if lengths is not None:
        assert isinstance(y, torch.nn.utils.rnn.PackedSequence)
        assert torch.equal(y.batch_sizes, inputs.batch_sizes)
        for ours, theirs in ((y.sorted_indices, inputs.sorted_indices),
                             (y.unsorted_indices, inputs.unsorted_indices)):  # fmt: skip
            assert (ours is None and theirs is None) or torch.equal(ours, theirs)
        y = y.data
    w = torch.linspace(-1, 1, y.numel(), dtype=torch.float64, device=y.device).view(y.shape)
    ((y.double() * w).sum() + h_n.double().pow(2).sum() + c_n.double().sum()).backward()
    grads = [x.grad] + ([t.grad for t in hx] if hx is not None else [])
    return [y, h_n, c_n] + grads + [p.grad for p in module.parameters()]


def compare_drop_in(device, dtype, layers, bidirectional, proj_size, batch_first, packing, given):
    input_size, hidden, batch, steps = 3, 5, 4, 10
    options = dict(num_layers=layers, bidirectional=bidirectional, proj_size=proj_size,
                   batch_first=batch_first)  # fmt: skip
    reference, ours = pair(input_size, hidden, device, dtype, **options)
    g = torch.Generator().manual_seed(1)
    shape = (batch, steps, input_size) if batch_first else (steps, batch, input_size)
    x = random(shape, g)
    states = layers * (2 if bidirectional else 1)
    hx = None
    if given:
        hx = (random((states, batch, proj_size or hidden), g), random((states, batch, hidden), g))
    lengths = LENGTHS.get(packing)
    want = run_drop_in(reference, x, hx, lengths, batch_first)
    with strict_float32():
        got = run_drop_in(
            ours, x.to(device, dtype), tuple(t.to(device, dtype) for t in hx) if hx else None,
            lengths, batch_first,
        )  # fmt: skip
    names = ["y", "h_n", "c_n", "grad x"] + (["grad h0", "grad c0"] if given else [])
    names += [f"grad {n}" for n, _ in reference.named_parameters()]
    assert len(got) == len(want) == len(names)
    for name, a, b in zip(names, got, want, strict=True):
        assert a.dtype == dtype and a.shape == b.shape, name
        torch.testing.assert_close(a.double().cpu(), b, **TOLERANCES[dtype], msg=name)


CONFIGURATIONS = pytest.mark.parametrize(
    ("layers", "bidirectional", "proj_size", "batch_first", "packing", "given"),
    [
        pytest.param(
            *c,
            id="-".join(
                [
                    f"{c[0]}-layer",
                    "bi" if c[1] else "uni",
                    f"proj{c[2]}",
                    "batch-first" if c[3] else "time-first",
                    c[4],
                    "h0" if c[5] else "no-h0",
                ]
            ),
        )
        for c in itertools.product(
            [1, 2],
            [False, True],
            [0, 2],
            [False, True],
            ["tensor", "sorted", "unsorted"],
            [False, True],
        )
    ],
)


@CONFIGURATIONS
def test_every_configuration_matches_nn_lstm_in_float64(
    layers, bidirectional, proj_size, batch_first, packing, given
):
    """{1, 2 layers} x {one or two directions} x {projected or not} x {batch_first or not} x
    {a tensor, a PackedSequence sorted or not} x {h0 and c0 given or not}, on the CPU: outputs
    and the gradients of x, h0, c0 and every parameter, to 1e-10."""
    compare_drop_in(
        "cpu", torch.float64, layers, bidirectional, proj_size, batch_first, packing, given
    )


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@CONFIGURATIONS
def test_every_configuration_matches_nn_lstm_on_cuda(
    dtype, layers, bidirectional, proj_size, batch_first, packing, given
):
    """The same on the GPU in float32 (TF32 off) and bfloat16, against nn.LSTM in float64."""
    compare_drop_in("cuda", dtype, layers, bidirectional, proj_size, batch_first, packing, given)


@pytest.mark.parametrize(
    "options", [dict(bidirectional=True), dict(proj_size=3), dict(bidirectional=True, proj_size=3)]
)
def test_bidirectional_and_projected_checkpoints_load_both_ways(options):
    theirs = torch.nn.LSTM(4, 6, num_layers=2, **options)
    ours = custom_ops.LSTM(4, 6, num_layers=2, **options)
    ours.load_state_dict(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(num_layers=2, bidirectional=True, proj_size=3, batch_first=True, dropout=0.5),
        dict(bias=False),
    ],
)
def test_reads_like_nn_lstm(options):
    """The attributes training code reads from an nn.LSTM, and its printed form."""
    theirs = torch.nn.LSTM(4, 6, **options)
    ours = custom_ops.LSTM(4, 6, **options)
    assert repr(ours).replace("LSTM", "X", 1) == repr(theirs).replace("LSTM", "X", 1)
    assert ours._flat_weights_names == theirs._flat_weights_names
    assert ours._all_weights == theirs._all_weights
    assert [[p.shape for p in ps] for ps in ours.all_weights] == [
        [p.shape for p in ps] for ps in theirs.all_weights
    ]
    for name in ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                 "bidirectional", "proj_size"):  # fmt: skip
        assert getattr(ours, name) == getattr(theirs, name), name
    ours.flatten_parameters()  # training scripts call it: a no-op here


def test_unbatched_input_with_both_directions_and_a_projection(generator):
    reference, ours = pair(3, 5, "cpu", torch.float64, bidirectional=True, proj_size=2)
    x = random((6, 3), generator)
    hx = (random((2, 2), generator), random((2, 5), generator))
    (y_ref, (h_ref, c_ref)), (y, (h, c)) = reference(x, hx), ours(x, hx)
    for got, want in ((y, y_ref), (h, h_ref), (c, c_ref)):
        torch.testing.assert_close(got, want, **TOLERANCES[torch.float64])


@pytest.mark.parametrize(
    ("options", "state", "message"),
    [
        pytest.param(dict(bidirectional=True), "h0", r"h0 must have shape .* = \(2, 3, 6\)",
                     id="bidirectional-h0-of-one-direction"),
        pytest.param(dict(proj_size=2), "h0", r"h0 must have shape .*proj_size\) = \(1, 3, 2\)",
                     id="projected-h0-of-hidden-size"),
        pytest.param(dict(proj_size=2), "c0", r"c0 must have shape .*hidden_size\) = \(1, 3, 6\)",
                     id="projected-c0-of-proj-size"),
    ],
)  # fmt: skip
def test_module_names_a_state_of_the_wrong_size(options, state, message, generator):
    lstm = custom_ops.LSTM(4, 6, **options)
    directions = 2 if lstm.bidirectional else 1
    h0 = torch.zeros(1, 3, 6)  # one direction's h of hidden_size: wrong for every case above
    c0 = torch.zeros(directions, 3, 6)
    if state == "c0":
        h0, c0 = torch.zeros(directions, 3, 2), torch.zeros(directions, 3, 2)
    with pytest.raises(RuntimeError, match=message):
        lstm(torch.randn(5, 3, 4), (h0, c0))


@pytest.mark.parametrize(
    ("proj_size", "message"), [(-1, "proj_size must be 0"), (6, "hidden_size - 1 = 5")]
)
def test_module_refuses_a_projection_not_smaller_than_hidden(proj_size, message):
    with pytest.raises(ValueError, match=message):
        custom_ops.LSTM(4, 6, proj_size=proj_size)


def packed_inputs(device, dtype=torch.float64, requires_grad=False, projected=True, seed=0):
    """lstm_packed's arguments for a batch of three sequences of lengths 4, 2, 1 (x of 7 rows),
    hidden 5, with a projection to 3."""
    g = torch.Generator().manual_seed(seed)
    hidden, out, features = 5, 3 if projected else 5, 2
    batch_sizes = torch.tensor([3, 2, 1, 1])
    shapes = [(7, features), (3, out), (3, hidden), (4 * hidden, features), (4 * hidden, out),
              (4 * hidden,), (4 * hidden,)]  # fmt: skip
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = (
        random(s, g, device, dtype).requires_grad_(requires_grad) for s in shapes
    )
    w_hr = (
        random((out, hidden), g, device, dtype).requires_grad_(requires_grad) if projected else None
    )
    return x, batch_sizes, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("projected", [False, True], ids=["plain", "projected"])
def test_lstm_packed_gradcheck_in_float64(device, reverse, projected):
    args = packed_inputs(device, requires_grad=True, projected=projected)
    assert torch.autograd.gradcheck(lambda *a: custom_ops.lstm_packed(*a, reverse=reverse), args)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("projected", [False, True], ids=["plain", "projected"])
def test_lstm_packed_opcheck(device, reverse, projected):
    args = packed_inputs(device, requires_grad=True, projected=projected)
    opcheck(torch.ops.custom_ops.lstm_packed.default, (*args, reverse))


@pytest.mark.parametrize("projected", [False, True], ids=["plain", "projected"])
def test_lstm_packed_opcheck_of_the_backward(device, projected):
    args = packed_inputs(device, projected=projected)
    x, batch_sizes, h0, c0, w_ih, w_hh, _, _, w_hr = args
    y, h, c, *saved = torch.ops.custom_ops.lstm_packed.default(*args, True)
    g = torch.Generator().manual_seed(1)
    grads = tuple(random(t.shape, g, device) for t in (y, h, c))
    opcheck(
        torch.ops.custom_ops.lstm_packed_backward.default,
        (*grads, x, batch_sizes, h0, c0, w_ih, w_hh, w_hr, True, *saved),
    )


def packed_batch(lengths, features, hidden, out, dtype, seed=0):
    """lstm_packed's arguments on the GPU, every tensor requiring its gradient, for sequences of
    these lengths (longest first); projected to `out` features when out < hidden."""
    g = torch.Generator().manual_seed(seed)
    batch_sizes = torch.tensor([sum(n > t for n in lengths) for t in range(lengths[0])])
    rows, batch = int(batch_sizes.sum()), len(lengths)
    shapes = [(rows, features), (batch, out), (batch, hidden), (4 * hidden, features),
              (4 * hidden, out), (4 * hidden,), (4 * hidden,)]  # fmt: skip
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = (
        random(s, g, "cuda", dtype).requires_grad_() for s in shapes
    )
    w_hr = random((out, hidden), g, "cuda", dtype).requires_grad_() if out < hidden else None
    return [x, batch_sizes, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr]


def packed_fwd_bwd_results(args, reverse, grad_y):
    """custom_ops.lstm_packed's outputs and the gradients of every input, detached."""
    y, h, c = custom_ops.lstm_packed(*args, reverse=reverse)
    inputs = [a for a in args if a is not None and a.is_floating_point()]
    grads = torch.autograd.grad(
        (y, h, c), inputs, (grad_y, torch.ones_like(h), -torch.ones_like(c))
    )
    return [t.detach().clone() for t in (y, h, c, *grads)]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize(
    ("lengths", "out"),
    [([9] * 16, 24), ([9, 9, 7, 4, 4, 1], 24), ([9, 9, 7, 4, 4, 1], 64)],
    ids=["padded-projected", "packed-projected", "packed"],
)
def test_a_packed_step_graph_gives_what_the_step_loop_gives(lengths, out, reverse, dtype):
    """lstm_packed's loops recorded once and replayed: bit for bit the launched loops' results,
    forward and backward, in the recording call and the replays."""
    args = packed_batch(lengths, features=12, hidden=64, out=out, dtype=dtype)
    grad_y = random((args[0].shape[0], out), torch.Generator().manual_seed(2), "cuda", dtype)
    with custom_ops.lstm_paths(step_graphs="never"):
        want = packed_fwd_bwd_results(args, reverse, grad_y)
    with custom_ops.lstm_paths(step_graphs="always"):
        runs = [packed_fwd_bwd_results(args, reverse, grad_y) for _ in range(3)]
    for got in runs:
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=0, atol=0)


def host_launches(call) -> tuple[int, int]:
    """(kernel launches, graph launches) the host issues in call(), counted from the CUDA runtime
    and driver calls the profiler records (cuBLAS launches through the driver)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
        call()
        torch.cuda.synchronize()
    names = [event.name for event in trace.events()]
    return sum("LaunchKernel" in n for n in names), names.count("cudaGraphLaunch")


@pytest.mark.cuda
@pytest.mark.parametrize("op", ["lstm", "lstm_packed"])
def test_step_graphs_replace_the_launches_of_the_step_loop(op, paths):
    """That the graph is what runs, not only that it would give the same values: with step graphs
    a call issues one graph launch and a handful of kernels, whatever T; without, at least a
    kernel per step (and a cuBLAS product)."""
    paths(persistent="never")
    steps = 64
    if op == "lstm":
        args = layer_inputs("cuda", torch.float32, sizes=(steps, 16, 8, 32))
        call = lambda: custom_ops.lstm(*args)  # noqa: E731
    else:
        args = packed_batch([steps] * 16, features=8, hidden=32, out=16, dtype=torch.float32)
        call = lambda: custom_ops.lstm_packed(*args, reverse=False)  # noqa: E731
    with torch.no_grad():
        with custom_ops.lstm_paths(step_graphs="never"):
            kernels, graphs = host_launches(call)
        assert graphs == 0 and kernels >= steps, (kernels, graphs)
        with custom_ops.lstm_paths(step_graphs="always"):
            call()  # records the graph
            kernels, graphs = host_launches(call)
        assert graphs == 1 and kernels < steps // 4, (kernels, graphs)


def bad_packed_calls():
    def call(**change):
        names = ["x", "batch_sizes", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh", "w_hr"]
        return lambda device: (dict(zip(names, packed_inputs(device), strict=True)) | {
            k: v(device) if callable(v) else v for k, v in change.items()})  # fmt: skip

    cases = [
        (
            call(batch_sizes=torch.tensor([3, 2, 1, 1], dtype=torch.int32)),
            "batch_sizes must be a 1-D int64 tensor",
            "batch-sizes-int32",
        ),
        (
            call(batch_sizes=torch.tensor([3, 1, 2, 1])),
            r"batch_sizes must never grow .* batch_sizes\[2\] = 2 after 1",
            "batch-sizes-growing",
        ),
        (
            call(batch_sizes=torch.tensor([2, 2, 2, 1])),
            r"batch_sizes\[0\] must equal the batch size of h0 \(3\)",
            "batch-sizes-vs-h0",
        ),
        (
            call(batch_sizes=torch.tensor([3, 2, 1])),
            "batch_sizes add up to 6 rows but x has 7",
            "batch-sizes-vs-x",
        ),
        (
            call(w_hr=lambda d: torch.zeros(3, 4, device=d, dtype=torch.float64)),
            r"w_hr must have shape \[proj_size, 5\]",
            "w-hr-of-the-wrong-width",
        ),
        (
            call(h0=lambda d: torch.zeros(3, 5, device=d, dtype=torch.float64)),
            r"h0 must have shape \[batch, 3\], got \[3, 5\]",
            "h0-of-hidden-size",
        ),
        (
            call(w_hr=lambda d: torch.zeros(5, 5, device=d, dtype=torch.float64)),
            r"proj_size \(w_hr's rows\) must be between 1 and hidden - 1 = 4, got 5",
            "proj-size-not-below-hidden",
        ),
        (
            call(c0=lambda d: torch.zeros(3, 3, device=d, dtype=torch.float64)),
            r"c0 must have shape \[3, 5\]",
            "c0-of-proj-size",
        ),
    ]
    return [pytest.param(c, m, id=i) for c, m, i in cases]


@pytest.mark.parametrize(("call", "message"), bad_packed_calls())
def test_lstm_packed_rejects_bad_input(call, message, device):
    with pytest.raises(RuntimeError, match=f"lstm_packed: ({message})"):
        torch.ops.custom_ops.lstm_packed.default(*call(device).values(), False)


@pytest.mark.cuda
def test_a_packed_sequence_of_a_cuda_batch_needs_its_batch_sizes_on_the_cpu():
    """PackedSequence.to("cuda") moves the data and leaves batch_sizes on the CPU, where the op
    reads it; one built by hand with batch_sizes on the GPU gets an error naming batch_sizes."""
    args = packed_inputs("cuda")
    with pytest.raises(RuntimeError, match=r"lstm_packed: batch_sizes must be .* on the CPU"):
        torch.ops.custom_ops.lstm_packed.default(args[0], args[1].cuda(), *args[2:], False)


# ---- PyTorch's machinery: compile, autocast, CUDA graphs, TF32 ----------------------------------


MODEL_OPTIONS = [
    pytest.param(dict(), id="plain"),
    pytest.param(dict(bidirectional=True, proj_size=3), id="bidirectional-projected"),
]


@pytest.mark.parametrize("options", MODEL_OPTIONS)
def test_compiles_with_fullgraph_and_matches_eager(device, generator, options):
    """torch.compile traces the ops through their fake kernels, in one graph, forward and
    backward."""
    torch._dynamo.reset()
    lstm = custom_ops.LSTM(8, 6, num_layers=2, **options)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), lstm)
    model = model.to(device, torch.float64)
    x = random((5, 3, 4), generator, device)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")

    def run(m):
        y, (h, c) = m(x)
        (y.sum() + h.sum() + c.sum()).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        return y, grads

    y_eager, grads_eager = run(model)
    y_compiled, grads_compiled = run(compiled)
    torch.testing.assert_close(y_compiled, y_eager)
    torch.testing.assert_close(grads_compiled, grads_eager)


def test_a_packed_batch_compiles_with_fullgraph(generator):
    """A PackedSequence in and out of a compiled bidirectional, projected LSTM: one graph."""
    torch._dynamo.reset()
    lstm = custom_ops.LSTM(4, 6, bidirectional=True, proj_size=3, dtype=torch.float64)
    x = random((5, 3, 4), generator)
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        x, torch.tensor([2, 5, 1]), enforce_sorted=False
    )
    compiled = torch.compile(lstm, fullgraph=True, backend="aot_eager")
    (y, (h, c)), (y_eager, (h_eager, c_eager)) = compiled(packed), lstm(packed)
    torch.testing.assert_close(y.data, y_eager.data)
    torch.testing.assert_close((h, c), (h_eager, c_eager))


AUTOCAST_CASES = [
    pytest.param("cpu", torch.bfloat16, id="cpu-bfloat16"),
    pytest.param("cuda", torch.bfloat16, id="cuda-bfloat16", marks=pytest.mark.cuda),
    pytest.param("cuda", torch.float16, id="cuda-float16", marks=pytest.mark.cuda),
]


@pytest.mark.parametrize("options", MODEL_OPTIONS)
@pytest.mark.parametrize(("device_type", "dtype"), AUTOCAST_CASES)
def test_under_autocast_runs_in_autocasts_dtype(device_type, dtype, generator, options):
    """Float32 parameters and input; inside autocast ours computes in autocast's dtype, and its
    float32 parameters get float32 gradients. The reference is nn.LSTM in float32 on input and
    weights rounded to that dtype, which is what autocast feeds the op. (nn.LSTM itself under
    autocast is no portable reference: on a CPU without bfloat16 instructions oneDNN refuses it,
    and on CUDA cuDNN runs float16 when bfloat16 is asked, torch 2.11.)"""
    torch.manual_seed(0)
    theirs = torch.nn.LSTM(4, 8, **options).to(device_type)
    ours = custom_ops.LSTM(4, 8, **options).to(device_type)
    ours.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(p.to(dtype))
    x = random((6, 3, 4), generator, device_type, torch.float32)
    y_theirs, _ = theirs(x.to(dtype).float())
    with torch.autocast(device_type, dtype=dtype):
        y_ours, _ = ours(x)
    assert y_ours.dtype == dtype
    torch.testing.assert_close(y_ours.float(), y_theirs, **TOLERANCES[dtype])
    y_ours.float().sum().backward()
    assert ours.weight_ih_l0.grad.dtype == torch.float32


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_under_cuda_autocast_nn_lstm_runs_float16_and_ours_the_dtype_asked(dtype):
    """What the benchmark's autocast rows compare (benchmark_lstm.py, Part 2): autocast's list puts
    the cuDNN RNN in float16, so nn.LSTM answers in float16 even when bfloat16 is asked (torch
    2.11); ours computes in the dtype asked. A mixed-precision user who swaps one for the other
    changes the precision of the layer when autocast asks for bfloat16."""
    torch.manual_seed(0)
    theirs, ours = torch.nn.LSTM(8, 16).cuda(), custom_ops.LSTM(8, 16).cuda()
    x = torch.randn(5, 3, 8, device="cuda")
    with torch.autocast("cuda", dtype=dtype):
        assert theirs(x)[0].dtype == torch.float16
        assert ours(x)[0].dtype == dtype


@pytest.mark.cuda
@pytest.mark.parametrize(
    "path, dtype",
    [pytest.param(p.values[0], torch.float32, id=p.id) for p in CUDA_PATHS]
    + [
        pytest.param(
            dict(tensor_cores="always", clusters="always"),
            torch.float16,
            id="cluster",
            marks=needs_clusters,
        )
    ],
)
def test_forward_can_be_captured_in_a_cuda_graph(path, dtype, generator, paths):
    """No synchronisation, no host-side allocation outside PyTorch's allocator: the forward
    records into a CUDA graph (a cooperative launch and a cluster launch too), and a replay on new
    data gives what an eager call gives. With step graphs, the warm-up makes the op's own graph,
    and under the caller's capture the op records its step loop into the caller's graph instead."""
    paths(**path)
    sizes = (8, 4, 16, 32) if dtype == torch.float32 else (6, 8, 16, 256)
    args = layer_inputs("cuda", dtype, sizes=sizes)
    static = [a.clone() for a in args]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        custom_ops.lstm(*static)  # warm-up outside the capture (cuBLAS's workspace, etc.)
    torch.cuda.current_stream().wait_stream(stream)
    if "clusters" in path:
        assert tc_forward_ran(lambda: custom_ops.lstm(*static), "cluster")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = custom_ops.lstm(*static)
    new = layer_inputs("cuda", dtype, sizes=sizes, seed=1)
    for s, n in zip(static, new, strict=True):
        s.copy_(n)
    graph.replay()
    for got, want in zip(out, custom_ops.lstm(*new), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("packing", ["tensor", "unsorted"])
@pytest.mark.parametrize("proj_size", [0, 3], ids=["plain", "projected"])
def test_directions_on_two_streams_give_what_one_stream_gives(packing, proj_size, generator):
    """The second direction on a side stream: the same outputs and gradients as one after the
    other, so the streams are joined where they must be, forward and backward."""
    torch.manual_seed(0)
    lstm = custom_ops.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=proj_size).cuda()
    x = random((10, 4, 4), generator, "cuda", torch.float32)
    lengths = LENGTHS.get(packing)
    results = []
    for concurrent in (True, False):
        lstm.concurrent_directions = concurrent
        lstm.zero_grad()
        results.append(run_drop_in(lstm, x, None, lengths, batch_first=False))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.cuda
def test_a_bidirectional_model_can_be_captured_in_a_cuda_graph(generator):
    """While a graph is captured the two directions run on the capturing stream, one after the
    other; the replay gives what an eager call gives."""
    torch.manual_seed(0)
    lstm = custom_ops.LSTM(16, 32, bidirectional=True).cuda()
    static = random((8, 4, 16), generator, "cuda", torch.float32)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        lstm(static)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        y, (h, c) = lstm(static)
    new = random((8, 4, 16), torch.Generator().manual_seed(1), "cuda", torch.float32)
    static.copy_(new)
    graph.replay()
    with torch.no_grad():
        y_eager, (h_eager, c_eager) = lstm(new)
    torch.testing.assert_close((y, h, c), (y_eager, h_eager, c_eager), rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_lstm_packed_can_be_captured_in_a_cuda_graph(reverse):
    """The packed op's forward and backward record into a CUDA graph: batch_sizes is read on
    the host when the graph is recorded, and every copy stays on the device."""
    args = [a.float() if a.is_floating_point() else a for a in packed_inputs("cuda")]
    static = [a.clone().requires_grad_(a.is_floating_point()) for a in args]

    def step():
        y, h, c = custom_ops.lstm_packed(*static, reverse=reverse)
        grads = torch.autograd.grad((y.sum() + h.sum() + c.sum()), [static[0], static[4]])
        return (y, h, c, *grads)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up outside the capture (cuBLAS's workspace, etc.)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    new = [a.float() if a.is_floating_point() else a for a in packed_inputs("cuda", seed=1)]
    with torch.no_grad():
        for s, n in zip(static, new, strict=True):
            s.copy_(n)
    graph.replay()
    for got, want in zip(out, step(), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.cuda
def test_float32_uses_tf32_exactly_when_cudnns_rnn_flag_allows(generator, paths):
    """The flag torch.nn.LSTM obeys on CUDA (torch.backends.cudnn's allow_tf32, "tf32" for RNNs
    by default) decides for ours too: with it off, float32 agrees with float64 to ~1e-6; with it
    on, TF32's 10-bit mantissa shows (errors near 1e-3). The step loop's cuBLAS products only:
    the persistent kernel multiplies on CUDA cores, in full float32 either way."""
    paths(persistent="never")
    args64 = layer_inputs("cuda", torch.float64, sizes=(16, 8, 256, 256))
    for w in args64[3:5]:  # nn.LSTM's scale, 1/sqrt(H): with unit weights the gates saturate
        w /= 16  # and the recurrence amplifies any rounding to O(1) within a few steps
    want = custom_ops.lstm(*args64)[0]
    args32 = [a.float() for a in args64]
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        strict = (custom_ops.lstm(*args32)[0].double() - want).abs().max().item()
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
        tf32 = (custom_ops.lstm(*args32)[0].double() - want).abs().max().item()
    assert strict < 1e-5 < tf32, (strict, tf32)


# ---- the persistent kernel (lstm_persistent.cu) and the step loop, each against nn.LSTM ----------

# "0": always the step loop; "1": persistent wherever it fits; unset: where it is faster
PATHS = [pytest.param("always", id="persistent"), pytest.param("never", id="step-loop")]

# Sizes that reach every edge of the persistent kernel's work split on a 132-SM H100: one unit per
# block (H <= 132), two with a short last block (H = 263), batch tiles of 8 full and partial
# (B = 3, 9), one step and many, and I != H.
PERSISTENT_SHAPES = [
    pytest.param((1, 1, 3, 5), id="T1-B1-H5"),
    pytest.param((7, 3, 16, 33), id="T7-B3-H33"),
    pytest.param((6, 9, 20, 263), id="T6-B9-H263"),
    pytest.param((5, 16, 64, 512), id="T5-B16-H512"),
]


def kernels_run(fn) -> set[str]:
    """The names of the CUDA kernels fn() launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}


@pytest.mark.cuda
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("sizes", PERSISTENT_SHAPES)
def test_both_cuda_paths_match_nn_lstm(path, dtype, sizes, generator, paths):
    paths(persistent=path)
    steps, batch, input_size, hidden = sizes
    reference, ours = pair(input_size, hidden, "cuda", dtype)
    x = random((steps, batch, input_size), generator)
    hx = tuple(random((1, batch, hidden), generator) for _ in range(2))
    with strict_float32():
        compare_forward_and_backward(reference, ours, x, hx, "cuda", dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("path", PATHS)
def test_the_setting_picks_the_path(path, paths):
    """At B = 4 the forward and the backward each run as one persistent kernel ("always"), or as
    one fused step kernel per step ("never"); never both."""
    paths(persistent=path)
    args = layer_inputs("cuda", torch.float32, requires_grad=True, sizes=(16, 4, 32, 64))

    def fwd_bwd():
        y, h, c = custom_ops.lstm(*args)
        (y.sum() + h.sum() + c.sum()).backward()

    names = kernels_run(fwd_bwd)
    persistent = {n for n in names if "persistent" in n}
    steps = {n for n in names if "lstm_step" in n}
    if path == "always":
        assert len(persistent) == 2 and not steps, names
    else:
        assert not persistent and len(steps) == 2, names


@pytest.mark.cuda
@pytest.mark.parametrize(
    "batch, hidden, dtype, forward",
    [
        (4, 64, torch.float32, "CUDA cores"),
        (200, 64, torch.float32, "CUDA cores"),  # B x H = 12800 <= 16384
        (300, 64, torch.float32, "step loop"),  # 19200
        (64, 64, torch.bfloat16, "CUDA cores"),  # H % 128 != 0; B x H = 4096 <= 8192
        (200, 64, torch.bfloat16, "step loop"),  # 12800 > 8192: the loop has tensor cores
        (8, 1024, torch.bfloat16, "tensor cores"),  # B x H = 8192 <= 16384
        (16, 1024, torch.float16, "tensor cores"),  # 16384
        (32, 1024, torch.float16, "step loop"),  # 32768
        (8, 512, torch.float16, "clusters"),  # H <= 512 and B <= 8 on an H100
        (16, 256, torch.float16, "clusters"),  # B <= 16 at H <= 256
        (16, 512, torch.float16, "tensor cores"),  # B > 8 at H = 512: the grid variant
        (32, 512, torch.float16, "tensor cores"),  # B <= 32, 16384
        (64, 256, torch.float16, "step loop"),  # B > 32
    ],
    ids=str,
)
def test_by_default_the_forward_runs_the_kernel_measured_fastest(
    batch, hidden, dtype, forward, paths
):
    """With the paths at "auto", the forward picks its kernel by lstm_persistent_tc.cu's tc_wanted
    and lstm_persistent.cu's persistent_wanted, whose limits benchmarks/lstm_tc_forward.py and
    benchmark_lstm.py --persistent-sweep measured."""
    paths(persistent="auto", tensor_cores="auto", clusters="auto")
    if forward == "clusters" and not clusters_available():
        forward = "tensor cores"
    args = layer_inputs("cuda", dtype, sizes=(3, batch, 16, hidden))
    names = kernels_run(lambda: custom_ops.lstm(*args))
    ran = {
        "tensor cores": any("lstm_forward_persistent_tc" in n for n in names),
        "clusters": any("lstm_forward_cluster_tc" in n for n in names),
        "CUDA cores": any("lstm_forward_persistent_kernel" in n for n in names),
        "step loop": any("lstm_step_forward" in n for n in names),
    }
    assert ran == {kernel: kernel == forward for kernel in ran}, names


@pytest.mark.cuda
def test_persistent_float32_is_full_float32_with_tf32_allowed(paths):
    """The recurrent products on CUDA cores in float32: TF32's rounding never shows in them,
    whatever the flag says. (x = 0, so that the input projection, a cuBLAS product that does
    follow the flag, is exactly zero either way.)"""
    paths(persistent="always")
    args64 = layer_inputs("cuda", torch.float64, sizes=(16, 8, 256, 256))
    args64[0].zero_()
    for w in args64[3:5]:
        w /= 16
    want = custom_ops.lstm(*args64)[0]
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
        got = custom_ops.lstm(*[a.float() for a in args64])[0]
    assert (got.double() - want).abs().max().item() < 1e-5


@pytest.mark.cuda
def test_too_large_for_the_persistent_kernel_falls_back_to_the_step_loop(paths):
    """H = 2048 in float32: a block's rows of W_hh alone would need 512 KB of shared memory."""
    paths(persistent="always")
    args = layer_inputs("cuda", torch.float32, sizes=(2, 1, 8, 2048))
    names = kernels_run(lambda: custom_ops.lstm(*args))
    assert not any("persistent" in n for n in names) and any("lstm_step" in n for n in names)


# ---- the tensor-core forward (lstm_persistent_tc.cu) ----------------------------------------------

# Every edge of its split: H = 128 (one k-tile a warp) to 1024 (eight, 128 blocks); B = 1, odd, a
# full batch tile, 33 (a partial fifth tile) and 64 (two groups of four tiles, two (unit, batch)
# pairs a thread); T = 1 (no wait) and more; I != H.
TC_SHAPES = [
    pytest.param((1, 1, 16, 128), id="T1-B1-H128"),
    pytest.param((7, 7, 32, 256), id="T7-B7-H256"),
    pytest.param((5, 8, 64, 512), id="T5-B8-H512"),
    pytest.param((2, 33, 40, 768), id="T2-B33-H768"),
    pytest.param((3, 64, 24, 1024), id="T3-B64-H1024"),
]


# The cluster variant's edges: 16 blocks of 8, 16 and 32 units (H = 128, 256, 512), 12 blocks
# (H = 384); B = 1, odd, 15 (a partial second batch tile), 16, 32 (four tiles, two (unit, batch)
# pairs a thread at 32 units); T = 1 (no exchange) and more.
CLUSTER_SHAPES = [
    pytest.param((1, 1, 16, 128), id="T1-B1-H128"),
    pytest.param((7, 7, 32, 256), id="T7-B7-H256"),
    pytest.param((5, 8, 64, 512), id="T5-B8-H512"),
    pytest.param((4, 15, 40, 512), id="T4-B15-H512"),
    pytest.param((3, 32, 24, 384), id="T3-B32-H384"),
    pytest.param((2, 32, 8, 256), id="T2-B32-H256"),
]

# The tensor-core forward's two variants, forced: every block a block of the grid, h_t through L2
# and a counter; or one thread-block cluster, h_t through distributed shared memory (H <= 512,
# B <= 32, H100 and newer). Each is found in the profile by its kernel's name.
TC_VARIANTS = {
    "grid": (dict(tensor_cores="always", clusters="never"), "lstm_forward_persistent_tc"),
    "cluster": (dict(tensor_cores="always", clusters="always"), "lstm_forward_cluster_tc"),
}


def tc_forward_ran(fn, variant: str = "grid") -> bool:
    return any(TC_VARIANTS[variant][1] in name for name in kernels_run(fn))


TC_CASES = [pytest.param("grid", shape.values[0], id=f"grid-{shape.id}") for shape in TC_SHAPES] + [
    pytest.param("cluster", shape.values[0], id=f"cluster-{shape.id}", marks=needs_clusters)
    for shape in CLUSTER_SHAPES
]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("variant, sizes", TC_CASES)
def test_tensor_core_forward_matches_nn_lstm(dtype, variant, sizes, generator, paths):
    paths(**TC_VARIANTS[variant][0])
    steps, batch, input_size, hidden = sizes
    reference, ours = pair(input_size, hidden, "cuda", dtype)
    x = random((steps, batch, input_size), generator)
    hx = tuple(random((1, batch, hidden), generator) for _ in range(2))
    assert tc_forward_ran(lambda: ours(x.to("cuda", dtype)), variant)
    compare_forward_and_backward(reference, ours, x, hx, "cuda", dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "variant", ["grid", pytest.param("cluster", marks=needs_clusters)], ids=str
)
def test_tensor_core_forward_gives_what_the_step_loop_gives(dtype, variant, generator, paths):
    """Both multiply in the same dtype and add in float32, in another order: y, h_n, c_n and the
    saved gates agree to a few units of the dtype's rounding, far inside nn.LSTM's tolerance."""
    args = layer_inputs("cuda", dtype, sizes=(16, 24, 256, 512))
    for w in args[3:5]:
        w /= 16  # nn.LSTM's scale (1 / sqrt(H)): gates that are not all saturated
    paths(persistent="never", tensor_cores="never")
    loop = torch.ops.custom_ops.lstm.default(*args)
    paths(**TC_VARIANTS[variant][0])
    assert tc_forward_ran(lambda: torch.ops.custom_ops.lstm.default(*args), variant)
    tc = torch.ops.custom_ops.lstm.default(*args)
    eps = torch.finfo(dtype).eps
    for got, want in zip(tc, loop, strict=True):
        torch.testing.assert_close(got.float(), want.float(), rtol=4 * eps, atol=4 * eps)


@pytest.mark.cuda
@pytest.mark.parametrize(
    "variant, hidden",
    [("grid", 1024), pytest.param("cluster", 512, marks=needs_clusters)],
    ids=["grid-H1024", "cluster-H512"],
)
def test_tensor_core_forward_is_deterministic_and_holds_over_a_long_sequence(
    variant, hidden, paths
):
    """T = 1000: every run gives the same bits (the warps' sums are added in a fixed order, so a
    difference would be a read of h before it was written, or of a buffer being overwritten), and
    y[-1] and c_n stay as close to float64 as the step loop's."""
    sizes = (1000, 8, 64, hidden)
    args = layer_inputs("cuda", torch.float64, sizes=sizes, seed=1)
    for w in args[3:5]:
        w /= hidden**0.5
    want = torch.ops.custom_ops.lstm.default(*args)
    half = [a.half() for a in args]
    paths(**TC_VARIANTS[variant][0])
    assert tc_forward_ran(lambda: torch.ops.custom_ops.lstm.default(*half), variant)
    runs = [torch.ops.custom_ops.lstm.default(*half) for _ in range(20)]
    for run in runs[1:]:
        for got, first in zip(run[:3], runs[0][:3], strict=True):
            assert torch.equal(got, first)
    paths(persistent="never", tensor_cores="never")
    loop = torch.ops.custom_ops.lstm.default(*half)
    for i in (0, 2):  # y and c_n
        tc_error = (runs[0][i][-1].double() - want[i][-1]).abs().max().item()
        loop_error = (loop[i][-1].double() - want[i][-1]).abs().max().item()
        assert tc_error <= 2 * loop_error + 1e-3, (i, tc_error, loop_error)


@pytest.mark.cuda
@pytest.mark.parametrize(
    "sizes", [(2, 4, 8, 200), (2, 65, 8, 256), (2, 4, 8, 1152)], ids=["H200", "B65", "H1152"]
)
def test_tensor_core_forward_falls_back_where_it_does_not_fit(sizes, generator, paths):
    """H not a multiple of 128, B over 64, H over 1024: another path runs, with the same result."""
    paths(tensor_cores="always")
    reference, ours = pair(sizes[2], sizes[3], "cuda", torch.float16)
    x = random(sizes[:3], generator)
    assert not tc_forward_ran(lambda: ours(x.to("cuda", torch.float16)))
    compare_forward_and_backward(reference, ours, x, None, "cuda", torch.float16)


@needs_clusters
@pytest.mark.cuda
@pytest.mark.parametrize("sizes", [(2, 4, 8, 768), (2, 33, 8, 256)], ids=["H768", "B33"])
def test_the_cluster_variant_leaves_what_it_cannot_take_to_the_grid_variant(
    sizes, generator, paths
):
    """H over 512 (more than 16 blocks), B over 32: the grid variant runs, with the same result."""
    paths(tensor_cores="always", clusters="always")
    reference, ours = pair(sizes[2], sizes[3], "cuda", torch.float16)
    x = random(sizes[:3], generator)
    names = kernels_run(lambda: ours(x.to("cuda", torch.float16)))
    assert any("lstm_forward_persistent_tc" in n for n in names), names
    assert not any("cluster" in n for n in names), names
    compare_forward_and_backward(reference, ours, x, None, "cuda", torch.float16)


@pytest.mark.cuda
def test_clusters_never_leaves_the_grid_variant(paths):
    paths(tensor_cores="always", clusters="never")
    args = layer_inputs("cuda", torch.float16, sizes=(3, 4, 8, 256))
    names = kernels_run(lambda: custom_ops.lstm(*args))
    assert not any("cluster" in n for n in names)
    assert any("lstm_forward_persistent_tc" in n for n in names), names


@pytest.mark.cuda
def test_tensor_cores_never_leaves_the_other_kernels(paths):
    paths(persistent="always", tensor_cores="never")
    args = layer_inputs("cuda", torch.float16, sizes=(3, 4, 8, 256))
    names = kernels_run(lambda: custom_ops.lstm(*args))
    assert not any("persistent_tc" in n or "cluster_tc" in n for n in names)
    assert any("lstm_forward_persistent" in n for n in names), names


# ---- bad input, by the message it must produce, before any work -----------------------------------


def bad_calls():
    def call(**change):
        def run(device):
            args = dict(
                zip(
                    ["x", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"],
                    layer_inputs(device, sizes=(4, 2, 3, 5)),
                    strict=True,
                )
            )
            for name, make in change.items():
                args[name] = make(args[name])
            return custom_ops.lstm(*args.values())

        return run

    yield pytest.param(
        call(x=lambda x: x[..., :2]),
        "lstm: x has 2 features but w_ih expects 3",
        id="wrong-feature-size",
    )
    yield pytest.param(call(h0=lambda h: h[:1]), r"lstm: h0 must have shape \[2, 5\]", id="h0")
    yield pytest.param(call(c0=lambda c: c.t()), r"lstm: c0 must have shape \[2, 5\]", id="c0")
    yield pytest.param(
        call(x=lambda x: x.to(torch.int64)), "lstm: x must be a floating-point", id="integer-x"
    )
    yield pytest.param(
        call(w_hh=lambda w: w[None]), r"lstm: w_hh must have shape \[4 \* hidden", id="3d-w_hh"
    )
    yield pytest.param(
        call(w_ih=lambda w: w[:-1]), r"lstm: w_ih must have shape \[20, input", id="w_ih-rows"
    )
    yield pytest.param(call(b_hh=lambda b: b[:3]), r"lstm: b_hh must have shape \[20\]", id="bias")
    yield pytest.param(
        call(w_ih=lambda w: w.float()),
        "lstm: x and w_ih must have the same dtype",
        id="mixed-dtypes",
    )
    yield pytest.param(
        call(x=lambda x: x[:, :, :0]),
        "lstm: input_size and hidden_size must be positive",
        id="no-features",
    )


@pytest.mark.parametrize(("call", "message"), list(bad_calls()))
def test_rejects_bad_input(call, message, device):
    with pytest.raises(RuntimeError, match=message):
        call(device)


@pytest.mark.cuda
def test_rejects_mixed_devices():
    args = layer_inputs("cuda")
    args[4] = args[4].cpu()
    with pytest.raises(RuntimeError, match="lstm: x and w_hh must be on the same device"):
        custom_ops.lstm(*args)


# ---- the scripts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "steps"),
    [pytest.param("cuda", 200, id="cuda", marks=pytest.mark.cuda)],
)
@pytest.mark.slow
def test_training_with_ours_follows_the_loss_curve_of_nn_lstm(
    device, steps, capsys, import_own_script
):
    """lstm_train.py trains the same model from the same start with each LSTM; it fails when the
    curves part by more than its tolerance. On the CPU the lesson's own command does the same
    (`lstm_train.py --steps 30 --device cpu`, run by tests/test_lesson_commands.py)."""
    lstm_train = import_own_script("examples/lstm_train")
    assert lstm_train.main(["--device", device, "--steps", str(steps)]) == 0, (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("device", "steps", "proj_size"),
    [
        # 10 steps on the CPU: every path a step takes (packed, projected, both directions, Adam)
        # and 10 losses to compare; the lesson's command trains the plain model for 30.
        pytest.param("cpu", 10, 16, id="cpu-projected"),
        pytest.param("cuda", 200, 0, id="cuda", marks=pytest.mark.cuda),
        pytest.param("cuda", 200, 16, id="cuda-projected", marks=pytest.mark.cuda),
    ],
)
@pytest.mark.slow
def test_a_bidirectional_tagger_on_packed_sentences_trains_as_with_nn_lstm(
    device, steps, proj_size, capsys, import_own_script
):
    """tagger_train.py: packed sentences of 3 to 30 tokens, both directions, two layers; it
    fails when the loss curves part by more than its tolerance."""
    tagger_train = import_own_script("examples/tagger_train")
    args = ["--device", device, "--steps", str(steps), "--proj-size", str(proj_size)]
    assert tagger_train.main(args) == 0, capsys.readouterr().out


@pytest.mark.skipif(HAS_CUDA, reason="checks the message a machine without a GPU prints")
def test_benchmark_says_it_needs_a_gpu(capsys, import_own_script):
    benchmark_lstm = import_own_script("benchmarks/benchmark_lstm")
    assert benchmark_lstm.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


@pytest.mark.cuda
@pytest.mark.slow
def test_benchmark_quick_run_writes_its_table(tmp_path, import_own_script):
    benchmark_lstm = import_own_script("benchmarks/benchmark_lstm")
    assert benchmark_lstm.main(["--quick", "--no-compile", "--out", str(tmp_path)]) == 0
    records = json.loads((tmp_path / "lstm_layer.json").read_text())["rows"]
    assert {r["impl"] for r in records} >= {"ours", "cuDNN nn.LSTM", "loop of nn.LSTMCell"}
    assert all(r["gpu_ms"] > 0 and r["loop_ms"] > 0 for r in records)
    # Every dtype, the mixed-precision user's included, with ours and cuDNN in each pass.
    dtypes = {"float32", "bfloat16", "float16", "autocast-float16", "autocast-bfloat16"}
    assert {r["dtype"] for r in records} == dtypes
    for dtype in dtypes:
        for pass_name in ("fwd", "fwd+bwd"):
            impls = {r["impl"] for r in records if (r["dtype"], r["pass"]) == (dtype, pass_name)}
            assert {"ours", "ours, no step graphs", "cuDNN nn.LSTM"} <= impls, (dtype, pass_name)


@pytest.mark.skipif(HAS_CUDA, reason="checks the message a machine without a GPU prints")
def test_options_benchmark_says_it_needs_a_gpu(capsys, import_own_script):
    lstm_options = import_own_script("benchmarks/lstm_options")
    assert lstm_options.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


@pytest.mark.skipif(HAS_CUDA, reason="checks the message a machine without a GPU prints")
def test_tensor_core_benchmark_says_it_needs_a_gpu(capsys, import_own_script):
    assert import_own_script("benchmarks/lstm_tc_forward").main([]) == 1
    assert "needs a CUDA GPU" in capsys.readouterr().out


def test_tensor_core_benchmark_writes_its_table_again_from_its_json(tmp_path, import_own_script):
    """The committed H100 run, back to back first: the .md is what --markdown-from makes of it."""
    committed = HERE.parent / "docs" / "perf" / "h100" / "lstm_tc_forward.json"
    shutil.copy(committed, tmp_path / "lstm_tc_forward.json")
    bench = import_own_script("benchmarks/lstm_tc_forward")
    assert bench.main(["--markdown-from", str(tmp_path / "lstm_tc_forward.json")]) == 0
    text = (tmp_path / "lstm_tc_forward.md").read_text()
    assert text == committed.with_suffix(".md").read_text()
    assert "| dtype | T, B, H | back to back ms: cuDNN |" in text


def test_stall_summary_shows_the_top_stalls_with_what_came_before(tmp_path, import_own_script):
    """profile_lstm_tc.py --stalls on a small SASS page in ncu's CSV layout: the lines with the
    most samples, each below the instructions it waits for, shares of all samples."""
    columns = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"]
    sass = [("BAR.SYNC", "1"), ("S2R R0, SR_TID.X", "60"), ("HMMA", "9"), ("LDG R3", "0")]
    sass += [(f"IADD3 R{i}", "0") for i in range(20)] + [("HADD2.F32 R3", "30")]
    lines = [",".join(columns)] + [f'{i:#x},"{op}","{n}","128"' for i, (op, n) in enumerate(sass)]
    (tmp_path / "tc.csv").write_text('"Kernel Name","tc"\n' + "\n".join(lines) + "\n")
    summary = import_own_script("benchmarks/profile_lstm_tc").top_stalls(tmp_path / "tc.csv", top=2)
    assert summary.startswith("100 stall samples")
    shown = [line.split() for line in summary.splitlines()[2:] if line]
    assert ["60.0%", "128", "S2R", "R0,", "SR_TID.X"] in shown
    assert ["30.0%", "128", "HADD2.F32", "R3"] in shown
    assert ["9.0%", "128", "HMMA"] not in shown  # the third largest, past top=2
    assert shown[0][2] == "BAR.SYNC"  # above the largest: what it waits at


@pytest.mark.cuda
@pytest.mark.slow
def test_options_benchmark_quick_run_writes_its_table(tmp_path, import_own_script):
    lstm_options = import_own_script("benchmarks/lstm_options")
    assert lstm_options.main(["--quick", "--out", str(tmp_path)]) == 0
    records = json.loads((tmp_path / "lstm_options.json").read_text())["rows"]
    assert len(records) == 2 * len(lstm_options.QUICK)
    assert all(r["loop_ms_ours"] > 0 and r["loop_ms_cuDNN"] > 0 for r in records)


# ---- under compute-sanitizer: the CUDA path once, forward and backward, on small shapes ---------


@pytest.mark.cuda
@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("path", CUDA_PATHS)
def test_cuda_forward_and_backward_on_small_shapes(dtype, path, paths):
    paths(**path)
    args = layer_inputs("cuda", dtype, requires_grad=True, sizes=(3, 2, 5, 7))
    for _ in range(2):  # a step graph is made by the first call and replayed by the second
        y, h, c = custom_ops.lstm(*args)
        (y.float().sum() + h.float().sum() + c.float().sum()).backward()
    for a in args:
        assert torch.isfinite(a.grad).all()
    torch.cuda.synchronize()


@pytest.mark.cuda
@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "variant, hidden",
    [
        ("grid", 128),
        pytest.param("cluster", 128, marks=needs_clusters),
        pytest.param("cluster", 512, marks=needs_clusters),
    ],
    ids=["grid-H128", "cluster-H128", "cluster-H512"],
)
def test_tensor_core_forward_and_backward_on_small_shapes(dtype, variant, hidden, paths):
    paths(**TC_VARIANTS[variant][0])
    # (Which kernel ran is not asserted here: the profiler sees nothing under compute-sanitizer.
    # The tests above check it for the same paths.)
    args = layer_inputs("cuda", dtype, requires_grad=True, sizes=(3, 9, 5, hidden))
    y, h, c = custom_ops.lstm(*args)
    (y.float().sum() + h.float().sum() + c.float().sum()).backward()
    for a in args:
        assert torch.isfinite(a.grad).all()
    torch.cuda.synchronize()


@pytest.mark.cuda
@pytest.mark.sanitize
def test_a_persistent_forward_then_a_step_graph_backward(paths):
    """float32 at H = 1024, B = 8: the forward fits the persistent kernel and writes into a
    slot's memory, the backward does not fit it and replays the slot's graph."""
    paths(persistent="auto", step_graphs="always")
    args = layer_inputs("cuda", torch.float32, requires_grad=True, sizes=(2, 8, 4, 1024))
    for _ in range(2):
        y, h, c = custom_ops.lstm(*args)
        (y.sum() + h.sum() + c.sum()).backward()
    for a in args:
        assert torch.isfinite(a.grad).all()
    torch.cuda.synchronize()


@pytest.mark.cuda
@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("projected", [False, True], ids=["plain", "projected"])
@pytest.mark.parametrize("step_graphs", ["never", "always"], ids=["step-loop", "step-graph"])
def test_cuda_packed_forward_and_backward_on_small_shapes(
    dtype, reverse, projected, step_graphs, paths
):
    paths(step_graphs=step_graphs)
    args = [
        a.to(dtype).requires_grad_() if a.is_floating_point() else a
        for a in packed_inputs("cuda", projected=projected)
        if a is not None
    ]
    if not projected:
        args.append(None)
    for _ in range(2):  # a step graph is made by the first call and replayed by the second
        y, h, c = custom_ops.lstm_packed(*args, reverse=reverse)
        (y.float().sum() + h.float().sum() + c.float().sum()).backward()
    for a in args:
        if a is not None and a.is_floating_point():
            assert torch.isfinite(a.grad).all()
    torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))
