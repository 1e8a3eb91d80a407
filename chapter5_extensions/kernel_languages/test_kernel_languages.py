"""Tests of the kernel-languages comparison's own ops (further/kernel_languages.md) against plain
PyTorch: fused_bias_relu compiled by NVRTC (nvrtc_fused_bias_relu.py), the same kernel compiled and
launched with cuda.core (cuda_core_fused_bias_relu.py), and written in Helion and in CuTe DSL
(helion_ and cute_fused_bias_relu.py, where installed: both are optional); reduce_sum the same ways
but CuTe DSL, and in Triton (nvrtc_, cuda_core_, triton_ and helion_reduce_sum.py).

    python chapter5_extensions/kernel_languages/test_kernel_languages.py   # or with pytest

Without a GPU, NVRTC still compiles every instantiation (for sm_90), the NVRTC op's CPU kernel
(the PyTorch formula) is checked with opcheck, torch.compile and torch.export, and Helion's kernel
runs in Triton's interpreter; the GPU launches are skipped with the reason.
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import nvrtc_fused_bias_relu as nvrtc  # noqa: E402
import nvrtc_reduce_sum  # noqa: E402

# The ops under test, by way. Helion needs its package, and without a GPU Triton's interpreter,
# which must be chosen before anything imports triton (make test sets TRITON_INTERPRET=1 there).
OPS = {"nvrtc": nvrtc.fused_bias_relu}
if importlib.util.find_spec("helion") is None:
    HELION_SKIP = (
        "helion is not installed (optional: pip install --no-deps helion==1.5.0 filecheck)"
    )
elif (
    not torch.cuda.is_available()
    and "triton" in sys.modules
    and not os.environ.get("TRITON_INTERPRET")
):
    HELION_SKIP = "no CUDA device, and triton was imported before TRITON_INTERPRET=1 could be set"
else:
    import helion_fused_bias_relu

    HELION_SKIP = None
    OPS["helion"] = helion_fused_bias_relu.fused_bias_relu
# cuda.core (requirements.txt installs it): the NVRTC way's kernels, compiled and launched with
# NVIDIA's Python API instead of torch's private helper.
if importlib.util.find_spec("cuda.core") is None:
    CUDA_CORE_SKIP = "cuda.core is not installed (pip install cuda-core==1.2.2)"
else:
    import cuda_core_fused_bias_relu
    import cuda_core_reduce_sum

    CUDA_CORE_SKIP = None
    OPS["cuda_core"] = cuda_core_fused_bias_relu.fused_bias_relu
# CuTe DSL (optional, 59 MB): NVIDIA's Python DSL over CuTe layouts. It compiles only with a CUDA
# driver, so without a GPU its op's CPU kernel (the PyTorch reference) is all these tests reach.
if importlib.util.find_spec("cutlass") is None:
    CUTE_SKIP = (
        "CuTe DSL is not installed (optional: pip install --no-deps nvidia-cutlass-dsl==4.3.5)"
    )
else:
    import cute_fused_bias_relu

    CUTE_SKIP = None
    OPS["cute"] = cute_fused_bias_relu.fused_bias_relu
WAY = pytest.mark.parametrize("way", list(OPS), ids=str)

# reduce_sum, by way. Triton, like Helion, needs its interpreter for CPU tensors, chosen before
# triton is imported: make test does that on a machine without a GPU.
SUMS = {"nvrtc": nvrtc_reduce_sum.reduce_sum}
if torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") or "triton" not in sys.modules:
    import triton_reduce_sum

    SUMS["triton"] = triton_reduce_sum.reduce_sum
if HELION_SKIP is None:
    import helion_reduce_sum

    SUMS["helion"] = helion_reduce_sum.reduce_sum
if CUDA_CORE_SKIP is None:
    SUMS["cuda_core"] = cuda_core_reduce_sum.reduce_sum
SUM_WAY = pytest.mark.parametrize("way", list(SUMS), ids=str)


def op(way: str, device: torch.device | str):
    """The way's op for tensors on `device`. Helion writes Triton, which runs CPU tensors only in
    its interpreter: chosen without a GPU, not on a GPU machine. (`device` is a torch.device, and
    torch.device("cpu") == "cpu" is False: compare its type.)"""
    cpu = torch.device(device).type == "cpu"
    if way == "helion" and cpu and not helion_fused_bias_relu.INTERPRETED:
        pytest.skip("Helion on CPU tensors needs Triton's interpreter; this run compiles for a GPU")
    return OPS[way]


# One rounding of the output dtype (the kernel computes the half types in float32), and for
# float32 the last bits a fused multiply-add can change.
TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}
# 0 elements, one, odd widths (the one-element path), 16-byte rows (the vector path), 3-D.
SHAPES = [(0, 16), (1,), (7,), (3, 1023), (64, 1024), (5, 3, 40)]


def reference(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.relu(x.double() * scale + bias.double())


def random(shape, dtype, device, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)


@pytest.mark.parametrize("dtype", list(nvrtc.TYPE_NAMES), ids=str)
def test_every_instantiation_compiles_with_nvrtc(dtype):
    """The kernel for each dtype at both widths the op launches, compiled for the H100 (sm_90)."""
    for vec in (1, 16 // dtype.itemsize):
        assert len(nvrtc.compile_only(dtype, vec)) > 1000


@pytest.mark.parametrize("dtype", list(nvrtc.TYPE_NAMES), ids=str)
def test_every_instantiation_compiles_with_cuda_core(dtype):
    """The same kernels through cuda.core's Program, both ops, for sm_90: a CUBIN each."""
    if CUDA_CORE_SKIP:
        pytest.skip(CUDA_CORE_SKIP)
    for vec in (1, 16 // dtype.itemsize):
        assert cuda_core_fused_bias_relu.compile_only(dtype, vec)[:4] == b"\x7fELF"
        assert cuda_core_reduce_sum.compile_only(dtype, vec)[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@WAY
def test_matches_pytorch(way, device, shape, dtype):
    x = random(shape, dtype, device, seed=1)
    bias = random(shape[-1:], dtype, device, seed=2)
    y = op(way, device)(x, bias, 0.5)
    assert y.shape == x.shape and y.dtype == dtype and y.device == x.device
    torch.testing.assert_close(y, reference(x, bias, 0.5).to(dtype), **TOLERANCES[dtype])


@pytest.mark.parametrize(
    "view", ["transposed", "every_other_column", "one_element_in"], ids=lambda v: v
)
@WAY
def test_a_view_gives_what_its_copy_gives(way, device, view):
    base = random((64, 256), torch.float32, device, seed=3)
    x = {
        "transposed": base.t(),
        "every_other_column": base[:, ::2],
        "one_element_in": base.view(-1)[1:1025].view(4, 256),  # 4 bytes past a 16-byte boundary
    }[view]
    bias = random(x.shape[-1:], torch.float32, device, seed=4)
    torch.testing.assert_close(op(way, device)(x, bias, 0.5), reference(x, bias, 0.5).float())


@WAY
def test_nan_stays_nan(way, device):
    x = torch.tensor([[float("nan"), -1.0, 2.0, 3.0]], device=device)
    y = op(way, device)(x, torch.zeros(4, device=device), 1.0)
    assert y[0, 0].isnan() and y[0, 1:].tolist() == [0.0, 2.0, 3.0]


@WAY
def test_gradients_match_pytorch(way, device):
    x = random((33, 40), torch.float64, device, seed=5).requires_grad_()
    bias = random((40,), torch.float64, device, seed=6).requires_grad_()
    grad_y = random((33, 40), torch.float64, device, seed=7)
    got = torch.autograd.grad(op(way, device)(x, bias, 0.5), (x, bias), grad_y)
    expected = torch.autograd.grad(reference(x, bias, 0.5), (x, bias), grad_y)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize(
    ("x_shape", "bias_shape", "dtype", "message"),
    [
        (
            (4, 8),
            (8,),
            torch.int64,
            "x must be float32, float64, float16 or bfloat16, got torch.int64",
        ),
        (
            (4, 8),
            (7,),
            torch.float32,
            r"bias must have shape \(8,\), the last dimension of x, got \(7,\)",
        ),
    ],
    ids=["integer_x", "bias_of_the_wrong_length"],
)
@WAY
def test_rejects_bad_input_with_a_message_naming_op_and_argument(
    way, device, x_shape, bias_shape, dtype, message
):
    x = torch.zeros(x_shape, dtype=dtype, device=device)
    bias = torch.zeros(bias_shape, dtype=dtype, device=device)
    with pytest.raises(RuntimeError, match=f"fused_bias_relu: {message}"):
        OPS[way](x, bias, 0.5)


@pytest.mark.cuda
@WAY
def test_rejects_a_bias_on_another_device(way):
    x = torch.zeros(4, 8, device="cuda")
    with pytest.raises(RuntimeError, match=r"fused_bias_relu: bias must be torch.float32 on cuda"):
        OPS[way](x, torch.zeros(8), 0.5)


def test_refuses_2_31_elements_before_any_launch():
    """The NVRTC, cuda.core and CuTe DSL kernels take 32-bit sizes; meta tensors cost nothing."""
    x = torch.empty(2**21, 1024, device="meta")
    with pytest.raises(RuntimeError, match=r"at most 2\^31 - 1 elements \(32-bit sizes\)"):
        nvrtc.check_inputs(x, torch.empty(1024, device="meta"))
    with pytest.raises(RuntimeError, match=r"reduce_sum: at most 2\^31 - 1 elements"):
        nvrtc_reduce_sum.check_inputs(x)


def test_vector_width_is_16_bytes_only_where_rows_and_addresses_allow():
    x = torch.zeros(4, 64)
    bias, y = torch.zeros(64), torch.zeros(4, 64)
    assert nvrtc.vector_width(x, bias, y) == 4
    assert nvrtc.vector_width(x.half(), bias.half(), y.half()) == 8
    odd = torch.zeros(4, 63)
    assert nvrtc.vector_width(odd, torch.zeros(63), torch.zeros(4, 63)) == 1
    off = torch.zeros(257)[1:].view(4, 64)  # 4 bytes past a 16-byte boundary
    assert nvrtc.vector_width(off, bias, y) == 1


@WAY
def test_opcheck(way, device):
    """Schema, fake kernel, autograd registration and dispatch, as chapter 5's ops."""
    x = random((16, 32), torch.float32, device, seed=8).requires_grad_()
    bias = random((32,), torch.float32, device, seed=9).requires_grad_()
    torch.library.opcheck(op(way, device), (x, bias, 0.5))


@WAY
def test_compile_with_fullgraph_and_export_see_one_op(way, device):
    """The launch is Python that Dynamo never traces: one node of the op, in both."""

    fn = op(way, device)

    def model(x, bias):
        return fn(x, bias, 0.5) * 2

    x = random((8, 64), torch.float32, device, seed=10)
    bias = random((64,), torch.float32, device, seed=11)
    backend = "inductor" if torch.device(device).type == "cuda" else "aot_eager"
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    torch.testing.assert_close(compiled(x, bias), model(x, bias))
    program = torch.export.export(_Wrapper(fn), (x, bias))
    assert f"course_{way}.fused_bias_relu.default" in str(program.graph)
    torch.testing.assert_close(program.module()(x, bias), model(x, bias))


class _Wrapper(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x, bias):
        return self.op(x, bias, 0.5) * 2


@pytest.mark.cuda
@WAY
def test_a_cuda_graph_replays_the_launch(way):
    """Compiled and loaded before capture (cuModuleLoadData cannot run inside one); the launch
    goes to the current stream, so a graph records it and replays it on new data."""
    x = random((128, 512), torch.float32, "cuda", seed=12)
    bias = random((512,), torch.float32, "cuda", seed=13)
    fn = op(way, "cuda")
    fn(x, bias, 0.5)  # compile and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = fn(x, bias, 0.5)
    x.copy_(random((128, 512), torch.float32, "cuda", seed=14))
    graph.replay()
    torch.testing.assert_close(y, reference(x, bias, 0.5).float())


TWO_GPUS = pytest.mark.skipif(
    torch.cuda.device_count() < 2,
    reason=f"needs two GPUs (torch.cuda.device_count() is {torch.cuda.device_count()})",
)


@pytest.mark.cuda
@TWO_GPUS
@WAY
def test_runs_on_a_gpu_that_is_not_the_current_one(way):
    """Inputs on cuda:1 while cuda:0 is current, after a call on cuda:0: a way that compiles or
    loads for the first GPU it meets, or launches on the current device's stream, fails here."""
    fn = op(way, "cuda")
    for device in ("cuda:0", "cuda:1", "cuda:0"):
        x = random((64, 512), torch.float32, device, seed=15)
        bias = random((512,), torch.float32, device, seed=16)
        with torch.cuda.device(0):
            y = fn(x, bias, 0.5)
        assert y.device == x.device
        torch.testing.assert_close(y, reference(x, bias, 0.5).float())


# ---- reduce_sum ---------------------------------------------------------------------------------


def sum_op(way: str, device: torch.device | str):
    """The way's reduce_sum for tensors on `device`: Triton and Helion take CPU tensors only in
    Triton's interpreter."""
    interpreted = {"triton": "triton_reduce_sum", "helion": "helion_reduce_sum"}
    cpu = torch.device(device).type == "cpu"
    if cpu and way in interpreted and not sys.modules[interpreted[way]].INTERPRETED:
        pytest.skip(f"{way} on CPU tensors needs Triton's interpreter; this run compiles for a GPU")
    return SUMS[way]


@pytest.mark.parametrize("dtype", list(nvrtc.TYPE_NAMES), ids=str)
def test_every_reduce_sum_instantiation_compiles_with_nvrtc(dtype):
    for vec in (1, 16 // dtype.itemsize):
        assert len(nvrtc_reduce_sum.compile_only(dtype, vec)) > 1000


@pytest.mark.parametrize(
    ("dtype", "numel"),
    [(d, n) for d in TOLERANCES for n in (0, 1, 7, 1000, 100_003)]
    # 2^22 + 3: enough 16-byte vectors that some threads of the NVRTC kernel's full grid take a
    # step past its main loop, and Triton's programs more than one BLOCK each.
    + [(torch.float32, 2**22 + 3)],
    ids=str,
)
@SUM_WAY
def test_reduce_sum_matches_a_float64_sum(way, device, dtype, numel):
    x = random((numel,), dtype, device, seed=20)
    total = sum_op(way, device)(x)
    assert total.shape == () and total.dtype == dtype and total.device == x.device
    # Each float32 addition rounds by 2^-24 relative: that per term, and the output's rounding.
    atol = TOLERANCES[dtype]["atol"] + numel * 2**-24 * 4
    torch.testing.assert_close(
        total.double(), x.double().sum(), rtol=TOLERANCES[dtype]["rtol"], atol=atol
    )


@SUM_WAY
def test_reduce_sum_is_the_same_bits_every_run(way, device):
    x = random((3_000_001,), torch.float32, device, seed=21)
    first = sum_op(way, device)(x)
    for _ in range(3):
        assert torch.equal(sum_op(way, device)(x), first)


@SUM_WAY
def test_reduce_sum_of_views_and_its_gradient(way, device):
    base = random((300, 257), torch.float64, device, seed=22)
    for x in (base.t(), base[:, ::2], base.view(-1)[1:]):  # the last 8 bytes past 16-byte alignment
        torch.testing.assert_close(sum_op(way, device)(x), x.sum())
    x = base.clone().requires_grad_()
    (grad,) = torch.autograd.grad(
        sum_op(way, device)(x), x, torch.tensor(2.0, device=device, dtype=x.dtype)
    )
    assert torch.equal(grad, torch.full_like(x, 2.0))


@SUM_WAY
def test_reduce_sum_rejects_integers_with_a_message(way, device):
    with pytest.raises(
        RuntimeError,
        match=r"reduce_sum: x must be float32, float64, float16 or bfloat16, got torch\.int32",
    ):
        SUMS[way](torch.zeros(8, dtype=torch.int32, device=device))


@SUM_WAY
def test_reduce_sum_compiles_with_fullgraph_and_exports(way, device):
    fn = sum_op(way, device)
    if way == "triton" and torch.device(device).type == "cpu":
        pytest.skip("wrap_triton refuses the interpreter's kernels: nothing can trace the launch")
    x = random((64, 100), torch.float32, device, seed=23)
    backend = "inductor" if torch.device(device).type == "cuda" else "aot_eager"
    compiled = torch.compile(lambda x: fn(x) * 2, fullgraph=True, backend=backend)
    torch.testing.assert_close(compiled(x), fn(x) * 2)
    program = torch.export.export(_SumWrapper(fn), (x,))
    if way != "triton":  # a triton_op is exported as its kernels, not as one node
        assert f"course_{way}.reduce_sum.default" in str(program.graph)
    torch.testing.assert_close(program.module()(x), fn(x) * 2)


class _SumWrapper(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x) * 2


@SUM_WAY
def test_reduce_sum_opcheck(way, device):
    if way == "triton" and torch.device(device).type == "cpu":
        pytest.skip("opcheck runs fake tensors through wrap_triton, which refuses the interpreter")
    x = random((40, 30), torch.float32, device, seed=24).requires_grad_()
    torch.library.opcheck(sum_op(way, device), (x,))


@pytest.mark.cuda
@SUM_WAY
def test_reduce_sum_in_a_cuda_graph(way):
    x = random((1000, 1000), torch.float32, "cuda", seed=25)
    fn = sum_op(way, "cuda")
    fn(x)  # compile and load outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        total = fn(x)
    x.copy_(random((1000, 1000), torch.float32, "cuda", seed=26))
    graph.replay()
    torch.testing.assert_close(total.double(), x.double().sum(), rtol=1e-5, atol=1e-3)


@pytest.mark.cuda
@TWO_GPUS
@SUM_WAY
def test_reduce_sum_runs_on_a_gpu_that_is_not_the_current_one(way):
    for device in ("cuda:0", "cuda:1", "cuda:0"):
        x = random((100_003,), torch.float32, device, seed=27)
        with torch.cuda.device(0):
            total = sum_op(way, "cuda")(x)
        assert total.device == x.device
        torch.testing.assert_close(total.double(), x.double().sum(), rtol=1e-5, atol=1e-3)


def test_the_reduce_sum_profile_page_is_what_its_csv_says():
    """docs/perf/h100/kernel_languages_reduce_ncu.md's table is --summarize of the ncu CSV beside
    it: a row per kernel, float32 then bfloat16, each way in its own section."""
    import profile_reduce_sum_ways

    perf = HERE.parents[1] / "docs" / "perf" / "h100"
    table = profile_reduce_sum_ways.summarize(perf / "kernel_languages_reduce_ncu.csv")
    assert table in (perf / "kernel_languages_reduce_ncu.md").read_text()
    ways = {line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:]}
    assert ways == {name for _, name in profile_reduce_sum_ways.WAYS.values()}


def test_cute_dsl_runs_here_or_says_why():
    """CuTe DSL is optional: a machine without it skips its cases, and says which and why; with
    it, its op is registered with torch.library: both devices, the fake (Meta) and autograd."""
    if CUTE_SKIP:
        pytest.skip(CUTE_SKIP)
    entry = torch._C._dispatch_dump("course_cute::fused_bias_relu")
    for key in ("CPU", "CUDA", "Meta", "Autograd[alias]"):
        assert f"{key}: registered" in entry, entry


def test_helion_runs_here_or_says_why():
    """Helion is optional: a machine without it skips its cases, and says which and why."""
    if HELION_SKIP:
        pytest.skip(HELION_SKIP)
    assert "helion" in OPS


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
