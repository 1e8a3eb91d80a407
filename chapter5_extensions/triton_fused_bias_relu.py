"""custom_ops' fused_bias_relu, y = relu(x * scale + bias), and its backward written in Triton
instead of CUDA C++, registered with torch.library.triton_op so that torch.compile sees the
kernels inside it (the lesson: part3_shipping.md, "The same op in Triton"; tests: test_triton.py).

    python chapter5_extensions/triton_fused_bias_relu.py   # one check against plain PyTorch

Without a CUDA device the kernels run in Triton's interpreter (numpy on the CPU): slowly, but the
same code, which is how CI tests them.
"""

import os
import sys

import torch
from torch import Tensor

# No CUDA device: Triton's interpreter. It must be chosen before triton is imported, because
# Triton's own library (tl.zeros, tl.sum) is @triton.jit code decorated at that import, and the
# interpreter cannot call a kernel compiled for the GPU. An explicit TRITON_INTERPRET wins: =1 on
# a GPU machine makes the interpreter a debugger (print() and breakpoints work inside a kernel).
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

INTERPRETED = triton.knobs.runtime.interpret

# ---- the kernels --------------------------------------------------------------------------------


@triton.jit
def opmath(v):
    """The type a value computes in, as ATen's opmath_type: float64 stays, the rest is float32."""
    return v.to(tl.float64 if v.dtype == tl.float64 else tl.float32)


# Forward. A program owns a tile of BLOCK_M rows x BLOCK_N columns of the (rows, cols) matrix x
# is seen as: it loads its BLOCK_N biases once and broadcasts them down the tile, so no element
# divides its index by cols to find its column (chapter 3's v4, a block per tile). Triton notes at
# launch which integer arguments are multiples of 16 and which pointers are 16-byte aligned; where
# cols is such a multiple, every row starts on a 16-byte boundary and loads and stores are 16 bytes.
# The tiles are numbered along the rows (the column tiles of one band of rows are neighbours), so
# the programs running at any moment read whole rows: numbered down the columns instead, they all
# read the same stripe of every row, and the op ran at 95% of the copy floor on the H100, not 100%
# (further/tile_order.md).
@triton.jit
def fused_bias_relu_kernel(
    x_ptr,
    bias_ptr,
    y_ptr,
    rows,
    cols,
    scale: tl.float64,  # a Python float arrives as float32 unless the kernel asks for more
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    col_tiles = tl.cdiv(cols, BLOCK_N)
    tile = tl.program_id(0)
    row = (tile // col_tiles) * BLOCK_M + tl.arange(0, BLOCK_M)
    col = (tile % col_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
    bias = opmath(tl.load(bias_ptr + col, mask=col < cols))
    offsets = row.to(tl.int64)[:, None] * cols + col[None, :]  # 64-bit: x may pass 2^31 elements
    mask = (row < rows)[:, None] & (col < cols)[None, :]
    x = opmath(tl.load(x_ptr + offsets, mask=mask))
    v = x * tl.cast(scale, x.dtype) + bias[None, :]
    y = tl.where(v < 0, 0, v)  # not tl.maximum(v, 0): a NaN stays NaN, as in the C++ kernels
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


# Backward, first pass. Program (j, split) walks rows_per_split rows of column tile j, BLOCK_M at a
# time: it reads grad_y and y once, writes grad_x once, and keeps the tile's column sums in
# registers. The column tile is the grid's first axis, the one that changes fastest, so the
# programs in flight cover whole rows, as the forward's tiles do. It then writes one partial sum per column for its split. No atomics: the partials
# are added by the second kernel in a fixed order, so the bias gradient is the same bits on every
# run.
@triton.jit
def fused_bias_relu_backward_kernel(
    grad_y_ptr,
    y_ptr,
    grad_x_ptr,
    partials_ptr,  # (splits, cols) in the type the sums accumulate in: float32, or float64
    rows,
    cols,
    rows_per_split,
    scale: tl.float64,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    col = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    split = tl.program_id(1)
    acc_type = partials_ptr.dtype.element_ty
    sums = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_type)
    start = split.to(tl.int64) * rows_per_split
    end = tl.minimum(start + rows_per_split, rows)
    # `while`, not `for start in range(start, end, BLOCK_M)`: Triton 3.6's interpreter cannot take
    # a bound that is a kernel argument in range() under numpy 2.4 (triton-lang/triton#9171).
    while start < end:
        row = start + tl.arange(0, BLOCK_M)
        offsets = row[:, None] * cols + col[None, :]
        mask = (row < rows)[:, None] & (col < cols)[None, :]
        grad_y = tl.load(grad_y_ptr + offsets, mask=mask, other=0).to(acc_type)
        y = tl.load(y_ptr + offsets, mask=mask, other=0).to(acc_type)
        # Zero where y <= 0, not "keep where y > 0": a NaN output passes its gradient on.
        active_grad = tl.where(y <= 0, 0, grad_y)
        sums += active_grad
        grad_x = active_grad * tl.cast(scale, acc_type)
        tl.store(grad_x_ptr + offsets, grad_x.to(grad_x_ptr.dtype.element_ty), mask=mask)
        start += BLOCK_M
    tl.store(partials_ptr + split.to(tl.int64) * cols + col, tl.sum(sums, axis=0), mask=col < cols)


# Backward, second pass: grad_bias[c] = the sum of partials[:, c], always in the same order. At
# most MAX_SPLITS partials a column, so the loop's length is known when the kernel compiles and
# static_range unrolls it: all its loads are in flight at once, where a loop that waits for each
# load in turn would take microseconds per step on the few programs this pass has (one per
# BLOCK_N columns). Rows past `splits` are masked off: they move no memory. The CUDA kernel saves
# this launch by letting the last block of a column strip add the partials (an atomic counter and
# two fences).
@triton.jit
def sum_partials_kernel(
    partials_ptr,
    grad_bias_ptr,
    splits,
    cols,
    MAX_SPLITS: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    col = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    sums = tl.zeros((BLOCK_S, BLOCK_N), dtype=partials_ptr.dtype.element_ty)
    for start in tl.static_range(0, MAX_SPLITS, BLOCK_S):
        split = start + tl.arange(0, BLOCK_S)
        offsets = split.to(tl.int64)[:, None] * cols + col[None, :]
        mask = (split < splits)[:, None] & (col < cols)[None, :]
        sums += tl.load(partials_ptr + offsets, mask=mask, other=0)
    grad_bias = tl.sum(sums, axis=0)
    tl.store(grad_bias_ptr + col, grad_bias.to(grad_bias_ptr.dtype.element_ty), mask=col < cols)


# ---- launch parameters --------------------------------------------------------------------------

# A tile of 2,048 elements for 4 warps: 16 a thread, four 16-byte vectors of float32 in flight
# per tensor. Rows narrower than 256 columns get taller tiles, so no lane idles.
TILE = 2048
NUM_WARPS = 4
# The backward's row splits: at least 256 rows each, at most 512 of them. Each split writes and
# the second pass reads one partial per column: 8 bytes against at least 256 x 12 for the three
# big tensors (0.3% or less). At 2^28 float32 elements in rows of 1,024: 512 splits of 512 rows,
# 2,048 programs for the first pass, 64 for the second (8 unrolled loads of 64 x 16 partials each).
ROWS_PER_SPLIT = 256
MAX_SPLITS = 512
PARTIALS_BLOCK_S, PARTIALS_BLOCK_N = 64, 16


def tile_shape(cols: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N): up to 256 columns a tile, as many rows as make TILE elements."""
    block_n = min(triton.next_power_of_2(cols), 256)
    return TILE // block_n, block_n


def launcher(kernel):
    """wrap_triton(kernel): a launch torch.compile can trace. wrap_triton accepts only the
    JITFunction that triton.jit returns for a GPU; under the interpreter, the kernel itself."""
    return kernel if INTERPRETED else wrap_triton(kernel)


def check_device(t: Tensor, op: str, name: str) -> None:
    torch._check(
        t.is_cuda or INTERPRETED,
        lambda: (
            f"{op}: {name} must be a CUDA tensor, got {t.device} (Triton compiles for the GPU; "
            "its interpreter runs on the CPU when TRITON_INTERPRET=1 is set before triton is "
            "imported)"
        ),
    )


def check_floating(t: Tensor, op: str, name: str) -> None:
    torch._check(
        t.dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16),
        lambda: (
            f"{op}: {name} must be a floating-point tensor (float32, float64, float16 or "
            f"bfloat16), got {t.dtype}"
        ),
    )


def check_like(a: Tensor, b: Tensor, op: str, name_a: str, name_b: str) -> None:
    torch._check(
        a.device == b.device,
        lambda: (
            f"{op}: {name_a} and {name_b} must be on the same device, got {a.device} and {b.device}"
        ),
    )
    torch._check(
        a.dtype == b.dtype,
        lambda: (
            f"{op}: {name_a} and {name_b} must have the same dtype, got {a.dtype} and {b.dtype}"
        ),
    )


# ---- the operators ------------------------------------------------------------------------------


@triton_op("course_triton::fused_bias_relu", mutates_args=())
def fused_bias_relu(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    """relu(x * scale + bias). x: (..., F), any strides; bias: (F,), same dtype and device; float32,
    float64, float16 or bfloat16 (half types compute in float32). Returns a contiguous tensor."""
    op = "fused_bias_relu"
    check_floating(x, op, "x")
    check_like(x, bias, op, "x", "bias")
    check_device(x, op, "x")
    torch._check(
        x.dim() >= 1, lambda: f"{op}: x must have at least 1 dimension, got a 0-dim tensor"
    )
    torch._check(
        bias.shape == (x.shape[-1],),
        lambda: (
            f"{op}: bias must have shape ({x.shape[-1]},) to match x.size(-1), "
            f"got {tuple(bias.shape)}"
        ),
    )
    # Any strides in, rows of contiguous memory for the kernel: free when x already is contiguous.
    x, bias = x.contiguous(), bias.contiguous()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    cols = x.shape[-1]
    if x.numel() == 0:
        return y
    rows = x.numel() // cols
    block_m, block_n = tile_shape(cols)
    grid = (triton.cdiv(rows, block_m) * triton.cdiv(cols, block_n),)
    launcher(fused_bias_relu_kernel)[grid](
        x, bias, y, rows, cols, scale, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=NUM_WARPS
    )
    return y


@triton_op("course_triton::fused_bias_relu_backward", mutates_args=())
def fused_bias_relu_backward(grad_y: Tensor, y: Tensor, scale: float) -> tuple[Tensor, Tensor]:
    """grad_x = grad_y * scale where y is not <= 0 (else 0), grad_bias = the column sums of
    grad_y there, as custom_ops' backward: both in y's dtype, computed and summed in float32
    (float64 for float64). y, grad_y: (..., F), any strides; grad_bias: (F,)."""
    op = "fused_bias_relu_backward"
    check_floating(y, op, "y")
    check_like(y, grad_y, op, "y", "grad_y")
    check_device(y, op, "y")
    torch._check(
        y.shape == grad_y.shape,
        lambda: (
            f"{op}: y and grad_y must have the same shape, got {tuple(y.shape)} and "
            f"{tuple(grad_y.shape)}"
        ),
    )
    torch._check(
        y.dim() >= 1, lambda: f"{op}: y must have at least 1 dimension, got a 0-dim tensor"
    )
    # Autograd often hands over an expanded or transposed gradient: copied here, once.
    y, grad_y = y.contiguous(), grad_y.contiguous()
    grad_x = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    cols = y.shape[-1]
    rows = 0 if cols == 0 else y.numel() // cols
    if rows == 0:  # no rows: the bias gradient is all zeros
        return grad_x, torch.zeros(cols, dtype=y.dtype, device=y.device)
    block_m, block_n = tile_shape(cols)
    splits = min(triton.cdiv(rows, ROWS_PER_SPLIT), MAX_SPLITS)
    rows_per_split = triton.cdiv(triton.cdiv(rows, splits), block_m) * block_m
    splits = triton.cdiv(rows, rows_per_split)
    acc_dtype = torch.float64 if y.dtype == torch.float64 else torch.float32
    partials = torch.empty(splits, cols, dtype=acc_dtype, device=y.device)
    grad_bias = torch.empty(cols, dtype=y.dtype, device=y.device)
    launcher(fused_bias_relu_backward_kernel)[(triton.cdiv(cols, block_n), splits)](
        grad_y,
        y,
        grad_x,
        partials,
        rows,
        cols,
        rows_per_split,
        scale,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=NUM_WARPS,
    )
    launcher(sum_partials_kernel)[(triton.cdiv(cols, PARTIALS_BLOCK_N),)](
        partials,
        grad_bias,
        splits,
        cols,
        MAX_SPLITS=MAX_SPLITS,
        BLOCK_S=PARTIALS_BLOCK_S,
        BLOCK_N=PARTIALS_BLOCK_N,
    )
    return grad_x, grad_bias


# ---- autograd -----------------------------------------------------------------------------------


def setup_context(ctx, inputs, output) -> None:
    _, _, scale = inputs
    ctx.save_for_backward(output)
    ctx.scale = scale


def backward(ctx, grad_y: Tensor):
    (y,) = ctx.saved_tensors
    grad_x, grad_bias = fused_bias_relu_backward(grad_y, y, ctx.scale)
    need_x, need_bias, _ = ctx.needs_input_grad
    return grad_x if need_x else None, grad_bias if need_bias else None, None


fused_bias_relu.register_autograd(backward, setup_context=setup_context)


def refuse_double_backward(ctx, *grads):
    raise RuntimeError(
        "fused_bias_relu_backward: double backward is not implemented (the backward kernels are "
        "not differentiable)"
    )


fused_bias_relu_backward.register_autograd(
    refuse_double_backward, setup_context=lambda ctx, inputs, output: None
)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, bias = torch.randn(100, 300, device=device), torch.randn(300, device=device)
    torch.testing.assert_close(fused_bias_relu(x, bias, 0.5), torch.relu(x * 0.5 + bias))
    print(f"fused_bias_relu matches torch.relu(x * 0.5 + bias) on {device}", end="")
    print(" (Triton's interpreter)" if INTERPRETED else "")
