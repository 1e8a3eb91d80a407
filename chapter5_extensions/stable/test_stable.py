"""Tests for custom_ops_stable, the stable-ABI package: values against plain PyTorch, any strides,
gradients and gradcheck, opcheck, bad inputs by their messages, the same bits as custom_ops on
CUDA, the ABI audit, and the promise itself: the wheel built here runs on a newer torch.

    python chapter5_extensions/stable/test_stable.py      # on its own
    pytest chapter5_extensions/stable                     # or under pytest

CUSTOM_OPS_STABLE_INSTALLED=1 tests the installed package instead of building it in place (what
check_wheel.py does in a second venv with a newer torch).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.library import opcheck

HERE = Path(__file__).resolve().parent
INSTALLED = os.environ.get("CUSTOM_OPS_STABLE_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, str(HERE))
    import build_stable

    build_stable.build_stable()
import custom_ops_stable  # noqa: E402  (importable once built)

ops = torch.ops.custom_ops_stable

# One rounding of the output dtype (the kernels compute half types in float); sums get more room.
TOLERANCES = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}
DTYPES = list(TOLERANCES)
# Empty, one element, odd, rows that are not whole 16-byte vectors, and a large one whose
# 2^20 + 3 elements leave a tail after the last whole vector.
SHAPES = [(0,), (1,), (7,), (3, 0), (31, 17), (2, 3, 65), (33, 128), (2**20 + 3,)]


def random(shape, dtype, device, generator, requires_grad=False) -> torch.Tensor:
    t = torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)
    return t.requires_grad_(requires_grad)


def away_from_the_kink(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """x moved so that no x * scale + bias is within 0.05 of 0, where a low precision forward and
    the float64 reference may round to different sides of relu's kink."""
    with torch.no_grad():
        z = x.double() * scale + bias.double()
        x.copy_(x.double() + torch.where(z.abs() < 0.05, 0.1 * torch.sign(z + 1e-30) / scale, 0))
    return x


# ---- the references: plain PyTorch, the specification of each op -------------------------------


def reference_relu(x):
    return torch.relu(x.double())


def reference_fused_bias_relu(x, bias, scale):
    return torch.relu(x.double() * scale + bias.double())


# ---- the build ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["relu", "relu_backward", "fused_bias_relu", "fused_bias_relu_backward"]
)
def test_every_op_has_a_cpu_kernel_a_fake_and_an_autograd_formula(name):
    for key in ["CPU", "Meta", "Autograd"]:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"custom_ops_stable::{name}", key)


def test_cuda_kernels_are_built_where_torch_and_nvcc_allow():
    """In-place builds compile the .cu files wherever nvcc is (CI included); the wheel for the
    cross-version check is CPU-only, and so is a CPU-only torch."""
    if INSTALLED:
        pytest.skip("the installed wheel is the CPU-only build of check_wheel.py")
    from torch.utils.cpp_extension import CUDA_HOME

    can_build = torch.version.cuda is not None and CUDA_HOME is not None
    if os.environ.get("USE_CUDA") in ("0", "1"):
        can_build = os.environ["USE_CUDA"] == "1"
    assert custom_ops_stable.built_with_cuda() == can_build


# ---- values, any shape and strides -------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fused_bias_relu_and_its_gradients_match_pytorch(dtype, shape, device, generator):
    bias = random(shape[-1:], dtype, device, generator, requires_grad=True)
    x = away_from_the_kink(random(shape, dtype, device, generator), bias, 0.7).requires_grad_()
    y = custom_ops_stable.fused_bias_relu(x, bias, 0.7)
    grad_y = random(shape, dtype, device, generator)
    grads = torch.autograd.grad(y, (x, bias), grad_y)
    y_ref = reference_fused_bias_relu(x, bias, 0.7)
    grads_ref = torch.autograd.grad(y_ref, (x, bias), grad_y.double())
    assert y.dtype == dtype and y.is_contiguous()
    torch.testing.assert_close(y, y_ref.to(dtype), **TOLERANCES[dtype])
    torch.testing.assert_close(grads[0], grads_ref[0].to(dtype), **TOLERANCES[dtype])
    # The bias gradient sums a column in float: 2^-24 relative per addition on top.
    rows = x.numel() // max(1, shape[-1])
    sum_atol = TOLERANCES[dtype]["atol"] + rows * 2e-7
    torch.testing.assert_close(
        grads[1], grads_ref[1].to(dtype), rtol=TOLERANCES[dtype]["rtol"], atol=sum_atol
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_relu_and_its_gradient_match_pytorch(dtype, shape, device, generator):
    x = random(shape, dtype, device, generator, requires_grad=True)
    y = custom_ops_stable.relu(x)
    grad_y = random(shape, dtype, device, generator)
    (grad,) = torch.autograd.grad(y, x, grad_y)
    # relu is exact in every dtype: no rounding, so no tolerance.
    assert torch.equal(y, torch.relu(x))
    assert torch.equal(grad, torch.where(x > 0, grad_y, 0))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_relu_matches_torch_including_nan_and_inf(dtype, device):
    values = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 0.5, 2.0]
    x = torch.tensor(values, device=device, dtype=dtype, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    grad_y = torch.arange(1.0, 8.0, device=device, dtype=dtype)
    y, y_ref = custom_ops_stable.relu(x), torch.relu(x_ref)
    torch.testing.assert_close(y, y_ref, equal_nan=True)
    torch.testing.assert_close(
        torch.autograd.grad(y, x, grad_y)[0], torch.autograd.grad(y_ref, x_ref, grad_y)[0]
    )


VIEWS = {
    "transposed": ((65, 64), lambda t: t.t()),
    "every_other_column": ((64, 130), lambda t: t[:, ::2]),
    "misaligned": ((64 * 65 + 1,), lambda t: t[1:].view(64, 65)),  # contiguous, off 16 bytes
    "expanded": ((1, 65), lambda t: t.expand(64, -1)),  # what y.sum() sends back is expanded
}


def random_view(view, dtype, device, generator) -> torch.Tensor:
    base_shape, make = VIEWS[view]
    return make(random(base_shape, dtype, device, generator))


@pytest.mark.parametrize("view", VIEWS, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_any_strides_in_contiguous_out(view, dtype, device, generator):
    x = random_view(view, dtype, device, generator)
    assert x.shape == (64, 65) and (view == "misaligned" or not x.is_contiguous())
    bias = random((65,), dtype, device, generator)
    y = custom_ops_stable.fused_bias_relu(x, bias, 0.5)
    y_ref = reference_fused_bias_relu(x, bias, 0.5)
    assert y.is_contiguous()
    torch.testing.assert_close(y, y_ref.to(dtype), **TOLERANCES[dtype])
    assert torch.equal(custom_ops_stable.relu(x), torch.relu(x))
    grad_y = random_view(view, dtype, device, generator)
    grad_x, grad_bias = ops.fused_bias_relu_backward(grad_y, y, 0.5)
    active = (y > 0).double()
    torch.testing.assert_close(
        grad_x, (grad_y.double() * active * 0.5).to(dtype), **TOLERANCES[dtype]
    )
    # 64 rows summed in float, then rounded to dtype once.
    torch.testing.assert_close(
        grad_bias, (grad_y.double() * active).sum(0).to(dtype), **TOLERANCES[dtype]
    )


# ---- gradcheck and opcheck ---------------------------------------------------------------------


def test_gradcheck_in_float64(device, generator):
    x = random((5, 9), torch.float64, device, generator, requires_grad=True)
    bias = random((9,), torch.float64, device, generator, requires_grad=True)
    away_from_the_kink(x, bias, 0.7)
    assert torch.autograd.gradcheck(
        lambda a, b: custom_ops_stable.fused_bias_relu(a, b, 0.7), (x, bias)
    )
    assert torch.autograd.gradcheck(custom_ops_stable.relu, (x,))


def test_no_double_backward(device, generator):
    """The backward ops have no autograd formula of their own: a second derivative is refused."""
    x = random((4, 3), torch.float64, device, generator, requires_grad=True)
    bias = random((3,), torch.float64, device, generator, requires_grad=True)
    for name, y in [
        ("relu_backward", custom_ops_stable.relu(x)),
        ("fused_bias_relu_backward", custom_ops_stable.fused_bias_relu(x, bias, 0.5)),
    ]:
        (grad,) = torch.autograd.grad((y * y).sum(), x, create_graph=True)
        with pytest.raises(RuntimeError, match=f"custom_ops_stable::{name} is not differentiable"):
            torch.autograd.grad(grad.sum(), x)


def opcheck_cases(device, generator):
    x = random((6, 10), torch.float32, device, generator, requires_grad=True)
    bias = random((10,), torch.float32, device, generator, requires_grad=True)
    y = random((6, 10), torch.float32, device, generator).relu()
    grad_y = random((6, 10), torch.float32, device, generator)
    return {
        "relu": (ops.relu.default, (x,)),
        "relu_on_a_view": (ops.relu.default, (x.detach().t().requires_grad_(),)),
        "relu_backward": (ops.relu_backward.default, (grad_y, y)),
        "fused_bias_relu": (ops.fused_bias_relu.default, (x, bias, 0.5)),
        "fused_bias_relu_backward": (ops.fused_bias_relu_backward.default, (grad_y, y, 0.5)),
    }


@pytest.mark.parametrize(
    "name",
    ["relu", "relu_on_a_view", "relu_backward", "fused_bias_relu", "fused_bias_relu_backward"],
)
def test_opcheck(name, device, generator):
    """PyTorch's own checker: schema, fake kernel, autograd registration, aot_dispatch."""
    op, args = opcheck_cases(device, generator)[name]
    opcheck(op, args)


def test_torch_compile_traces_the_ops_without_a_graph_break(device, generator):
    """fullgraph=True: the fake kernels and the Python autograd let Dynamo and AOTAutograd trace
    through both ops (aot_eager: the traced graph runs eagerly, no inductor compile)."""
    x = random((8, 16), torch.float32, device, generator, requires_grad=True)
    bias = random((16,), torch.float32, device, generator, requires_grad=True)

    def layer(a, b):
        return custom_ops_stable.relu(custom_ops_stable.fused_bias_relu(a, b, 0.5) - 0.25)

    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    y, y_ref = compiled(x, bias), layer(x, bias)
    assert torch.equal(y, y_ref)
    grads = torch.autograd.grad(y.sum(), (x, bias))
    grads_ref = torch.autograd.grad(y_ref.sum(), (x, bias))
    assert all(torch.equal(g, r) for g, r in zip(grads, grads_ref, strict=True))


# ---- bad input, by its message (checked before any launch) -------------------------------------


def test_rejects_an_integer_tensor(device):
    with pytest.raises(RuntimeError, match=r"relu: x must be a floating-point tensor .*got Long"):
        custom_ops_stable.relu(torch.arange(4, device=device))


def test_rejects_a_bias_of_the_wrong_shape(device):
    x = torch.zeros(3, 5, device=device)
    with pytest.raises(
        RuntimeError, match=r"fused_bias_relu: bias must have shape \(5,\).*got \[4\]"
    ):
        custom_ops_stable.fused_bias_relu(x, torch.zeros(4, device=device))


def test_rejects_a_bias_of_another_dtype(device):
    x = torch.zeros(3, 5, device=device)
    with pytest.raises(RuntimeError, match="fused_bias_relu: x and bias must have the same dtype"):
        custom_ops_stable.fused_bias_relu(x, torch.zeros(5, device=device, dtype=torch.float64))


def test_rejects_a_0_dim_x(device):
    x = torch.zeros((), device=device)
    with pytest.raises(RuntimeError, match="fused_bias_relu: x must have at least 1 dimension"):
        ops.fused_bias_relu(x, torch.zeros(1, device=device), 1.0)


def test_rejects_a_gradient_of_another_shape(device):
    with pytest.raises(RuntimeError, match=r"relu_backward: y and grad_y must have the same shape"):
        ops.relu_backward(torch.zeros(3, 4, device=device), torch.zeros(4, 3, device=device))


@pytest.mark.cuda
def test_rejects_cpu_bias_for_cuda_input():
    x = torch.zeros(3, 5, device="cuda")
    with pytest.raises(
        RuntimeError, match="x and bias must be on the same device, got cuda:0 and cpu"
    ):
        custom_ops_stable.fused_bias_relu(x, torch.zeros(5))


# ---- the same bits as custom_ops ---------------------------------------------------------------


def import_custom_ops(build: bool):
    """custom_ops from ../ (chapter 5's in-place build), or None with the reason."""
    sys.path.insert(0, str(HERE.parent))
    try:
        if build:
            import build_inplace

            build_inplace.build_inplace()
        import custom_ops
    except (ImportError, RuntimeError) as error:
        return None, f"custom_ops is not importable: {error}"
    return custom_ops, None


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(7,), (31, 17), (33, 128), (4096, 1023), (2**20 + 3,)], ids=str)
def test_matches_custom_ops_bit_for_bit(dtype, shape, device, generator):
    """Same kernels, same launches, same summation order: the same bits, forward and backward.
    On CUDA this builds custom_ops (minutes once); on the CPU it uses an existing build only."""
    if INSTALLED:
        pytest.skip("custom_ops is not installed next to the wheel")
    custom_ops, reason = import_custom_ops(build=device.type == "cuda")
    if custom_ops is None:
        pytest.skip(reason)
    if device.type == "cuda" and not custom_ops.built_with_cuda():
        pytest.skip("custom_ops was built without CUDA")
    x = random(shape, dtype, device, generator)
    bias = random(shape[-1:], dtype, device, generator)
    grad_y = random(shape, dtype, device, generator)
    assert torch.equal(custom_ops_stable.relu(x), custom_ops.relu(x))
    y = custom_ops_stable.fused_bias_relu(x, bias, 0.7)
    assert torch.equal(y, custom_ops.fused_bias_relu(x, bias, 0.7))
    mine = ops.fused_bias_relu_backward(grad_y, y, 0.7)
    theirs = torch.ops.custom_ops.fused_bias_relu_backward(grad_y, y, 0.7)
    assert torch.equal(mine[0], theirs[0]) and torch.equal(mine[1], theirs[1])


# ---- the ABI: the audit, and the wheel on a newer torch ----------------------------------------


def test_the_library_imports_only_the_stable_abi():
    import abi_audit

    result = abi_audit.audit(Path(custom_ops_stable._C.__file__))
    assert result.ok, result.report()
    assert result.allowed["stable C shim"], "no shim call at all: is this the right .so?"


@pytest.mark.slow
def test_the_audit_catches_an_unstable_symbol(tmp_path):
    """A 3-line .so that calls at::ones must fail the audit, or the audit proves nothing."""
    if INSTALLED:
        pytest.skip("runs beside the build, not in the second venv")
    import abi_audit

    result = abi_audit.audit(abi_audit.build_fixture(tmp_path))
    assert not result.ok
    assert any(name.startswith("at::_ops::ones::call") for name in result.forbidden)


@pytest.mark.slow
def test_the_wheel_built_here_runs_on_a_newer_torch(tmp_path):
    """check_wheel.py: a CPU wheel built against this torch, installed with torch 2.13 in a second
    venv, runs this file's CPU tests there. Skipped (outside CI) where the venv cannot be made."""
    if INSTALLED:
        pytest.skip("this is the run inside the second venv")
    result = subprocess.run(
        [sys.executable, str(HERE / "check_wheel.py")], capture_output=True, text=True
    )
    print(result.stdout[-6000:], result.stderr[-3000:])
    if result.returncode == 3 and not os.environ.get("CI"):
        pytest.skip(f"the second venv could not be created: {result.stdout.strip()[-300:]}")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]


def test_the_wheel_matrix_records_one_line_a_version_and_why_one_did_not_run(tmp_path, monkeypatch):
    """check_wheel.py --matrix (make stable-matrix), its checks replaced by canned results: a
    version that passed gives its torch and pytest summary, one pip could not install gives pip's
    reason and the constraint that capped it, and one that did not install fails the matrix."""
    if INSTALLED:
        pytest.skip("runs beside the build, not in the second venv")
    import check_wheel

    constraints = tmp_path / "constraints.txt"
    constraints.write_text("numpy<3\ntorch<=2.14.1\n")
    outputs = {
        "torch==2.14.1": (0, "run: torch 2.14.1+cpu, python 3.11\n===== 94 passed in 9.1s =====\n"),
        "torch==2.15.0": (3, "ERROR: Cannot install torch==2.15.0 because of a conflict\n"),
    }

    def fake_run(args, env=None, **kwargs):
        if args[1:] == ["-m", "pip", "config", "list"]:
            return subprocess.CompletedProcess(args, 0, f"global.constraint='{constraints}'\n", "")
        code, out = outputs[env["NEWER_TORCH"]]
        return subprocess.CompletedProcess(args, code, out, "")

    monkeypatch.setattr(check_wheel.subprocess, "run", fake_run)
    record = tmp_path / "matrix.txt"
    assert check_wheel.matrix(list(outputs), record) == 1
    lines = record.read_text().splitlines()
    assert lines[0].startswith("# custom_ops_stable's wheel")
    assert lines[1] == "torch==2.14.1: passed: torch 2.14.1+cpu, 94 passed in 9.1s"
    assert lines[2].startswith("torch==2.15.0: not installed here: Cannot install torch==2.15.0")
    assert f"pip's configured constraint: torch<=2.14.1 ({constraints})" in lines[2]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-rs"]))
