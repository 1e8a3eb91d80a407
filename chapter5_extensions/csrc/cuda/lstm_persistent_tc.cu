// lstm_persistent_tc.cu: the forward recurrence of custom_ops::lstm in float16 and bfloat16 as
// one kernel launch whose products run on tensor cores, with W_hh held in registers for all T
// steps. lstm.cu tries it before lstm_persistent.cu's kernel (which multiplies on CUDA cores) and
// before its step loop. Lesson: further/lstm_layer_bounds.md; design:
// docs/design/lstm_fp16_persistent.md.
//
// Why: cuDNN's persistent algorithm, which PyTorch picks for float16 (and so under autocast), keeps
// the weights on chip and was up to 2x faster than our CUDA-core persistent kernel and our step
// loop. This kernel beats both of those, but not cuDNN's at B = 8..32 in float16: its steps are
// longer (further/lstm_layer_bounds.md, "The forward on tensor cores", says why). Here
// block s owns hidden units [8s, 8s + 8): the 32 rows of W_hh that make their gates, 64 KB at
// H = 1024, spread over the registers of its 8 warps as mma.sync A fragments. H / 8 blocks (128 at
// H = 1024) cover the layer, one per SM. A step is then: wait until every block has written
// h_{t-1}, copy h_{t-1} (B x H) from L2 into shared memory, multiply (each warp one eighth of K),
// add the warps' partial sums, do the pointwise part for the block's 8 units, write h_t, and
// signal. There is no grid-wide barrier: a counter that each block increments once a step (a
// release) and that each block waits on before reading h (an acquire) orders the steps.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers").
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/ops/zeros.h>

#include <climits>
#include <map>
#include <mutex>
#include <tuple>

#include "../lstm.h"  // lstm_paths()
#include "async_copy.cuh"
#include "cooperative.cuh"
#include "launch_utils.cuh"
#include "lstm_persistent.h"

namespace custom_ops::cuda {
namespace {

constexpr int kUnits = 8;  // hidden units a block owns: 32 gate rows, two m16 tiles
constexpr int kWarps = 8;  // split-K: warp w multiplies k in [w H/8, (w+1) H/8)
constexpr int kBlockThreads = 32 * kWarps;
constexpr int kMaxKTiles = 8;         // k-tiles of 16 a warp holds: H / 128 <= 8, H <= 1024
constexpr int kMaxBatchTiles = 8;     // batch tiles of 8 (mma's n): B <= 64
constexpr int kBatchTilesAtOnce = 4;  // batch tiles a warp multiplies before storing them
constexpr int kMaxBatch = 8 * kMaxBatchTiles;
constexpr int kMaxPairs = kUnits * kMaxBatch / kBlockThreads;  // (unit, batch) pairs a thread owns
constexpr int kRowPad = 8;  // elements added to each row of h in shared memory: no bank conflicts
static_assert(kBlockThreads % kUnits == 0, "a thread keeps one unit for all its pairs");

__host__ __device__ inline int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

// Shared memory: h_{t-1} as [batch rows, padded to 8][H + kRowPad], then the warps' partial sums
// as [warp][gate][batch row][unit] in float32.
struct TcLayout {
  int64_t partials, total;
};
__host__ __device__ inline TcLayout tc_layout(int batch, int hidden, int64_t scalar_size) {
  const int64_t rows = (batch + 7) / 8 * 8;
  TcLayout l{};
  l.partials = align16(rows * (hidden + kRowPad) * scalar_size);
  l.total = l.partials + static_cast<int64_t>(kWarps) * 4 * rows * kUnits * sizeof(float);
  return l;
}

// d += a b for one 16 x 8 x 16 tile: a (16 x 16, row-major) and b (16 x 8, column-major) in the
// mma.sync fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k16"), d in float32.
template <typename scalar_t>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// The step's signal and wait. A block's writes of h_t, then __syncthreads(), then one thread's
// release (a gpu-scope fence, then the increment): any block that acquires the count sees h_t.
// The count only grows (one per block per step), so step t waits for gridDim.x * t.
__device__ __forceinline__ void arrive(int* counter) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("fence.acq_rel.gpu;\nred.relaxed.gpu.global.add.s32 [%0], 1;\n" ::"l"(counter)
               : "memory");
#endif
}
__device__ __forceinline__ int load_acquire(const int* counter) {
  int value = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(value) : "l"(counter) : "memory");
#endif
  return value;
}

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// The forward's recurrence over all T steps, as lstm_persistent.h's lstm_forward_persistent:
// gates (T, B, 4H) holds x_t W_ih^T on entry and the activated gates on exit; cs (T + 1, B, H)
// holds c0 in cs[0] and gets every c_t; y (T, B, H) gets every h_t. H % 128 == 0, B <= 64.
template <typename scalar_t>
__global__ void __launch_bounds__(kBlockThreads, 1)
    lstm_forward_persistent_tc_kernel(scalar_t* __restrict__ gates,
                                      const scalar_t* __restrict__ w_hh,
                                      const float* __restrict__ bias,
                                      const scalar_t* __restrict__ h0, float* __restrict__ cs,
                                      scalar_t* __restrict__ y, int* __restrict__ arrived,
                                      int steps, int batch, int hidden) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, pair = lane % 4;  // the fragment coordinates of mma.sync
  const int j0 = blockIdx.x * kUnits;
  const int k_tiles = hidden / (16 * kWarps), batch_tiles = (batch + 7) / 8;
  const int rows = 8 * batch_tiles, pitch = hidden + kRowPad;
  const TcLayout layout = tc_layout(batch, hidden, sizeof(scalar_t));
  scalar_t* h_s = reinterpret_cast<scalar_t*>(smem);
  float* part = reinterpret_cast<float*>(smem + layout.partials);

  // W_hh's rows for this block as A fragments, in registers until the kernel ends. Tile 0 is
  // [gate i of units j0..j0+7; gate f of the same], tile 1 [g; o]: the lane holding row `group`
  // of a tile also holds row group + 8, so after the product one lane has all four gates of unit
  // j0 + group. Every index is a constant once the loops unroll, which keeps `a` in registers;
  // the k_tiles test leaves the tiles a smaller H does not use at zero.
  const int k_warp = warp * (hidden / kWarps);
  uint32_t a[2][kMaxKTiles][4];
#pragma unroll
  for (int tile = 0; tile < 2; ++tile) {
    const auto* lo = reinterpret_cast<const uint32_t*>(
        w_hh + (static_cast<int64_t>(2 * tile) * hidden + j0 + group) * hidden);
    const auto* hi = reinterpret_cast<const uint32_t*>(
        w_hh + (static_cast<int64_t>(2 * tile + 1) * hidden + j0 + group) * hidden);
#pragma unroll
    for (int kt = 0; kt < kMaxKTiles; ++kt) {
      const int k2 = (k_warp + kt * 16 + 2 * pair) / 2;  // in pairs of elements
      const bool used = kt < k_tiles;
      a[tile][kt][0] = used ? lo[k2] : 0u;
      a[tile][kt][1] = used ? hi[k2] : 0u;
      a[tile][kt][2] = used ? lo[k2 + 4] : 0u;
      a[tile][kt][3] = used ? hi[k2 + 4] : 0u;
    }
  }
  // Batch rows past B multiply as zeros (their sums are never used; zeros keep them finite).
  for (int i = threadIdx.x; i < (rows - batch) * pitch; i += kBlockThreads) {
    h_s[static_cast<int64_t>(batch) * pitch + i] = scalar_t(0);
  }

  // The pointwise part: thread e owns (unit e % 8, batch row e / 8 + 32 p) for p < kMaxPairs. Its
  // bias, c_{t-1} and x_t W_ih^T wait in registers: after the product a step reads nothing from
  // global memory. x is loaded a step ahead and kept as loaded (scalar_t), converted only where it
  // is used: a conversion right after the load would make the warp wait for the load there, before
  // the block's signal, and every step of every block would pay that latency (Nsight Compute,
  // docs/perf/h100/lstm_tc_profile.md).
  const int u = threadIdx.x % kUnits, j = j0 + u;
  const int64_t state = static_cast<int64_t>(batch) * hidden;
  auto batch_row = [&](int p) {
    return (static_cast<int>(threadIdx.x) + p * kBlockThreads) / kUnits;
  };
  float bias_r[4], c_r[kMaxPairs] = {};
  scalar_t x_r[kMaxPairs][4] = {};
#pragma unroll
  for (int gate = 0; gate < 4; ++gate) bias_r[gate] = bias[gate * hidden + j];
  auto load_x = [&](int t) {
#pragma unroll
    for (int p = 0; p < kMaxPairs; ++p) {
      const int b = batch_row(p);
      if (b >= batch) continue;
      const scalar_t* row = gates + (static_cast<int64_t>(t) * batch + b) * 4 * hidden;
#pragma unroll
      for (int gate = 0; gate < 4; ++gate) x_r[p][gate] = row[gate * hidden + j];
    }
  };
#pragma unroll
  for (int p = 0; p < kMaxPairs; ++p) {
    if (batch_row(p) < batch) c_r[p] = cs[static_cast<int64_t>(batch_row(p)) * hidden + j];
  }
  load_x(0);

  const int row_pieces = hidden * static_cast<int>(sizeof(scalar_t)) / 16;  // 16-byte pieces
  const auto* h32 = reinterpret_cast<const uint32_t*>(h_s);
  for (int t = 0; t < steps; ++t) {
    // 1. Wait until every block has written h_{t-1}, then copy it in from L2.
    if (t > 0) {
      if (threadIdx.x == 0) {
        const int all = static_cast<int>(gridDim.x) * t;
        while (load_acquire(arrived) < all) {
        }
      }
      __syncthreads();
    }
    const scalar_t* h_prev = t == 0 ? h0 : y + (t - 1) * state;
    for (int i = threadIdx.x; i < batch * row_pieces; i += kBlockThreads) {
      const int b = i / row_pieces, piece = i % row_pieces;
      copy16_async(h_s + static_cast<int64_t>(b) * pitch + piece * 8,
                   h_prev + static_cast<int64_t>(b) * hidden + piece * 8);
    }
    wait_async_copies();
    __syncthreads();

    // 2, 3. This warp's share of K, four batch tiles at a time (32 accumulators a thread, not 64:
    // the A fragments already take 64 registers): acc[tile][n] += W rows (A, registers) x
    // h_{t-1}^T (B, shared memory); then the partial sums to shared memory, where lane
    // (group, pair) holds gates 2 tile and 2 tile + 1 of unit `group` for batch rows 8 n + 2 pair
    // and the next.
    for (int n0 = 0; n0 < batch_tiles; n0 += kBatchTilesAtOnce) {
      float acc[2][kBatchTilesAtOnce][4] = {};
#pragma unroll
      for (int kt = 0; kt < kMaxKTiles; ++kt) {
        if (kt >= k_tiles) break;
#pragma unroll
        for (int n = 0; n < kBatchTilesAtOnce; ++n) {
          if (n0 + n >= batch_tiles) break;
          // Rows of h are batch (mma's n), k runs along them: two elements in each 32-bit word.
          const int word = (((n0 + n) * 8 + group) * pitch + k_warp + kt * 16 + 2 * pair) / 2;
          const uint32_t b0 = h32[word], b1 = h32[word + 4];
          mma_16x8x16<scalar_t>(acc[0][n], a[0][kt], b0, b1);
          mma_16x8x16<scalar_t>(acc[1][n], a[1][kt], b0, b1);
        }
      }
#pragma unroll
      for (int n = 0; n < kBatchTilesAtOnce; ++n) {
        if (n0 + n >= batch_tiles) break;
        const int b = (n0 + n) * 8 + 2 * pair;
#pragma unroll
        for (int tile = 0; tile < 2; ++tile) {
          float* lo = part + ((warp * 4 + 2 * tile) * rows + b) * kUnits + group;
          float* hi = part + ((warp * 4 + 2 * tile + 1) * rows + b) * kUnits + group;
          lo[0] = acc[tile][n][0];
          lo[kUnits] = acc[tile][n][1];
          hi[0] = acc[tile][n][2];
          hi[kUnits] = acc[tile][n][3];
        }
      }
    }
    __syncthreads();

    // 4. The pointwise part, the eight warps' sums added in a fixed order (the same bits every
    // run), writing what lstm.cu's step loop writes: the activated gates, c_t and h_t.
#pragma unroll
    for (int p = 0; p < kMaxPairs; ++p) {
      const int b = batch_row(p);
      if (b >= batch) continue;
      float z[4];
#pragma unroll
      for (int gate = 0; gate < 4; ++gate) {
        float sum = static_cast<float>(x_r[p][gate]) + bias_r[gate];
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += part[((w * 4 + gate) * rows + b) * kUnits + u];
        z[gate] = sum;
      }
      const float i = sigmoid(z[0]), f = sigmoid(z[1]), g = tanhf(z[2]), o = sigmoid(z[3]);
      const float c = f * c_r[p] + i * g;
      c_r[p] = c;
      scalar_t* row = gates + (static_cast<int64_t>(t) * batch + b) * 4 * hidden;
      row[j] = static_cast<scalar_t>(i);
      row[hidden + j] = static_cast<scalar_t>(f);
      row[2 * hidden + j] = static_cast<scalar_t>(g);
      row[3 * hidden + j] = static_cast<scalar_t>(o);
      const int64_t s = t * state + static_cast<int64_t>(b) * hidden + j;
      cs[s + state] = c;
      y[s] = static_cast<scalar_t>(o * tanhf(c));
    }
    if (t + 1 < steps) {
      // 5. Signal: this block's h_t is written (and its reads of part are done). Then the next
      // step's x, issued after the signal (the signal's fence would wait for loads issued before
      // it) and landing while the block waits for the others.
      __syncthreads();
      if (threadIdx.x == 0) arrive(arrived);
      load_x(t + 1);
    }
  }
}

// How the launch is laid out, or why it cannot be; worked out once per (device, dtype, B, H).
struct TcPlan {
  bool fits = false;
  int blocks = 0;
  int64_t smem = 0;
};

template <typename scalar_t>
TcPlan tc_plan(int64_t batch, int64_t hidden) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int64_t, int64_t>, TcPlan> plans;
  const std::tuple<int, int64_t, int64_t> key{c10::cuda::current_device(), batch, hidden};
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = plans.find(key); found != plans.end()) return found->second;
  TcPlan& plan = plans[key];
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (!prop->cooperativeLaunch || prop->major < 8) return plan;
  plan.blocks = static_cast<int>(hidden / kUnits);
  plan.smem = tc_layout(static_cast<int>(batch), static_cast<int>(hidden), sizeof(scalar_t)).total;
  plan.fits = all_blocks_resident(lstm_forward_persistent_tc_kernel<scalar_t>, plan.blocks,
                                  kBlockThreads, plan.smem);
  return plan;
}

}  // namespace

// Whether the kernel may run (custom_ops.lstm_paths) and can (dtype, H, B, T), before asking the
// GPU. By default it runs where benchmarks/lstm_tc_forward.py measured it faster than the step
// loop (H100, 2026-11-27, docs/perf/h100/lstm_tc_forward_5957d3a.md; it beat the CUDA-core kernel
// at every shape): B <= 32 and B x H <= 16384. Above that each step's copy of h (B x H from L2 into
// each of the H / 8 blocks) costs more than the step loop's cuBLAS product, which reads W_hh once.
static bool tc_wanted(int64_t steps, int64_t batch, int64_t hidden, at::ScalarType dtype) {
  if (dtype != at::kHalf && dtype != at::kBFloat16) return false;
  if (hidden % (16 * kWarps) != 0 || hidden > 16 * kWarps * kMaxKTiles) return false;
  if (batch < 1 || batch > kMaxBatch || steps > INT_MAX / (hidden / kUnits)) return false;
  const LstmPaths& paths = lstm_paths();
  const PathChoice tc = paths.tensor_cores.load(std::memory_order_relaxed);
  if (tc != PathChoice::kAuto) return tc == PathChoice::kAlways;
  const PathChoice persistent = paths.persistent.load(std::memory_order_relaxed);
  if (persistent != PathChoice::kAuto) return persistent == PathChoice::kAlways;
  return batch <= 32 && batch * hidden <= 16384;
}

bool lstm_forward_persistent_tc(at::Tensor& gates, const at::Tensor& w_hh, const at::Tensor& bias,
                                const at::Tensor& h0, at::Tensor& cs, at::Tensor& y) {
  const int64_t T = gates.size(0), B = gates.size(1), H = w_hh.size(1);
  if (!tc_wanted(T, B, H, y.scalar_type())) return false;
  // h0 is copied in 16-byte pieces and W_hh read in pairs: a view that starts elsewhere runs the
  // other kernels instead.
  if (reinterpret_cast<std::uintptr_t>(h0.const_data_ptr()) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(w_hh.const_data_ptr()) % 4 != 0) {
    return false;
  }
  bool launched = false;
  AT_DISPATCH_REDUCED_FLOATING_TYPES(y.scalar_type(), "lstm", [&] {
    const TcPlan plan = tc_plan<scalar_t>(B, H);
    if (!plan.fits) return;
    // The step counter, zeroed on the stream (so a CUDA graph capturing this call zeroes it on
    // every replay).
    at::Tensor counter = at::zeros({1}, y.options().dtype(at::kInt));
    scalar_t* g = gates.mutable_data_ptr<scalar_t>();
    const scalar_t* w = w_hh.const_data_ptr<scalar_t>();
    const float* b = bias.const_data_ptr<float>();
    const scalar_t* h = h0.const_data_ptr<scalar_t>();
    float* c = cs.mutable_data_ptr<float>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    int* arrived = counter.mutable_data_ptr<int>();
    int steps = static_cast<int>(T), batch = static_cast<int>(B), hidden = static_cast<int>(H);
    void* args[] = {&g, &w, &b, &h, &c, &out, &arrived, &steps, &batch, &hidden};
    launched = launch_cooperative(lstm_forward_persistent_tc_kernel<scalar_t>, plan.blocks,
                                  kBlockThreads, plan.smem, args);
  });
  return launched;
}

}  // namespace custom_ops::cuda
