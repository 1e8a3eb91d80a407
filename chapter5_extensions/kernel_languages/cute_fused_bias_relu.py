"""fused_bias_relu's forward, y = relu(x * scale + bias), written in CuTe DSL (NVIDIA's Python DSL
for CUTLASS's CuTe): the kernel is Python over layouts, traced to MLIR and compiled by NVIDIA's
own compiler. Registered with torch.library as course_cute::fused_bias_relu, as the NVRTC op is.
Lesson: chapter 5, further/cute_dsl.md; tests: test_kernel_languages.py.

    pip install --no-deps nvidia-cutlass-dsl==4.3.5   # optional, 55.9 MiB (4.8.1: 92 MiB or more)
    python chapter5_extensions/kernel_languages/cute_fused_bias_relu.py    # needs a GPU

CuTe DSL 4.3.5 traces and compiles without a GPU but will not finish cute.compile without a
CUDA driver (it loads the result as it compiles), so CPU tensors take the PyTorch reference.
"""

import sys

import torch

if __name__ == "__main__" and not torch.cuda.is_available():
    # Said before importing CuTe DSL, which a machine without a GPU may not have installed.
    print("cute_fused_bias_relu.py needs a GPU: CuTe DSL compiles only with a CUDA driver")
    sys.exit(2)

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import fused_bias_relu_contract as contract
import nvrtc_fused_bias_relu as nvrtc
from cutlass.cute.runtime import from_dlpack
from torch import Tensor

# 128 threads as 4 rows of 32, each copying one 16-byte vector (or one element): a tile of 4 rows.
# Chosen by tune_cute_tiles.py over 1 to 8 rows a thread and 256 threads (its results file).
THREADS = (4, 32)
ROWS_PER_THREAD = 1


@cute.kernel
def fused_bias_relu_kernel(
    gX: cute.Tensor,  # ((tile rows, tile cols), (tiles down, tiles across)): the block's tile
    gB: cute.Tensor,  # bias as a (rows, cols) view with row stride 0, tiled like x
    gY: cute.Tensor,
    cY: cute.Tensor,  # the (row, col) coordinate of every element, tiled like x
    shape: cute.Shape,
    scale: cutlass.Float64,
    tiled_copy: cute.TiledCopy,
):
    thread, _, _ = cute.arch.thread_idx()
    block, _, _ = cute.arch.block_idx()
    # Consecutive blocks along a row of tiles, as x lies in memory. (In CuTe's own order, down
    # the columns first, the op with 4 rows a thread reached 90% of the copy floor at 2^28 in
    # float32 on an H200; in this one, 96%: docs/perf/h100/kernel_languages_cute*.md.)
    across = cute.size(gX, mode=[1, 1])
    tile = ((None, None), (block // across, block % across))  # all of this block's tile
    mine = tiled_copy.get_slice(thread)
    x, b, y, coords = (mine.partition_S(t[tile]) for t in (gX, gB, gY, cY))

    # One predicate per copy, from the copy's first coordinate: a 16-byte vector lies wholly
    # inside x or wholly past its edge, because the vector path needs cols % vector == 0.
    per_copy = cute.make_layout(
        (cute.size(coords.shape[0][1]), cute.size(coords, mode=[1]), cute.size(coords, mode=[2]))
    )
    inside = cute.make_rmem_tensor(per_copy, cutlass.Boolean)
    for r in cutlass.range_constexpr(cute.size(per_copy, mode=[0])):
        for m in cutlass.range_constexpr(cute.size(per_copy, mode=[1])):
            for n in cutlass.range_constexpr(cute.size(per_copy, mode=[2])):
                inside[r, m, n] = cute.elem_less(coords[(0, r), m, n], shape)

    x_regs, b_regs, y_regs = (cute.make_fragment_like(t) for t in (x, b, y))
    cute.copy(tiled_copy, x, x_regs, pred=inside)
    cute.copy(tiled_copy, b, b_regs, pred=inside)
    compute = cutlass.Float64 if gX.element_type == cutlass.Float64 else cutlass.Float32
    v = x_regs.load().to(compute) * compute(scale) + b_regs.load().to(compute)
    y_regs.store(cute.where(v < 0, cute.full_like(v, 0), v).to(gY.element_type))  # NaN stays NaN
    cute.copy(tiled_copy, y_regs, y, pred=inside)


@cute.jit
def fused_bias_relu_host(
    mX: cute.Tensor,
    mB: cute.Tensor,
    mY: cute.Tensor,
    scale: cutlass.Float64,
    stream: cuda.CUstream,
    vec: cutlass.Constexpr,
):
    """Host side, also traced: the tiling is worked out once per compile, not per call."""
    element = mX.element_type
    threads = cute.make_ordered_layout(THREADS, order=(1, 0))  # consecutive threads along a row
    values = cute.make_ordered_layout((ROWS_PER_THREAD, vec), order=(1, 0))
    copy_atom = cute.make_copy_atom(
        cute.nvgpu.CopyUniversalOp(), element, num_bits_per_copy=element.width * vec
    )
    tiled_copy = cute.make_tiled_copy_tv(copy_atom, threads, values)
    tiler, thread_values = cute.make_layout_tv(threads, values)
    # Broadcasting is a layout: bias seen as (rows, cols) with stride 0 down the rows.
    bias_2d = cute.make_tensor(mB.iterator, cute.make_layout(mX.shape, stride=(0, 1)))
    gY = cute.zipped_divide(mY, tiler)
    fused_bias_relu_kernel(
        cute.zipped_divide(mX, tiler),
        cute.zipped_divide(bias_2d, tiler),
        gY,
        cute.zipped_divide(cute.make_identity_tensor(mX.shape), tiler),
        mX.shape,
        scale,
        tiled_copy,
    ).launch(
        grid=[cute.size(gY, mode=[1]), 1, 1],
        block=[cute.size(thread_values, mode=[0]), 1, 1],
        stream=stream,
    )


def cute_tensor(t: Tensor, vec: int):
    """A CuTe view of a contiguous tensor whose sizes may change between calls without a new
    compile; the last dimension a multiple of `vec`, 16-byte aligned where vec > 1."""
    align = 16 if vec > 1 else t.element_size()
    view = from_dlpack(t.detach(), assumed_align=align)  # DLPack refuses tensors needing grad
    order = tuple(range(t.dim()))
    if t.dim() == 2:
        view = view.mark_compact_shape_dynamic(mode=0, stride_order=order)
    return view.mark_compact_shape_dynamic(mode=t.dim() - 1, stride_order=order, divisibility=vec)


# One cute.compile per (dtype, vector width), on first use (CuTe DSL also keeps the result in a
# file cache, CUTE_DSL_CACHE_DIR), and the compiled function bound to each GPU that calls it: a
# compiled function called directly runs in the context it first ran in.
_COMPILED: dict = {}
_ON_DEVICE: dict = {}


def compiled(dtype: torch.dtype, vec: int, device_index: int, views: tuple):
    """The compiled host function for one GPU; `views` (x, bias, y) give the first compile its
    types, not its sizes, which stay arguments."""
    if (dtype, vec) not in _COMPILED:
        x, bias, y = views
        _COMPILED[dtype, vec] = cute.compile(
            fused_bias_relu_host, x, bias, y, cutlass.Float64(1.0), cuda.CUstream(0), vec
        )
    if (dtype, vec, device_index) not in _ON_DEVICE:
        _ON_DEVICE[dtype, vec, device_index] = _COMPILED[dtype, vec].to(device_index)
    return _ON_DEVICE[dtype, vec, device_index]


@torch.library.custom_op("course_cute::fused_bias_relu", mutates_args=(), device_types="cuda")
def fused_bias_relu(x: Tensor, bias: Tensor, scale: float) -> Tensor:
    """y = relu(x * scale + bias): x (..., cols) on a GPU, any strides, float32, float64, float16
    or bfloat16; bias (cols,) of x's dtype and device. CPU tensors take the PyTorch reference."""
    nvrtc.check_inputs(x, bias)  # CuTe's shapes are 32-bit too
    x, bias = x.contiguous(), bias.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    cols = x.shape[-1]
    x2, y2 = x.view(-1, cols), y.view(-1, cols)
    vec = nvrtc.vector_width(x, bias, y)
    views = (cute_tensor(x2, vec), cute_tensor(bias, vec), cute_tensor(y2, vec))
    with torch.cuda.device(x.device):  # compiled there the first time; launched on its stream
        kernel = compiled(x.dtype, vec, x.device.index, views)
        kernel(
            *views, cutlass.Float64(scale), cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        )
    return y


fused_bias_relu.register_kernel("cpu")(nvrtc.cpu_kernel)  # the PyTorch reference, as NVRTC's


contract.register_fake_and_autograd(fused_bias_relu)


if __name__ == "__main__":
    nvrtc.demo(fused_bias_relu, None, "course_cute.fused_bias_relu")
