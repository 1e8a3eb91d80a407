// lstm_persistent_tc.cu: the forward recurrence of custom_ops::lstm in float16 and bfloat16 as
// one kernel launch whose products run on tensor cores, with W_hh held in registers for all T
// steps, in two variants: a grid of H / 8 blocks, and for H <= 512 on sm_90 one thread-block
// cluster (below). lstm.cu tries it before lstm_persistent.cu's kernel (which multiplies on CUDA
// cores) and before its step loop. Lessons: further/lstm_layer_bounds.md, further/lstm_cluster.md;
// design: docs/design/lstm_fp16_persistent.md.
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
#include <type_traits>

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

// The pointwise part of one (unit, batch row): z holds the four gates' pre-activations (i, f, g,
// o), c enters as c_{t-1} and leaves as c_t, act gets the activated gates; returns h_t.
template <typename scalar_t>
__device__ __forceinline__ float lstm_pointwise(const float (&z)[4], float& c, scalar_t (&act)[4]) {
  const float i = sigmoid(z[0]), f = sigmoid(z[1]), g = tanhf(z[2]), o = sigmoid(z[3]);
  c = f * c + i * g;
  act[0] = static_cast<scalar_t>(i);
  act[1] = static_cast<scalar_t>(f);
  act[2] = static_cast<scalar_t>(g);
  act[3] = static_cast<scalar_t>(o);
  return o * tanhf(c);
}

// One (unit j, batch row b) of step t's outputs that no block reads during the recurrence: the
// activated gates (into gates, over x_t W_ih^T) and c_t. The kernels write them after the step's
// signal: the signal's release makes a thread wait until its earlier writes have reached L2, and
// these need not have.
template <typename scalar_t>
__device__ __forceinline__ void store_gates_and_c(scalar_t* gates, float* cs, int t, int b, int j,
                                                  int batch, int hidden, const scalar_t (&act)[4],
                                                  float c) {
  scalar_t* row = gates + (static_cast<int64_t>(t) * batch + b) * 4 * hidden;
#pragma unroll
  for (int gate = 0; gate < 4; ++gate) row[gate * hidden + j] = act[gate];
  cs[(static_cast<int64_t>(t + 1) * batch + b) * hidden + j] = c;
}

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
    // run), writing what lstm.cu's step loop writes: h_t now (the other blocks read it), the
    // activated gates and c_t after the signal.
    scalar_t act[kMaxPairs][4];
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
      const float h = lstm_pointwise(z, c_r[p], act[p]);
      y[t * state + static_cast<int64_t>(b) * hidden + j] = static_cast<scalar_t>(h);
    }
    if (t + 1 < steps) {
      // 5. Signal: this block's h_t is written (and its reads of part are done).
      __syncthreads();
      if (threadIdx.x == 0) arrive(arrived);
    }
    // 6. The gates and c_t, then the next step's x: both issued after the signal (its fence would
    // wait for them), and landing while the block waits for the others.
#pragma unroll
    for (int p = 0; p < kMaxPairs; ++p) {
      const int b = batch_row(p);
      if (b < batch) store_gates_and_c(gates, cs, t, b, j, batch, hidden, act[p], c_r[p]);
    }
    if (t + 1 < steps) load_x(t + 1);
  }
}

// How the launch is laid out, or why it cannot be; worked out once per (device, dtype, B, H).
struct TcPlan {
  bool fits = false;
  int blocks = 0;
  int64_t smem = 0;
};

// The plan for (current device, B, H), made by make(plan) the first time and kept: a plan asks the
// driver (attributes, occupancy), which takes microseconds a call. One cache per call site and
// dtype, as each passes a lambda of its own type.
template <typename Plan, typename Make>
Plan plan_once(int64_t batch, int64_t hidden, Make make) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int64_t, int64_t>, Plan> plans;
  const std::tuple<int, int64_t, int64_t> key{c10::cuda::current_device(), batch, hidden};
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = plans.find(key); found != plans.end()) return found->second;
  Plan& plan = plans[key];
  make(plan);
  return plan;
}

template <typename scalar_t>
TcPlan tc_plan(int64_t batch, int64_t hidden) {
  return plan_once<TcPlan>(batch, hidden, [&](TcPlan& plan) {
    const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
    if (!prop->cooperativeLaunch || prop->major < 8) return;
    plan.blocks = static_cast<int>(hidden / kUnits);
    plan.smem =
        tc_layout(static_cast<int>(batch), static_cast<int>(hidden), sizeof(scalar_t)).total;
    plan.fits = compiled_for(lstm_forward_persistent_tc_kernel<scalar_t>, 80) &&
                all_blocks_resident(lstm_forward_persistent_tc_kernel<scalar_t>, plan.blocks,
                                    kBlockThreads, plan.smem);
  });
}

// ---------------------------------------------------------------------------------------------
// The cluster variant (sm_90 and newer; lesson: further/lstm_cluster.md). For H <= 512 the layer
// fits on at most 16 SMs, which Hopper can launch as one thread-block cluster: blocks resident
// together that can write each other's shared memory. Instead of the grid variant's counter and
// copy through L2, each block sends its slice of h_t into every block's shared memory with
// st.async, and each block waits on its own transaction barrier (an mbarrier that counts the
// bytes of h_t as they land). Block r owns kU hidden units: their 4 kU gate rows of W_hh as A
// fragments in the registers of 16 warps, warp w multiplying m-tile w % (kU / 4) over one of the
// 16 / (kU / 4) parts of K.
constexpr int kClusterWarps = 16;
constexpr int kClusterThreads = 32 * kClusterWarps;
constexpr int kClusterMaxBlocks = 16;  // the largest cluster Hopper allows (8 without opting in)
constexpr int kClusterMaxBatch = 32;

template <int kU>  // hidden units a block owns: 8, 16 or 32
struct ClusterShape {
  static constexpr int kRows = 4 * kU;                                   // gate rows of the block
  static constexpr int kMTiles = kRows / 16;                             // 2, 4, 8
  static constexpr int kKParts = kClusterWarps / kMTiles;                // 8, 4, 2 warps split K
  static constexpr int kKTiles = kU * kClusterMaxBlocks / 16 / kKParts;  // 1, 4, 16 at most
  static constexpr int kPartPitch = kRows + 4;  // floats: lanes of one store hit distinct banks
  // The (unit, batch row) pairs of the pointwise part a thread owns.
  static constexpr int kPairs = (kU * kClusterMaxBatch + kClusterThreads - 1) / kClusterThreads;
  // Batch tiles a warp multiplies before storing them: one where its A fragments take 64 of the
  // 128 registers a thread may have (with two at once, ptxas spilled).
  static constexpr int kBatchTilesAtOnce = kKTiles > 8 ? 1 : 2;
};

// Shared memory: h as [2 buffers][batch rows, padded to 8][H + kRowPad] (step t reads buffer
// t % 2 while the others write h_t into buffer (t + 1) % 2), the warps' partial sums as
// [K part][batch row][gate row], this block's h_t as [batch row][kU] before it is sent, and one
// transaction barrier (8 bytes) per h buffer.
struct ClusterLayout {
  int64_t partials, outgoing, barriers, total;
};
template <int kU>
__host__ __device__ inline ClusterLayout cluster_layout(int batch, int hidden,
                                                        int64_t scalar_size) {
  using S = ClusterShape<kU>;
  const int64_t rows = (batch + 7) / 8 * 8;
  ClusterLayout l{};
  l.partials = align16(2 * rows * (hidden + kRowPad) * scalar_size);
  l.outgoing = l.partials + align16(S::kKParts * rows * S::kPartPitch * sizeof(float));
  l.barriers = l.outgoing + align16(rows * kU * scalar_size);
  l.total = l.barriers + 2 * sizeof(uint64_t);
  return l;
}

// A cluster-wide barrier in two halves: arrive (a release) and wait (an acquire); every thread of
// every block takes part. Used once, before the first step (every block has started and set up its
// transaction barriers: a block's shared memory may be written only once it runs).
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

// The PTX of the exchange (PTX ISA: "mbarrier", "st.async", "mapa"). Shared-memory addresses are
// 32-bit; mapa turns one of this block's into the same place in block `rank` of the cluster.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t in_block(uint32_t local, int rank) {
  uint32_t remote = local;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
#endif
  return remote;
}
// A transaction barrier whose phase completes after one arrival and as many bytes as that arrival
// announces. The bytes may land before the arrival (the count of bytes still due goes below zero
// for a while), but never those of the next phase: a block sends h_{t+1} only after it has waited
// for every block's h_t, this one's included, so no sender can get a phase ahead of a receiver.
__device__ __forceinline__ void barrier_init(uint32_t barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mbarrier.init.shared::cta.b64 [%0], 1;\n"
      "fence.mbarrier_init.release.cluster;\n" ::"r"(barrier)
      : "memory");
#endif
}
__device__ __forceinline__ void barrier_expect_bytes(uint32_t barrier, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .b64 state;\n"
      " mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(barrier),
      "r"(bytes)
      : "memory");
#endif
}
// Stores 16 bytes at `remote`, a shared-memory address in a block of the cluster (from in_block;
// the sending block itself is allowed); once they have landed, they are counted on the
// transaction barrier at `remote_barrier`, which must be in the same block. The sender does not
// wait for them.
__device__ __forceinline__ void send16(uint32_t remote, int4 v, uint32_t remote_barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(remote),
      "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(remote_barrier)
      : "memory");
#endif
}
// Wait until the barrier's phase of this parity has completed. An acquire at cluster scope: the
// st.async stores were released at cluster scope by threads of other blocks, and PTX's memory
// model pairs a release and an acquire only when each one's scope includes the other thread. (The
// SASS invalidates the SM's L1 after each poll for it; a wait at CTA scope measured no faster,
// docs/perf/h100/lstm_cluster_profile.md.)
__device__ __forceinline__ void barrier_wait(uint32_t barrier, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
  }
#endif
}

// The same recurrence as lstm_forward_persistent_tc_kernel, for a grid that is one cluster of
// H / kU blocks. H a multiple of 128 up to 16 kU, B <= 32.
template <typename scalar_t, int kU>
__global__ void __launch_bounds__(kClusterThreads, 1)
    lstm_forward_cluster_tc_kernel(scalar_t* __restrict__ gates, const scalar_t* __restrict__ w_hh,
                                   const float* __restrict__ bias, const scalar_t* __restrict__ h0,
                                   float* __restrict__ cs, scalar_t* __restrict__ y, int steps,
                                   int batch, int hidden) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = ClusterShape<kU>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int rank = static_cast<int>(blockIdx.x), blocks = static_cast<int>(gridDim.x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, pair = lane % 4;  // the fragment coordinates of mma.sync
  const int m_tile = warp % S::kMTiles, k_part = warp / S::kMTiles;
  const int k_tiles = hidden / 16 / S::kKParts, k_warp = k_part * k_tiles * 16;
  const int j0 = rank * kU;
  const int batch_tiles = (batch + 7) / 8, rows = 8 * batch_tiles, pitch = hidden + kRowPad;
  const ClusterLayout layout = cluster_layout<kU>(batch, hidden, sizeof(scalar_t));
  scalar_t* h_s = reinterpret_cast<scalar_t*>(smem);  // two buffers of rows x pitch
  float* part = reinterpret_cast<float*>(smem + layout.partials);
  scalar_t* outgoing = reinterpret_cast<scalar_t*>(smem + layout.outgoing);
  // barrier(k) counts the bytes of h that land in buffer k.
  const uint32_t barriers = shared_address(smem + layout.barriers);
  auto barrier = [&](int k) { return barriers + k * static_cast<uint32_t>(sizeof(uint64_t)); };
  if (threadIdx.x == 0) {
    barrier_init(barrier(0));
    barrier_init(barrier(1));
  }

  // W_hh's rows for this warp's m-tile as A fragments, in registers until the kernel ends. The
  // block's gate row r (r < 4 kU) is W_hh's row (r / kU) H + j0 + r % kU: gate r / kU of unit
  // j0 + r % kU.
  auto w_row = [&](int r) {
    return reinterpret_cast<const uint32_t*>(
        w_hh + (static_cast<int64_t>(r / kU) * hidden + j0 + r % kU) * hidden);
  };
  const uint32_t* lo = w_row(m_tile * 16 + group);
  const uint32_t* hi = w_row(m_tile * 16 + group + 8);
  uint32_t a[S::kKTiles][4];
#pragma unroll
  for (int kt = 0; kt < S::kKTiles; ++kt) {
    const int k2 = (k_warp + kt * 16 + 2 * pair) / 2;  // in pairs of elements
    const bool used = kt < k_tiles;
    a[kt][0] = used ? lo[k2] : 0u;
    a[kt][1] = used ? hi[k2] : 0u;
    a[kt][2] = used ? lo[k2 + 4] : 0u;
    a[kt][3] = used ? hi[k2 + 4] : 0u;
  }

  // Both buffers' padding rows are zeros for good; h0 goes into buffer 0.
  for (int i = threadIdx.x; i < (rows - batch) * pitch; i += kClusterThreads) {
    h_s[static_cast<int64_t>(batch) * pitch + i] = scalar_t(0);
    h_s[static_cast<int64_t>(rows + batch) * pitch + i] = scalar_t(0);
  }
  const int row_pieces = hidden * static_cast<int>(sizeof(scalar_t)) / 16;  // 16-byte pieces
  for (int i = threadIdx.x; i < batch * row_pieces; i += kClusterThreads) {
    const int b = i / row_pieces, piece = i % row_pieces;
    copy16_async(h_s + static_cast<int64_t>(b) * pitch + piece * 8,
                 h0 + static_cast<int64_t>(b) * hidden + piece * 8);
  }

  // The pointwise part: thread e owns (unit e % kU, batch row e / kU + (kClusterThreads / kU) p),
  // with its bias, c_{t-1} and next x_t W_ih^T in registers, as in the kernel above. (Four lanes
  // per pair, one gate each, swapping them with shuffles, measured slower: 0.223 against 0.183 ms
  // at T = 64, B = 8, H = 512.)
  const int u = threadIdx.x % kU, j = j0 + u;
  const int64_t state = static_cast<int64_t>(batch) * hidden;
  auto batch_row = [&](int p) {
    return static_cast<int>(threadIdx.x) / kU + p * (kClusterThreads / kU);
  };
  float bias_r[4], c_r[S::kPairs] = {};
  scalar_t x_r[S::kPairs][4] = {};
#pragma unroll
  for (int gate = 0; gate < 4; ++gate) bias_r[gate] = bias[gate * hidden + j];
  auto load_x = [&](int t) {
#pragma unroll
    for (int p = 0; p < S::kPairs; ++p) {
      const int b = batch_row(p);
      if (b >= batch) continue;
      const scalar_t* row = gates + (static_cast<int64_t>(t) * batch + b) * 4 * hidden;
#pragma unroll
      for (int gate = 0; gate < 4; ++gate) x_r[p][gate] = row[gate * hidden + j];
    }
  };
#pragma unroll
  for (int p = 0; p < S::kPairs; ++p) {
    if (batch_row(p) < batch) c_r[p] = cs[static_cast<int64_t>(batch_row(p)) * hidden + j];
  }
  load_x(0);
  wait_async_copies();
  // Before any block sends: every block has started, initialised its barriers, and has h0 and
  // the zeroed padding rows in place.
  cluster_arrive();
  cluster_wait();

  const int send_pieces = kU * static_cast<int>(sizeof(scalar_t)) / 16;  // per batch row
  const uint32_t h_bytes = static_cast<uint32_t>(batch * hidden * sizeof(scalar_t));
  for (int t = 0; t < steps; ++t) {
    // h_{t-1} came in step t - 1 into buffer t % 2: that buffer's fill number (t - 1) / 2,
    // counting from 0, so the barrier's phase of that number, named by its parity.
    if (t > 0) barrier_wait(barrier(t % 2), ((t - 1) / 2) % 2);
    const scalar_t* h_now = h_s + static_cast<int64_t>(t % 2) * rows * pitch;
    const auto* h32 = reinterpret_cast<const uint32_t*>(h_now);

    // 1. The product: acc += W rows (A, registers) x h_{t-1}^T (B, shared memory) over this
    // warp's part of K, with two accumulators for each batch tile (even and odd k tiles: two
    // chains of dependent mma.sync instead of one twice as long).
    constexpr int kAtOnce = S::kBatchTilesAtOnce;
    for (int n0 = 0; n0 < batch_tiles; n0 += kAtOnce) {
      float acc[2][kAtOnce][4] = {};
#pragma unroll
      for (int kt = 0; kt < S::kKTiles; ++kt) {
        if (kt >= k_tiles) break;
#pragma unroll
        for (int n = 0; n < kAtOnce; ++n) {
          if (n0 + n >= batch_tiles) break;
          const int word = (((n0 + n) * 8 + group) * pitch + k_warp + kt * 16 + 2 * pair) / 2;
          mma_16x8x16<scalar_t>(acc[kt % 2][n], a[kt], h32[word], h32[word + 4]);
        }
      }
#pragma unroll
      for (int n = 0; n < kAtOnce; ++n) {
        if (n0 + n >= batch_tiles) break;
        const int b = (n0 + n) * 8 + 2 * pair;
        float* out = part + (k_part * rows + b) * S::kPartPitch + m_tile * 16 + group;
        out[0] = acc[0][n][0] + acc[1][n][0];
        out[S::kPartPitch] = acc[0][n][1] + acc[1][n][1];
        out[8] = acc[0][n][2] + acc[1][n][2];
        out[S::kPartPitch + 8] = acc[0][n][3] + acc[1][n][3];
      }
    }
    __syncthreads();

    // 2. The pointwise part, the K parts added in a fixed order: h_t into `outgoing`, and kept
    // with the activated gates and c_t for step 4.
    scalar_t act[S::kPairs][4], h_r[S::kPairs];
#pragma unroll
    for (int p = 0; p < S::kPairs; ++p) {
      const int b = batch_row(p);
      if (b >= batch) continue;
      float z[4];
#pragma unroll
      for (int gate = 0; gate < 4; ++gate) {
        float sum = static_cast<float>(x_r[p][gate]) + bias_r[gate];
#pragma unroll
        for (int k = 0; k < S::kKParts; ++k) {
          sum += part[(k * rows + b) * S::kPartPitch + gate * kU + u];
        }
        z[gate] = sum;
      }
      h_r[p] = static_cast<scalar_t>(lstm_pointwise(z, c_r[p], act[p]));
      outgoing[b * kU + u] = h_r[p];
    }
    if (t + 1 < steps) {
      // 3. This block's h_t into buffer (t + 1) % 2 of every block, itself included, in 16-byte
      // pieces, and this block's barrier for that buffer told to expect all of h_t. (No block
      // reads that buffer now: each read it in step t - 1, before sending the h_{t-1} that this
      // block waited for at the top of this step. That holds because every block waits for h from
      // every block: an exchange with fewer partners would need a second barrier.)
      __syncthreads();
      const int next = (t + 1) % 2;
      if (threadIdx.x == 0) barrier_expect_bytes(barrier(next), h_bytes);
      const scalar_t* h_next = h_s + static_cast<int64_t>(next) * rows * pitch;
      for (int i = threadIdx.x; i < blocks * batch * send_pieces; i += kClusterThreads) {
        const int to = i / (batch * send_pieces), b = i / send_pieces % batch;
        const int piece = i % send_pieces;
        const int4 v = reinterpret_cast<const int4*>(outgoing + b * kU)[piece];
        const uint32_t local =
            shared_address(h_next + static_cast<int64_t>(b) * pitch + j0) + 16 * piece;
        send16(in_block(local, to), v, in_block(barrier(next), to));
      }
    }
    // 4. The outputs, which no block reads during the recurrence (h_t went through shared
    // memory), after the sends; then the next step's x, landing while the block waits for h_t.
#pragma unroll
    for (int p = 0; p < S::kPairs; ++p) {
      const int b = batch_row(p);
      if (b >= batch) continue;
      store_gates_and_c(gates, cs, t, b, j, batch, hidden, act[p], c_r[p]);
      y[t * state + static_cast<int64_t>(b) * hidden + j] = h_r[p];
    }
    if (t + 1 < steps) load_x(t + 1);
  }
  // No block leaves while another may still send to it: every send of the last exchange (step
  // T - 2) was waited for by its receiver at the top of step T - 1. (A sender may leave with its
  // last st.async in flight; its data left the sender's registers when it was issued.)
#endif
}

// The cluster's launch, or why it cannot be; worked out once per (device, dtype, B, H).
struct ClusterPlan {
  bool fits = false;
  int units = 0, blocks = 0;
  int64_t smem = 0;
};

// `blocks` blocks of `kernel` as one cluster on the current stream, with `smem` bytes each.
template <typename Kernel>
cudaLaunchConfig_t cluster_config(Kernel, int blocks, int64_t smem, cudaLaunchAttribute& cluster) {
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = blocks;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kClusterThreads);
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = c10::cuda::getCurrentCUDAStream();
  config.attrs = &cluster;
  config.numAttrs = 1;
  return config;
}

// Whether the GPU can place such a cluster at all (16 blocks need SMs that not every part has).
template <typename Kernel>
bool cluster_fits(Kernel kernel, int blocks, int64_t smem) {
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config = cluster_config(kernel, blocks, smem, cluster);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return clusters >= 1;
}

// No cooperative launch needed: the hardware places a cluster's blocks together, or waits to.
template <typename Kernel>
void launch_cluster(Kernel kernel, int blocks, int64_t smem, void** args) {
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config = cluster_config(kernel, blocks, smem, cluster);
  C10_CUDA_CHECK(cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(kernel), args));
}

// The smallest kU with H / kU <= 16 blocks: the more blocks share the product, the shorter a step.
inline int cluster_units(int64_t hidden) {
  for (int units : {8, 16, 32}) {
    if (hidden / units <= kClusterMaxBlocks) return units;
  }
  return 0;
}

// fn(std::integral_constant<int, units>{}): the kernel is compiled for each block size.
template <typename Fn>
void with_cluster_units(int units, Fn&& fn) {
  switch (units) {
    case 8:
      fn(std::integral_constant<int, 8>{});
      break;
    case 16:
      fn(std::integral_constant<int, 16>{});
      break;
    case 32:
      fn(std::integral_constant<int, 32>{});
      break;
  }
}

template <typename scalar_t>
ClusterPlan cluster_plan(int64_t batch, int64_t hidden) {
  return plan_once<ClusterPlan>(batch, hidden, [&](ClusterPlan& plan) {
    const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
    if (prop->major < 9 || hidden % 128 != 0 || batch < 1 || batch > kClusterMaxBatch) return;
    plan.units = cluster_units(hidden);
    if (plan.units == 0) return;
    plan.blocks = static_cast<int>(hidden / plan.units);
    with_cluster_units(plan.units, [&](auto units) {
      constexpr int kU = decltype(units)::value;
      auto kernel = lstm_forward_cluster_tc_kernel<scalar_t, kU>;
      plan.smem =
          cluster_layout<kU>(static_cast<int>(batch), static_cast<int>(hidden), sizeof(scalar_t))
              .total;
      if (plan.smem > static_cast<int64_t>(prop->sharedMemPerBlockOptin)) return;
      C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(prop->sharedMemPerBlockOptin)));
      C10_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      plan.fits = compiled_for(kernel, 90) && cluster_fits(kernel, plan.blocks, plan.smem);
    });
  });
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

// Whether the cluster variant may run where the tensor-core forward runs
// (custom_ops.lstm_paths(clusters=...)); cluster_plan then says whether it can.
static bool cluster_wanted(int64_t batch, int64_t hidden) {
  const PathChoice choice = lstm_paths().clusters.load(std::memory_order_relaxed);
  if (choice != PathChoice::kAuto) return choice == PathChoice::kAlways;
  // By default where benchmarks/lstm_tc_forward.py measured it faster than the grid variant
  // (H100, 2026-11-27, docs/perf/h100/lstm_tc_forward.md): B <= 8, and B <= 16 at H <= 256.
  // Past that the product takes over the step: the grid variant spreads it over H / 8 blocks (64
  // at H = 512), the cluster over 16.
  return hidden <= 16 * 32 && (batch <= 8 || (batch <= 16 && hidden <= 256));
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
    scalar_t* g = gates.mutable_data_ptr<scalar_t>();
    const scalar_t* w = w_hh.const_data_ptr<scalar_t>();
    const float* b = bias.const_data_ptr<float>();
    const scalar_t* h = h0.const_data_ptr<scalar_t>();
    float* c = cs.mutable_data_ptr<float>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    int steps = static_cast<int>(T), batch = static_cast<int>(B), hidden = static_cast<int>(H);
    if (cluster_wanted(B, H)) {
      const ClusterPlan plan = cluster_plan<scalar_t>(B, H);
      if (plan.fits) {
        void* args[] = {&g, &w, &b, &h, &c, &out, &steps, &batch, &hidden};
        with_cluster_units(plan.units, [&](auto units) {
          constexpr int kU = decltype(units)::value;
          launch_cluster(lstm_forward_cluster_tc_kernel<scalar_t, kU>, plan.blocks, plan.smem,
                         args);
          launched = true;
        });
        if (launched) return;
      }
    }
    const TcPlan plan = tc_plan<scalar_t>(B, H);
    if (!plan.fits) return;
    // The step counter, zeroed on the stream (so a CUDA graph capturing this call zeroes it on
    // every replay).
    at::Tensor counter = at::zeros({1}, y.options().dtype(at::kInt));
    int* arrived = counter.mutable_data_ptr<int>();
    void* args[] = {&g, &w, &b, &h, &c, &out, &arrived, &steps, &batch, &hidden};
    launched = launch_cooperative(lstm_forward_persistent_tc_kernel<scalar_t>, plan.blocks,
                                  kBlockThreads, plan.smem, args);
  });
  return launched;
}

}  // namespace custom_ops::cuda
