// fused_bias_relu's forward, y = relu(x * scale + bias), for NVRTC: nvrtc_fused_bias_relu.py reads
// this file as text and compiles it inside the Python process (torch.cuda._compile_kernel), one
// instantiation per dtype and vector width, on first use. setup.py never sees it. Only CUDA's own
// headers: NVRTC compiles it in a fraction of a second. Lesson: chapter 5,
// further/kernel_languages.md. The same kernel as csrc/cuda/fused_bias_relu.cu (chapter 3's v4).

#include "nvrtc_common.cuh"  // OpMath, Vec

// Thread (tx, ty) owns kVec neighbouring columns: it loads their bias once and walks the rows a
// grid's height apart. Sizes are int: _compile_kernel passes a Python int as a 32-bit C int (the
// op refuses 2^31 elements or more); a float arrives as a double.
template <typename T, int kVec>
__global__ void fused_bias_relu_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                                       T* __restrict__ y, int rows, int vec_cols, double scale) {
  using V = Vec<T, kVec>;
  using opmath_t = typename OpMath<T>::type;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= vec_cols) return;
  const V b = reinterpret_cast<const V*>(bias)[col];
  const opmath_t s = static_cast<opmath_t>(scale);
  for (long long row = blockIdx.y * blockDim.y + threadIdx.y; row < rows;
       row += static_cast<long long>(gridDim.y) * blockDim.y) {
    const V in = reinterpret_cast<const V*>(x)[row * vec_cols + col];
    V out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const opmath_t v = OpMath<T>::load(in.val[k]) * s + OpMath<T>::load(b.val[k]);
      out.val[k] = OpMath<T>::store(v < opmath_t(0) ? opmath_t(0) : v);  // NaN stays NaN
    }
    reinterpret_cast<V*>(y)[row * vec_cols + col] = out;
  }
}
