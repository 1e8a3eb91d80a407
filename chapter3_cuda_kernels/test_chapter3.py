"""Tests for chapter 3: every kernel version against a plain PyTorch reference, on the GPU and on
the CPU path, for odd and empty sizes, misaligned and non-contiguous views, every floating dtype;
bad inputs by their messages. Tests marked `sanitize` rerun under compute-sanitizer.

    python chapter3_cuda_kernels/test_chapter3.py     # on its own
    pytest chapter3_cuda_kernels                      # or under pytest
"""

from __future__ import annotations

import math
import sys

import pytest
import torch

import load_chapter3

HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(scope="session")
def ext():
    return load_chapter3.load_chapter3()


# Elementwise tolerances: the kernels compute in float (double for float64) and round once, as the
# float64 reference does, so the outputs agree to one rounding of the output dtype.
TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-6, atol=1e-6),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=8e-3, atol=8e-3),
}
DTYPES = list(TOLERANCES)
ELEMENTWISE = load_chapter3.ELEMENTWISE_VERSIONS
SUMS = load_chapter3.SUM_VERSIONS


def random(shape, dtype, device, generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)


def poisoned(op, x: torch.Tensor, *args):
    """op(x, *args) after filling freed memory of x's size with NaN: an output element the op
    never writes then reads NaN, instead of whatever the last test left in the allocator's
    cached block (often the right answer, from the previous version's run on the same data)."""
    torch.full_like(x, float("nan"), memory_format=torch.contiguous_format)  # allocated and freed
    return op(x, *args)


def reference_fused_bias_relu(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """The specification: relu(x * scale + bias), in float64, rounded once."""
    return torch.relu(x.double() * scale + bias.double()).to(x.dtype)


def sum_tolerance(dtype: torch.dtype, numel: int) -> dict:
    """Float accumulation in any order is within ~numel * eps * max|x| of the exact sum (each add
    rounds once); the result is then rounded to the output dtype."""
    eps = 2.0**-53 if dtype == torch.float64 else 2.0**-24
    return dict(atol=8 * numel * eps + 1e-12, rtol=TOLERANCES[dtype]["rtol"])


# ---- the build ---------------------------------------------------------------------------------


@pytest.mark.skipif(
    not load_chapter3.can_build_cuda(), reason="no nvcc or a CPU-only torch: CUDA is not built"
)
def test_cuda_sources_compile_and_link(ext):
    """Where nvcc exists (CI included, with no GPU) the .cu files are compiled into the module; the
    import succeeding means they also linked."""
    assert ext.built_with_cuda


# ---- fused_bias_relu ---------------------------------------------------------------------------

SHAPES = [(1,), (31,), (1, 1), (4, 255), (2, 257), (65537,), (3, 100, 7), (8, 4096), (0, 5), (5, 0)]


@pytest.mark.parametrize("version", ELEMENTWISE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fused_bias_relu_matches_reference(ext, version, dtype, shape, device, generator):
    x = random(shape, dtype, device, generator)
    bias = random(shape[-1:], dtype, device, generator)
    out = poisoned(getattr(ext, version), x, bias, 0.7)
    assert out.shape == x.shape and out.dtype == dtype and out.device == x.device
    torch.testing.assert_close(out, reference_fused_bias_relu(x, bias, 0.7), **TOLERANCES[dtype])


@pytest.mark.parametrize("version", ELEMENTWISE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("offset", [1, 2, 3], ids=lambda o: f"x[{o}:]")
def test_fused_bias_relu_handles_misaligned_views(ext, version, dtype, offset, device, generator):
    """x[1:] of a float buffer starts 4 bytes past a 16-byte boundary: v3 must not load vectors
    from it. Rows of 1001 columns also make every row start misaligned."""
    base = random((7 * 1001 + offset,), dtype, device, generator)
    x = base[offset:].view(7, 1001)
    bias = random((1001,), dtype, device, generator)
    out = poisoned(getattr(ext, version), x, bias, 1.5)
    torch.testing.assert_close(out, reference_fused_bias_relu(x, bias, 1.5), **TOLERANCES[dtype])


@pytest.mark.parametrize("version", ELEMENTWISE)
@pytest.mark.parametrize(
    "make_view",
    [
        pytest.param(lambda t: t.t(), id="transposed"),
        pytest.param(lambda t: t[:, ::2], id="strided-columns"),
        pytest.param(lambda t: t[1:, 3:], id="sliced"),
    ],
)
def test_fused_bias_relu_accepts_non_contiguous_input(ext, version, make_view, device, generator):
    x = make_view(random((64, 40), torch.float32, device, generator))
    bias = random(x.shape[-1:], torch.float32, device, generator)
    out = poisoned(getattr(ext, version), x, bias, 2.0)
    torch.testing.assert_close(out, reference_fused_bias_relu(x, bias, 2.0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("version", ELEMENTWISE)
def test_fused_bias_relu_keeps_nan_like_torch_relu(ext, version, device):
    x = torch.tensor([[float("nan"), -1.0, 2.0, float("inf")]], device=device)
    out = getattr(ext, version)(x, torch.zeros(4, device=device), 1.0)
    torch.testing.assert_close(out, torch.relu(x), equal_nan=True)


@pytest.mark.parametrize("version", ELEMENTWISE)
@pytest.mark.parametrize(
    ("x", "bias", "message"),
    [
        (
            torch.ones(3, 4),
            torch.ones(5),
            r"bias must have shape \(4,\) to match x.size\(-1\), got \[5\]",
        ),
        (torch.ones(3, 4), torch.ones(1, 4), r"bias must have shape \(4,\).*got \[1, 4\]"),
        (
            torch.ones(3, 4),
            torch.ones(4, dtype=torch.float64),
            "x and bias must have the same dtype",
        ),
        (
            torch.ones(3, 4, dtype=torch.int32),
            torch.ones(4, dtype=torch.int32),
            r"x must be a floating-point tensor .* got Int",
        ),
        (torch.tensor(1.0), torch.ones(1), "x must have at least 1 dimension"),
    ],
    ids=["bias-size", "bias-rank", "dtype-mismatch", "int-dtype", "0-dim"],
)
def test_fused_bias_relu_rejects_bad_input(ext, version, x, bias, message, device):
    with pytest.raises(RuntimeError, match=f"{version}: {message}"):
        getattr(ext, version)(x.to(device), bias.to(device), 1.0)


@pytest.mark.cuda
@pytest.mark.parametrize("version", ELEMENTWISE)
def test_fused_bias_relu_rejects_mixed_devices(ext, version):
    with pytest.raises(
        RuntimeError, match="x and bias must be on the same device, got cpu and cuda:0"
    ):
        getattr(ext, version)(torch.ones(2, 3), torch.ones(3, device="cuda"), 1.0)
    with pytest.raises(
        RuntimeError, match="x and bias must be on the same device, got cuda:0 and cpu"
    ):
        getattr(ext, version)(torch.ones(2, 3, device="cuda"), torch.ones(3), 1.0)


@pytest.mark.cuda
@pytest.mark.parametrize("version", ELEMENTWISE)
def test_fused_bias_relu_uses_the_current_stream(ext, version, generator):
    """Inside `with torch.cuda.stream(s)` the op must run on s, after the op that produced its
    input there. The side stream is held busy first, so a kernel launched on another stream
    would read y before it is written."""
    x = random((1024, 1024), torch.float32, "cuda", generator)
    bias = random((1024,), torch.float32, "cuda", generator)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # ~25 ms of GPU time on this stream
        y = x * 2
        out = getattr(ext, version)(y, bias, 1.0)
        expected = torch.relu(y + bias)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(out, expected)


@pytest.mark.cuda
@pytest.mark.parametrize("version", ELEMENTWISE)
def test_fused_bias_relu_indexes_past_two_to_the_32(ext, version):
    """Just over 2^32 half-precision elements (8 GiB), as a view one element into its buffer so
    that v3 too indexes element by element: an index held in 32 bits, signed or not, wraps and
    leaves the end of the output unwritten. Checked at the last elements and a random sample."""
    free, _ = torch.cuda.mem_get_info()
    if free < 24 * 2**30:
        pytest.skip(f"needs 24 GiB of free GPU memory, {free / 2**30:.1f} GiB free")
    cols = 1031
    numel = (2**32 // cols + 1) * cols  # whole rows, just past 2^32 elements
    base = torch.empty(numel + 1, dtype=torch.float16, device="cuda").uniform_(-2, 2)
    x = base[1:].view(-1, cols)
    bias = torch.linspace(-1, 1, cols, device="cuda", dtype=torch.float16)
    out = poisoned(getattr(ext, version), x, bias, 0.5)
    flat_x, flat_out = x.view(-1), out.view(-1)
    sample = torch.cat(
        [
            torch.randint(0, numel, (1 << 20,), device="cuda"),
            torch.arange(numel - 4096, numel, device="cuda"),
        ]
    )
    expected = torch.relu(flat_x[sample].double() * 0.5 + bias[sample % cols].double()).half()
    torch.testing.assert_close(flat_out[sample], expected, **TOLERANCES[torch.float16])
    del base, x, out, flat_x, flat_out
    torch.cuda.empty_cache()


# ---- sums --------------------------------------------------------------------------------------

SUM_SIZES = [0, 1, 31, 255, 256, 257, 513, 4097, 65537, 1_000_003]


@pytest.mark.parametrize("version", SUMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("numel", SUM_SIZES)
def test_sum_matches_reference(ext, version, dtype, numel, device, generator):
    x = random((numel,), dtype, device, generator)
    out = getattr(ext, version)(x)
    assert out.shape == () and out.dtype == dtype and out.device == x.device
    expected = x.double().sum().to(dtype)
    torch.testing.assert_close(out, expected, **sum_tolerance(dtype, numel))


# Sizes whose count of ones the output dtype holds exactly (bfloat16: integers to 256, float16:
# to 2048, float32: to 2^24), each with tails of every vector width and misaligned starts.
EXACT_COUNTS = {
    torch.float32: [1, 7, 1024, 4099, 1_000_003],
    torch.float16: [1, 7, 255, 1023, 2047],
    torch.bfloat16: [1, 7, 37, 255],
}


@pytest.mark.parametrize("version", SUMS)
@pytest.mark.parametrize(
    ("dtype", "numel"), [(d, n) for d, sizes in EXACT_COUNTS.items() for n in sizes], ids=str
)
@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_sum_counts_every_element_once(ext, version, dtype, numel, offset, device):
    """A sum of ones is exact: any element skipped or added twice by a tail, a vector width or
    a misaligned start shows up as an integer off."""
    x = torch.ones(numel + offset, dtype=dtype, device=device)[offset:]
    assert getattr(ext, version)(x).item() == numel


@pytest.mark.cuda
def test_sum_v0_stops_counting_at_two_to_the_24(ext):
    """v0 adds every element into one float: past 2^24 the spacing of floats is 2, so 2^24 + 1
    rounds back to 2^24 and the count stops. The other versions sum in registers first."""
    x = torch.ones(2**24 + 1000, device="cuda")
    assert ext.sum_v0_atomic_per_element(x).item() == 2**24
    assert ext.sum_v6_deterministic(x).item() == 2**24 + 1000


@pytest.mark.cuda
@pytest.mark.parametrize("version", SUMS[1:])  # not v0: see the test above
def test_sum_indexes_past_two_to_the_32(ext, version):
    """Just over 2^32 bfloat16 ones (8 GiB), misaligned so that the vectorized versions also index
    element by element: a 32-bit index would wrap and count some elements twice or not at all."""
    free, _ = torch.cuda.mem_get_info()
    if free < 12 * 2**30:
        pytest.skip(f"needs 12 GiB of free GPU memory, {free / 2**30:.1f} GiB free")
    numel = 2**32 + 4099
    x = torch.ones(numel + 1, dtype=torch.bfloat16, device="cuda")[1:]
    # float accumulation of 2^32 ones is exact per block but not in total: within 1e-6; the
    # bfloat16 output then rounds to 8 bits of mantissa.
    total = getattr(ext, version)(x).double().item()
    assert abs(total - numel) <= 4e-3 * numel, total
    del x
    torch.cuda.empty_cache()


@pytest.mark.parametrize("version", SUMS)
def test_sum_accepts_any_shape_and_layout(ext, version, device, generator):
    x = random((33, 65, 3), torch.float32, device, generator).transpose(0, 2)
    torch.testing.assert_close(
        getattr(ext, version)(x),
        x.double().sum().float(),
        **sum_tolerance(torch.float32, x.numel()),
    )


@pytest.mark.cuda
def test_sum_v6_is_deterministic(ext, generator):
    """The same input gives the same bits every time; the atomic versions need not (the order in
    which blocks finish changes from run to run)."""
    x = random((3_000_017,), torch.float32, "cuda", generator)
    first = ext.sum_v6_deterministic(x)
    for _ in range(20):
        assert torch.equal(ext.sum_v6_deterministic(x), first)


@pytest.mark.parametrize("version", SUMS)
def test_sum_rejects_integer_tensors(ext, version, device):
    with pytest.raises(RuntimeError, match=f"{version}: x must be a floating-point tensor"):
        getattr(ext, version)(torch.ones(5, dtype=torch.int64, device=device))


# ---- sum_columns -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "shape", [(1,), (1, 1), (7, 33), (1000, 31), (3, 5, 4096), (20000, 3), (0, 7), (5, 0)], ids=str
)
def test_sum_columns_matches_reference(ext, dtype, shape, device, generator):
    x = random(shape, dtype, device, generator)
    out = ext.sum_columns(x)
    rows = math.prod(shape[:-1])
    expected = x.double().reshape(rows, shape[-1]).sum(0).to(dtype)
    assert out.shape == (shape[-1],) and out.dtype == dtype
    torch.testing.assert_close(out, expected, **sum_tolerance(dtype, rows))


def test_sum_columns_accepts_a_transposed_input(ext, device, generator):
    x = random((40, 300), torch.float64, device, generator).t()
    torch.testing.assert_close(ext.sum_columns(x), x.sum(0))


def test_sum_columns_rejects_a_0_dim_tensor(ext, device):
    with pytest.raises(RuntimeError, match="sum_columns: x must have at least 1 dimension"):
        ext.sum_columns(torch.tensor(1.0, device=device))


# ---- block size and shape as launch arguments (block_sweep.py) ---------------------------------


@pytest.mark.parametrize("threads", [1, 32, 33, 96, 256, 1024])
def test_fused_bias_relu_v3_gives_the_same_result_for_every_block_size(
    ext, threads, device, generator
):
    x = random((37, 260), torch.float32, device, generator)
    bias = random((260,), torch.float32, device, generator)
    out = ext.fused_bias_relu_v3(x, bias, 0.5, threads=threads)
    torch.testing.assert_close(out, reference_fused_bias_relu(x, bias, 0.5), **TOLERANCES[x.dtype])


@pytest.mark.parametrize(
    "block", [(32, 8), (16, 16), (8, 32), (1, 1), (7, 5), (1024, 1), (1, 1024)]
)
def test_sum_columns_gives_the_same_result_for_every_block_shape(ext, block, device, generator):
    x = random((1000, 77), torch.float64, device, generator)
    torch.testing.assert_close(ext.sum_columns(x, *block), x.sum(0))


@pytest.mark.cuda
def test_launch_arguments_past_a_blocks_limit_are_rejected(ext):
    x = torch.ones(4, 8, device="cuda")
    with pytest.raises(RuntimeError, match="fused_bias_relu_v3: threads must be 1 to 1024"):
        ext.fused_bias_relu_v3(x, x[0], 1.0, threads=2048)
    with pytest.raises(RuntimeError, match="sum_columns: a block must have 1 to 1024 threads"):
        ext.sum_columns(x, 64, 32)


@pytest.mark.cuda
def test_blocks_per_sm_never_exceed_the_sms_threads(ext):
    x = torch.ones(4, 1024, device="cuda")
    most = torch.cuda.get_device_properties().max_threads_per_multi_processor
    for threads in [32, 256, 1024]:
        assert 1 <= ext.fused_bias_relu_v3_blocks_per_sm(x, threads) * threads <= most
    for bx, by in [(32, 8), (8, 32), (32, 32)]:
        assert 1 <= ext.sum_columns_blocks_per_sm(x, bx, by) * bx * by <= most


# ---- under compute-sanitizer: every kernel once, on small shapes ------------------------------


@pytest.mark.cuda
@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_every_kernel_on_small_shapes(ext, dtype, generator):
    """Small enough for compute-sanitizer (many times slower): vector tails, misaligned starts and a
    grid of more than one block, for every kernel in this chapter."""
    # 128 float32 = 512 bytes, a whole allocation granule: an access one past the end leaves the
    # allocation (run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 so each tensor has its own).
    for numel, offset in [(1, 0), (37, 1), (128, 0), (1031, 0), (4099, 2)]:
        x = random((numel + offset,), dtype, "cuda", generator)[offset:]
        for version in SUMS:
            out = getattr(ext, version)(x)
            torch.testing.assert_close(
                out, x.double().sum().to(dtype), **sum_tolerance(dtype, numel)
            )
        rows = x[: numel - numel % 37].view(-1, 37) if numel >= 37 else x.view(1, -1)
        bias = random(rows.shape[-1:], dtype, "cuda", generator)
        for version in ELEMENTWISE:
            out = getattr(ext, version)(rows, bias, 0.5)
            torch.testing.assert_close(
                out, reference_fused_bias_relu(rows, bias, 0.5), **TOLERANCES[dtype]
            )
        torch.testing.assert_close(
            ext.sum_columns(rows),
            rows.double().sum(0).to(dtype),
            **sum_tolerance(dtype, rows.shape[0]),
        )
    # Rows of whole 16-byte vectors, several column blocks and row tiles: v4's vector path.
    rows = random((33, 264), dtype, "cuda", generator)
    bias = random((264,), dtype, "cuda", generator)
    for version in ELEMENTWISE:
        torch.testing.assert_close(
            getattr(ext, version)(rows, bias, 0.5),
            reference_fused_bias_relu(rows, bias, 0.5),
            **TOLERANCES[dtype],
        )
    torch.cuda.synchronize()


# ---- the scripts a reader runs ------------------------------------------------------------------


def test_demo_runs(capsys, import_own_script):
    demo = import_own_script("demo")

    demo.main()
    out = capsys.readouterr().out
    assert "matches torch" in out


@pytest.mark.skipif(HAS_CUDA, reason="checks the message a machine without a GPU prints")
def test_benchmark_says_it_needs_a_gpu(capsys, import_own_script):
    benchmark = import_own_script("benchmark")

    assert benchmark.main(["--quick"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


@pytest.mark.cuda
@pytest.mark.slow
def test_benchmark_quick_run_writes_its_tables_and_plot(tmp_path, import_own_script):
    benchmark = import_own_script("benchmark")

    assert benchmark.main(["--quick", "--no-compile", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "chapter3_cuda.md").read_text().count("|") > 20
    assert (tmp_path / "chapter3_cuda.png").stat().st_size > 0


@pytest.mark.skipif(HAS_CUDA, reason="checks the message a machine without a GPU prints")
def test_block_sweep_says_it_needs_a_gpu_and_exits_0(capsys, import_own_script):
    block_sweep = import_own_script("block_sweep")

    assert block_sweep.main(["--log2-numel", "16"]) == 0
    assert "needs a CUDA GPU" in capsys.readouterr().out


@pytest.mark.cuda
def test_block_sweep_tiny_run_writes_its_tables_and_plot(tmp_path, import_own_script):
    block_sweep = import_own_script("block_sweep")

    assert block_sweep.main(["--log2-numel", "16", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "chapter3_block_sweep.md").read_text()
    assert "| 1024 |" in table and "| 64x4 |" in table
    assert (tmp_path / "chapter3_block_sweep.png").stat().st_size > 0


# ---- NVRTC in process (iterate_nvrtc.py) ---------------------------------------------------------


def test_nvrtc_compiles_the_kernel_without_torch_headers(import_own_script):
    """The compile a notebook cell makes after each edit. Without a GPU: the CUBIN for sm_90."""
    iterate = import_own_script("iterate_nvrtc")
    compiled = iterate.compile_kernel(iterate.edited(1))
    if HAS_CUDA:
        assert callable(compiled)
    else:
        assert compiled[:4] == b"\x7fELF"  # a CUBIN is an ELF file


def test_nvrtc_reports_the_line_of_a_compile_error(import_own_script):
    iterate = import_own_script("iterate_nvrtc")
    broken = iterate.KERNEL.replace("const float s =", "const float s = undeclared +")
    # NVRTC's own message: the file, the line (4: the kernel's first line is line 2) and what.
    with pytest.raises(RuntimeError, match=r'\(4\): error: identifier "undeclared" is undefined'):
        iterate.compile_kernel(broken)


@pytest.mark.cuda
def test_nvrtc_kernel_matches_torch_relu(import_own_script):
    iterate = import_own_script("iterate_nvrtc")
    # Not bit for bit: the compiler fuses x * s + b into one multiply-add, rounded once, where
    # PyTorch rounds the product first, so the last bit may differ (4.8e-07 on the H200)...
    assert iterate.check_on_gpu() <= 1e-6
    # ...unless told not to fuse: then it rounds where PyTorch does.
    assert iterate.check_on_gpu(["--fmad=false"]) == 0.0


@pytest.mark.cuda
def test_nvrtc_kernel_takes_an_int_scale(import_own_script):
    """A Python int would reach the kernel's double as a 4-byte C int: the launcher converts."""
    iterate = import_own_script("iterate_nvrtc")
    x = torch.randn(64, 33, device="cuda")
    bias = torch.randn(33, device="cuda")
    got = iterate.fused_bias_relu(iterate.compile_kernel(), x, bias, 2)
    torch.testing.assert_close(got, torch.relu(x * 2 + bias), atol=1e-6, rtol=1e-6)


@pytest.mark.cuda
def test_nvrtc_kernel_rejects_what_it_cannot_index(import_own_script):
    iterate = import_own_script("iterate_nvrtc")
    kernel = iterate.compile_kernel()
    x = torch.randn(4, 3, device="cuda", dtype=torch.float64)
    with pytest.raises(RuntimeError, match="x must be a 2-D float32 CUDA tensor"):
        iterate.fused_bias_relu(kernel, x, torch.randn(3, device="cuda"), 0.5)
    with pytest.raises(RuntimeError, match=r"bias must be \(3,\) float32 on cuda"):
        iterate.fused_bias_relu(kernel, x.float(), torch.randn(3), 0.5)  # bias on the CPU
    with pytest.raises(RuntimeError, match=r"bias must be \(3,\) float32"):
        iterate.fused_bias_relu(kernel, x.float(), torch.randn(4, device="cuda"), 0.5)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))
