"""Tests for chapter 2: every op against a plain PyTorch reference, on random data, odd and
empty shapes, non-contiguous inputs and every floating dtype; bad inputs by their messages.

    python chapter2_tensor_api/test_chapter2.py     # on its own
    pytest chapter2_tensor_api                      # or under pytest
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import load_chapter2

HERE = Path(__file__).resolve().parent

# Tolerances per dtype. The raw loops compute half types in float and round once; the reference
# does the same in float64, so fp32/fp64 agree to rounding and the half types to one ulp of the
# output (bf16 keeps 8 bits of mantissa, fp16 11).
TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-6, atol=1e-6),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=8e-3, atol=8e-3),
}
VERSIONS = ["fused_bias_relu_v1_aten", "fused_bias_relu_v2_loop", "fused_bias_relu_v3_parallel"]


@pytest.fixture(scope="session")
def ext():
    return load_chapter2.load_chapter2()


def reference_fused_bias_relu(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """The specification: relu(x * scale + bias), computed in float64 and rounded once."""
    return torch.relu(x.double() * scale + bias.double()).to(x.dtype)


def random(shape, dtype, generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


# ---- fused_bias_relu ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize(
    "shape", [(1,), (7,), (1, 1), (31, 17), (2, 3, 65), (4096, 33), (3, 0), (0, 5)], ids=str
)
def test_fused_bias_relu_matches_reference(ext, version, dtype, shape, generator):
    x = random(shape, dtype, generator)
    bias = random(shape[-1:], dtype, generator)
    out = getattr(ext, version)(x, bias, 0.7)
    expected = reference_fused_bias_relu(x, bias, 0.7)
    if version == "fused_bias_relu_v1_aten" and dtype in (torch.float16, torch.bfloat16):
        # v1 rounds after each of its three ops, the reference once: up to ~2 ulps apart.
        tolerance = {k: 2 * v for k, v in TOLERANCES[dtype].items()}
    else:
        tolerance = TOLERANCES[dtype]
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out, expected, **tolerance)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "make_view",
    [
        pytest.param(lambda t: t.t(), id="transposed"),
        pytest.param(lambda t: t[:, ::2], id="strided-columns"),
        pytest.param(lambda t: t[1:], id="offset-rows"),
    ],
)
def test_fused_bias_relu_accepts_non_contiguous_input(ext, version, make_view, generator):
    x = make_view(random((40, 24), torch.float32, generator))
    bias = random(x.shape[-1:], torch.float32, generator)
    out = getattr(ext, version)(x, bias, 2.0)
    torch.testing.assert_close(out, reference_fused_bias_relu(x, bias, 2.0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("version", VERSIONS)
def test_fused_bias_relu_accepts_a_strided_bias(ext, version, generator):
    x = random((9, 6), torch.float64, generator)
    bias = random((12,), torch.float64, generator)[::2]
    torch.testing.assert_close(
        getattr(ext, version)(x, bias, 1.0), reference_fused_bias_relu(x, bias, 1.0)
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_fused_bias_relu_keeps_nan_like_torch_relu(ext, version):
    x = torch.tensor([[float("nan"), -1.0, 2.0]])
    out = getattr(ext, version)(x, torch.zeros(3), 1.0)
    torch.testing.assert_close(out, torch.relu(x), equal_nan=True)


def test_parallel_for_runs_on_every_thread_of_torch(ext):
    # Fails if the module was compiled without -fopenmp: at::parallel_for then runs on one thread.
    threads = torch.get_num_threads()
    if threads < 2:
        pytest.skip("torch runs one thread here: there is nothing to split")
    assert ext.parallel_for_thread_count(64) == threads


def test_fused_bias_relu_parallel_matches_serial_with_many_threads(ext, generator):
    # Large enough that at::parallel_for hands out several chunks; the result must not change.
    x = random((2048, 300), torch.float32, generator)
    bias = random((300,), torch.float32, generator)
    serial = ext.fused_bias_relu_v2_loop(x, bias, 1.5)
    torch.testing.assert_close(
        ext.fused_bias_relu_v3_parallel(x, bias, 1.5), serial, rtol=0, atol=0
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("x", "bias", "message"),
    [
        (torch.ones(3, 4), torch.ones(5), r"bias must have 4 elements \(x.size\(-1\)\), got 5"),
        (torch.ones(3, 4), torch.ones(1, 4), "bias must have 1 dimension"),
        (
            torch.ones(3, 4),
            torch.ones(4, dtype=torch.float64),
            "x and bias must have the same dtype",
        ),
        (
            torch.ones(3, 4, dtype=torch.int32),
            torch.ones(4, dtype=torch.int32),
            "x must be a floating-point tensor",
        ),
        (torch.tensor(1.0), torch.ones(1), "x must have at least 1 dimension"),
    ],
    ids=["bias-size", "bias-rank", "dtype-mismatch", "int-dtype", "0-dim"],
)
def test_fused_bias_relu_rejects_bad_input(ext, version, x, bias, message):
    with pytest.raises(RuntimeError, match=message):
        getattr(ext, version)(x, bias, 1.0)


@pytest.mark.cuda
@pytest.mark.parametrize("version", VERSIONS)
def test_fused_bias_relu_rejects_cuda_tensors(ext, version):
    with pytest.raises(RuntimeError, match="x must be a CPU tensor, got cuda:0"):
        getattr(ext, version)(torch.ones(2, 3, device="cuda"), torch.ones(3, device="cuda"), 1.0)
    with pytest.raises(RuntimeError, match="bias must be a CPU tensor, got cuda:0"):
        getattr(ext, version)(torch.ones(2, 3), torch.ones(3, device="cuda"), 1.0)


# ---- the LSTM cell -----------------------------------------------------------------------------


def lstm_inputs(batch, input_size, hidden, dtype, device, generator):
    cell = torch.nn.LSTMCell(input_size, hidden, dtype=dtype)
    with torch.no_grad():
        for p in cell.parameters():
            p.copy_(random(p.shape, dtype, generator))
    cell = cell.to(device)
    x, h, c = (
        random(s, dtype, generator).to(device)
        for s in [(batch, input_size), (batch, hidden), (batch, hidden)]
    )
    return cell, x, h, c


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize(
    ("batch", "input_size", "hidden"), [(1, 1, 1), (3, 5, 7), (64, 33, 128), (0, 4, 4)]
)
def test_lstm_cell_forward_matches_nn_lstmcell(
    ext, dtype, batch, input_size, hidden, device, generator
):
    cell, x, h, c = lstm_inputs(batch, input_size, hidden, dtype, device, generator)
    h_next, c_next, gates, tanh_c = ext.lstm_cell_forward(
        x, h, c, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh
    )
    with torch.no_grad():
        expected_h, expected_c = cell(x, (h, c))
    tolerance = TOLERANCES[dtype] if device.type == "cpu" else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(h_next, expected_h, **tolerance)
    torch.testing.assert_close(c_next, expected_c, **tolerance)
    # The saved activations are what they claim to be.
    i, f, g, o = gates.chunk(4, dim=1)
    torch.testing.assert_close(c_next, f * c + i * g, **tolerance)
    torch.testing.assert_close(h_next, o * tanh_c, **tolerance)
    torch.testing.assert_close(tanh_c, torch.tanh(c_next), **tolerance)
    assert ((gates[:, : 2 * hidden] >= 0) & (gates[:, : 2 * hidden] <= 1)).all(), (
        "i, f are sigmoids"
    )


def test_lstm_cell_forward_accepts_non_contiguous_state(ext, generator):
    cell, x, h, c = lstm_inputs(4, 6, 5, torch.float64, torch.device("cpu"), generator)
    h_t = h.t().contiguous().t()  # same values, column-major strides
    h_next, c_next, _, _ = ext.lstm_cell_forward(
        x, h_t, c, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh
    )
    with torch.no_grad():
        expected_h, expected_c = cell(x, (h, c))
    torch.testing.assert_close(h_next, expected_h)
    torch.testing.assert_close(c_next, expected_c)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: {**a, "w_ih": a["w_ih"][:-1]}, r"w_ih must have shape \[20, 6\], got \[19, 6\]"),
        (lambda a: {**a, "w_hh": a["w_hh"].t()}, r"w_hh must have shape \[20, 5\], got \[5, 20\]"),
        (lambda a: {**a, "c": a["c"][:, :-1]}, r"c must have h's shape \[4, 5\], got \[4, 4\]"),
        (lambda a: {**a, "h": a["h"][:-1]}, r"h.size\(0\) must be 4, got 3"),
        (lambda a: {**a, "b_hh": a["b_hh"][:-1]}, r"b_ih and b_hh must have shape \[20\]"),
        (lambda a: {**a, "x": a["x"][0]}, "x must have 2 dimension"),
        (
            lambda a: {**a, "h": a["h"].double()},
            "x and h must have the same dtype, got Float and Double",
        ),
        (lambda a: {k: v.long() for k, v in a.items()}, "x must be a floating-point tensor"),
    ],
    ids=[
        "w_ih-shape",
        "w_hh-transposed",
        "c-shape",
        "batch-mismatch",
        "bias-shape",
        "x-rank",
        "dtype-mix",
        "int",
    ],
)
def test_lstm_cell_forward_rejects_bad_input(ext, change, message, generator):
    cell, x, h, c = lstm_inputs(4, 6, 5, torch.float32, torch.device("cpu"), generator)
    args = {
        "x": x,
        "h": h,
        "c": c,
        "w_ih": cell.weight_ih.detach(),
        "w_hh": cell.weight_hh.detach(),
        "b_ih": cell.bias_ih.detach(),
        "b_hh": cell.bias_hh.detach(),
    }
    with pytest.raises(RuntimeError, match=message):
        ext.lstm_cell_forward(**change(args))


@pytest.mark.cuda
def test_lstm_cell_forward_rejects_mixed_devices(ext, generator):
    cell, x, h, c = lstm_inputs(2, 3, 4, torch.float32, torch.device("cpu"), generator)
    with pytest.raises(
        RuntimeError, match="x and h must be on the same device, got cpu and cuda:0"
    ):
        ext.lstm_cell_forward(
            x, h.cuda(), c, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh
        )


# ---- dispatch overhead and memory layout -----------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(1, 1, 1, 1), (5, 3, 4, 6), (16, 32, 32, 32), (0, 2, 2, 2)], ids=str
)
def test_matmul_loop_and_batched_match_torch(ext, shape, device, generator):
    t, n, k, m = shape
    a = random((t, n, k), torch.float64, generator).to(device)
    b = random((t, k, m), torch.float64, generator).to(device)
    torch.testing.assert_close(ext.matmul_loop(a, b), a @ b)
    torch.testing.assert_close(ext.matmul_batched(a, b), a @ b)


def test_matmul_loop_rejects_mismatched_inner_size(ext):
    with pytest.raises(RuntimeError, match=r"matmul_loop: b.size\(1\) must be 4, got 5"):
        ext.matmul_loop(torch.ones(2, 3, 4), torch.ones(2, 5, 6))


@pytest.mark.parametrize(
    ("m", "k", "n"), [(1, 1, 1), (7, 5, 3), (33, 17, 64), (0, 4, 3), (4, 0, 3)]
)
def test_column_major_gemm_computes_row_major_matmul(ext, m, k, n, generator):
    a = random((m, k), torch.float32, generator)
    b = random((k, n), torch.float32, generator)
    torch.testing.assert_close(ext.matmul_via_column_major_gemm(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_column_major_gemm_rejects_transposed_views(ext):
    with pytest.raises(RuntimeError, match=r"must be contiguous \(row-major\)"):
        ext.matmul_via_column_major_gemm(torch.ones(4, 3).t(), torch.ones(4, 2))


def test_row_major_buffer_read_column_major_is_the_transpose():
    # The fact the GEMM trick rests on, in strides: a row-major (M, K) tensor and the transpose
    # of a column-major-strided (K, M) tensor describe the same memory.
    a = torch.arange(6.0).reshape(2, 3)
    assert a.stride() == (3, 1)
    as_column_major = torch.as_strided(a, size=(3, 2), stride=(1, 3))
    torch.testing.assert_close(as_column_major, a.t(), rtol=0, atol=0)


# ---- the scripts a reader runs ------------------------------------------------------------------


def test_demo_runs(capsys, import_own_script):
    demo = import_own_script("demo")

    demo.main()
    out = capsys.readouterr().out
    assert "matches torch" in out and "bias must have" in out


@pytest.mark.slow
def test_benchmark_quick_run_writes_its_tables(tmp_path, import_own_script):
    benchmark = import_own_script("benchmark")

    result = benchmark.main(["--quick", "--no-compile", "--out", str(tmp_path)])
    assert {"fused_bias_relu", "dispatch", "nd_at_2d", "malloc"} <= result.keys()
    assert (tmp_path / "chapter2_cpu.md").read_text().count("|") > 20


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message a machine without a GPU prints"
)
def test_nd_matmul_benchmark_says_it_needs_a_gpu_and_exits_0(capsys, import_own_script):
    benchmark_nd_matmul = import_own_script("benchmark_nd_matmul")

    assert benchmark_nd_matmul.main(["--quick"]) == 0
    assert "needs a CUDA GPU" in capsys.readouterr().out


@pytest.mark.cuda
def test_nd_matmul_benchmark_quick_run_writes_its_tables(tmp_path, import_own_script):
    benchmark_nd_matmul = import_own_script("benchmark_nd_matmul")

    assert benchmark_nd_matmul.main(["--quick", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "chapter2_nd_matmul.md").read_text()
    assert table.count("transposed view") >= 4 and "fwd+bwd" in table
    assert (tmp_path / "chapter2_nd_matmul.json").stat().st_size > 0


def aten_ops_of(fn) -> set[str]:
    """The aten:: ops one call of fn runs, from torch.profiler's CPU events."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {event.name for event in prof.events() if event.name.startswith("aten::")}


@pytest.mark.parametrize("w_requires_grad", [False, True], ids=["w_no_grad", "w_requires_grad"])
def test_matmul_of_a_transposed_input_copies_only_when_w_needs_a_gradient(w_requires_grad):
    """The lesson's claim about (B, T, F) @ (F, H) with time-major data read batch-major: without
    a gradient for w, torch.matmul calls bmm on the strided view (no copy); with one, it copies x
    and folds to one mm. A torch whose matmul takes another path fails here, not silently."""
    x = torch.randn(16, 8, 32).transpose(0, 1)  # (B, T, F), not contiguous
    w = torch.randn(32, 24, requires_grad=w_requires_grad)
    ops = aten_ops_of(lambda: torch.matmul(x, w))
    if w_requires_grad:
        assert {"aten::mm", "aten::clone"} <= ops and "aten::bmm" not in ops, ops
    else:
        assert "aten::bmm" in ops and not ops & {"aten::clone", "aten::copy_", "aten::mm"}, ops


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))
