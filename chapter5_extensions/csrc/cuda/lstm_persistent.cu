// lstm_persistent.cu: the time loop of custom_ops::lstm as ONE kernel launch per pass, for small
// batches (the "persistent RNN" of Diamos et al., ICML 2016). lstm.cu calls it in place of its
// step loop at small batch (see persistent_wanted) when the pass fits, and runs the loop
// otherwise (lesson: "A whole LSTM layer", the persistent kernel).
//
// Why: at B = 8 a step's product h_{t-1} W_hh^T is a few million multiply-adds, microseconds of
// work, but the step loop pays per step a cuBLAS launch that reads all of W_hh (4H x H) from L2,
// a pointwise launch, and the gap between them. Here each block owns a slice of the hidden units
// and keeps the rows (forward) or columns (backward) of W_hh that those units need in its shared
// memory for the whole sequence. A step is then: copy h_{t-1} (B x H, a few KB) into shared
// memory, multiply from shared memory, do the pointwise part, and wait at a grid-wide barrier
// for every other block to finish the step. The barrier needs every block resident at once, which
// a cooperative launch guarantees (or refuses); that, and 227 KB of shared memory per SM, is what
// bounds H and B here.

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <cooperative_groups.h>

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

namespace cg = cooperative_groups;

constexpr int kWarps = kThreads / 32;
// A warp computes a tile of 4 rows of W by 8 batch rows: 32 sums, one per lane once reduced.
constexpr int kTileRows = 4, kTileBatch = 8;
static_assert(kTileRows * kTileBatch == 32, "one reduced sum per lane");

__host__ __device__ inline int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

// Shared memory, in bytes from its start: the partial sums (acc_t), the block's slice of W_hh,
// then the vector operand (h_{t-1} forward, dgates_{t+1} backward), each 16-byte aligned.
struct SmemLayout {
  int64_t matrix, vector, total;
};

__host__ __device__ inline SmemLayout smem_layout(int64_t batch, int64_t rows, int64_t k_len,
                                                  int64_t k_split, int64_t acc_size,
                                                  int64_t scalar_size) {
  SmemLayout l{};
  l.matrix = align16(k_split * batch * rows * acc_size);
  l.vector = l.matrix + align16(rows * k_len * scalar_size);
  l.total = l.vector + align16(batch * k_len * scalar_size);
  return l;
}

// A load that skips the SM's L1 cache: another block wrote this data during the previous step, and
// L1 is not coherent across SMs (a line cached earlier from a neighbouring address could be stale).
template <typename T>
__device__ __forceinline__ T load_from_l2(const T* p) {
  if constexpr (sizeof(T) == 2) {
    const unsigned short bits = __ldcg(reinterpret_cast<const unsigned short*>(p));
    T v;
    memcpy(&v, &bits, 2);
    return v;
  } else if constexpr (sizeof(T) == 4) {
    const unsigned int bits = __ldcg(reinterpret_cast<const unsigned int*>(p));
    T v;
    memcpy(&v, &bits, 4);
    return v;
  } else {
    const unsigned long long bits = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    T v;
    memcpy(&v, &bits, 8);
    return v;
  }
}

// dst[0, n) = src[0, n), by the whole block, in 16-byte pieces when src allows.
template <typename scalar_t>
__device__ void stage(scalar_t* __restrict__ dst, const scalar_t* __restrict__ src, int64_t n) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(scalar_t));
  if (reinterpret_cast<std::uintptr_t>(src) % 16 == 0 && bytes % 16 == 0) {
    const int4* s = reinterpret_cast<const int4*>(src);
    int4* d = reinterpret_cast<int4*>(dst);
    for (int64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) copy16_async(d + i, s + i);
    wait_async_copies();
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = load_from_l2(src + i);
  }
}

// After this, lane L holds the warp's sum of v[L]: 31 shuffles for 32 sums, not 32 x 5. Each round
// a lane keeps one half of its values, sends the other half to its partner, and adds what comes
// back; the lane's bit for that round says which half it keeps. (A template, so that every index
// is a constant and v stays in registers.)
template <int kHalf, typename acc_t>
__device__ __forceinline__ acc_t transpose_reduce(acc_t (&v)[32]) {
  const bool upper = threadIdx.x & kHalf;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const acc_t send = upper ? v[i] : v[i + kHalf];
    const acc_t keep = upper ? v[i + kHalf] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kHalf);
  }
  if constexpr (kHalf > 1) {
    return transpose_reduce<kHalf / 2>(v);
  } else {
    return v[0];
  }
}

// part[s][b][r] = sum over k = s*32 + lane (mod k_split*32) of v[b][k] * m[r][k]: the block's
// rows of a product, both operands in shared memory. A warp takes a 4 x 8 tile of (r, b); when
// there are fewer tiles than warps, k_split warps share one tile and each sums a share of k (the
// pointwise step adds the k_split partial sums in a fixed order: the result does not depend on
// timing). Rows and batch rows past the end are clamped to the last one and their sums dropped,
// so that the inner loop has no branch.
template <typename scalar_t, typename acc_t>
__device__ void block_product(const scalar_t* __restrict__ m, const scalar_t* __restrict__ v,
                              acc_t* __restrict__ part, int rows, int batch, int k_len,
                              int k_split) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row_tiles = (rows + kTileRows - 1) / kTileRows;
  const int tiles = row_tiles * ((batch + kTileBatch - 1) / kTileBatch);
  const int share = warp % k_split;
  for (int tile = warp / k_split; tile < tiles; tile += kWarps / k_split) {
    const int r0 = (tile % row_tiles) * kTileRows, b0 = (tile / row_tiles) * kTileBatch;
    int m_off[kTileRows], v_off[kTileBatch];
#pragma unroll
    for (int i = 0; i < kTileRows; ++i) m_off[i] = min(r0 + i, rows - 1) * k_len;
#pragma unroll
    for (int i = 0; i < kTileBatch; ++i) v_off[i] = min(b0 + i, batch - 1) * k_len;
    acc_t acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = acc_t(0);
    for (int k = share * 32 + lane; k < k_len; k += k_split * 32) {
      acc_t mk[kTileRows], vk[kTileBatch];
#pragma unroll
      for (int i = 0; i < kTileRows; ++i) mk[i] = static_cast<acc_t>(m[m_off[i] + k]);
#pragma unroll
      for (int i = 0; i < kTileBatch; ++i) vk[i] = static_cast<acc_t>(v[v_off[i] + k]);
#pragma unroll
      for (int r = 0; r < kTileRows; ++r) {
#pragma unroll
        for (int b = 0; b < kTileBatch; ++b) acc[r * kTileBatch + b] += mk[r] * vk[b];
      }
    }
    const acc_t sum = transpose_reduce<16>(acc);  // lane = r * kTileBatch + b
    const int r = r0 + lane / kTileBatch, b = b0 + lane % kTileBatch;
    if (r < rows && b < batch) part[(static_cast<int64_t>(share) * batch + b) * rows + r] = sum;
  }
}

template <typename acc_t>
__device__ __forceinline__ acc_t sum_shares(const acc_t* part, int k_split, int batch, int rows,
                                            int b, int r) {
  acc_t total = part[static_cast<int64_t>(b) * rows + r];
  for (int s = 1; s < k_split; ++s) total += part[(static_cast<int64_t>(s) * batch + b) * rows + r];
  return total;
}

template <typename acc_t>
__device__ __forceinline__ acc_t sigmoid(acc_t v) {
  return acc_t(1) / (acc_t(1) + exp(-v));
}

// The forward's recurrence over all T steps. Block k owns hidden units [k*units, k*units + units)
// and holds the 4 * units rows of W_hh that produce their gates (i, f, g, o of each unit).
// gates (T, B, 4H) holds x_t W_ih^T on entry and the activated gates on exit, as in lstm.cu.
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads, 1)
    lstm_forward_persistent_kernel(scalar_t* __restrict__ gates, const scalar_t* __restrict__ w_hh,
                                   const acc_t* __restrict__ bias, const scalar_t* __restrict__ h0,
                                   acc_t* __restrict__ cs, scalar_t* __restrict__ y, int steps,
                                   int batch, int hidden, int units, int k_split) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int rows = 4 * units, j0 = blockIdx.x * units, owned = min(units, hidden - j0);
  const SmemLayout layout =
      smem_layout(batch, rows, hidden, k_split, sizeof(acc_t), sizeof(scalar_t));
  acc_t* part = reinterpret_cast<acc_t*>(smem);
  scalar_t* w_s = reinterpret_cast<scalar_t*>(smem + layout.matrix);  // [rows][hidden]
  scalar_t* h_s = reinterpret_cast<scalar_t*>(smem + layout.vector);  // [batch][hidden]

  // Row gate * units + u of w_s is row gate * H + j0 + u of W_hh; rows of units past H are zero.
  for (int64_t e = threadIdx.x; e < static_cast<int64_t>(rows) * hidden; e += blockDim.x) {
    const int r = e / hidden, k = e % hidden, gate = r / units, u = r % units;
    w_s[e] =
        u < owned ? w_hh[(static_cast<int64_t>(gate) * hidden + j0 + u) * hidden + k] : scalar_t(0);
  }

  const int64_t state = static_cast<int64_t>(batch) * hidden;  // elements of one h_t or c_t
  // One (b, u) of step t: z = x_t W_ih^T + bias + h_{t-1} W_hh^T (x_proj, bias4, the partial sums),
  // the activated gates written over x_proj's row, c_t to cs and h_t to y. Returns c_t.
  auto unit = [&](int t, int b, int u, const acc_t(&x_proj)[4], const acc_t(&bias4)[4],
                  acc_t c_prev) {
    const int j = j0 + u;
    scalar_t* row = gates + (static_cast<int64_t>(t) * batch + b) * 4 * hidden;
    acc_t z[4];
#pragma unroll
    for (int gate = 0; gate < 4; ++gate) {
      z[gate] =
          x_proj[gate] + bias4[gate] + sum_shares(part, k_split, batch, rows, b, gate * units + u);
    }
    const acc_t i = sigmoid(z[0]), f = sigmoid(z[1]), g = tanh(z[2]), o = sigmoid(z[3]);
    const int64_t s = t * state + static_cast<int64_t>(b) * hidden + j;
    const acc_t c = f * c_prev + i * g;
    row[j] = static_cast<scalar_t>(i);
    row[hidden + j] = static_cast<scalar_t>(f);
    row[2 * hidden + j] = static_cast<scalar_t>(g);
    row[3 * hidden + j] = static_cast<scalar_t>(o);
    cs[s + state] = c;
    y[s] = static_cast<scalar_t>(o * tanh(c));
    return c;
  };
  // Of a unit's operands only h_{t-1} comes from other blocks. Where each thread has at most one
  // (b, u) (batch x units <= threads: B <= 32 at H = 1024), the others wait in registers: the
  // bias, c_{t-1}, and x_t W_ih^T, loaded during the step before. A step then waits on memory
  // only for h_{t-1}, not again for its own operands after the product.
  const bool in_registers = batch * owned <= static_cast<int>(blockDim.x);
  const int my_b = threadIdx.x / owned, my_u = threadIdx.x % owned;
  const bool mine = in_registers && static_cast<int>(threadIdx.x) < batch * owned;
  acc_t bias_r[4] = {}, x_r[4] = {}, c_r = 0;
  auto load_x = [&](int t) {  // x_t W_ih^T of this thread's unit
    const scalar_t* row = gates + (static_cast<int64_t>(t) * batch + my_b) * 4 * hidden;
#pragma unroll
    for (int gate = 0; gate < 4; ++gate) x_r[gate] = row[gate * hidden + j0 + my_u];
  };
  if (mine) {
#pragma unroll
    for (int gate = 0; gate < 4; ++gate) bias_r[gate] = bias[gate * hidden + j0 + my_u];
    c_r = cs[static_cast<int64_t>(my_b) * hidden + j0 + my_u];
    load_x(0);
  }
  for (int t = 0; t < steps; ++t) {
    stage(h_s, t == 0 ? h0 : y + (t - 1) * state, state);
    __syncthreads();
    block_product(w_s, h_s, part, rows, batch, hidden, k_split);
    __syncthreads();
    if (in_registers) {
      if (mine) {
        c_r = unit(t, my_b, my_u, x_r, bias_r, c_r);
        if (t + 1 < steps) load_x(t + 1);  // lands while this block waits at the barrier
      }
    } else {
      for (int e = threadIdx.x; e < batch * owned; e += blockDim.x) {
        const int b = e / owned, u = e % owned, j = j0 + u;
        const scalar_t* row = gates + (static_cast<int64_t>(t) * batch + b) * 4 * hidden;
        acc_t x_proj[4], bias4[4];
#pragma unroll
        for (int gate = 0; gate < 4; ++gate) {
          x_proj[gate] = row[gate * hidden + j];
          bias4[gate] = bias[gate * hidden + j];
        }
        unit(t, b, u, x_proj, bias4, cs[t * state + static_cast<int64_t>(b) * hidden + j]);
      }
    }
    // Every block's h_t must be written before any block copies it in step t + 1. The barrier
    // also orders this block's reuse of part and h_s.
    if (t + 1 < steps) cg::this_grid().sync();
  }
}

// The backward's recurrence, T steps in reverse. Block k owns the same units, and holds the
// units columns of W_hh (all 4H rows of each, stored as rows: w_s[u][r] = W_hh[r][j0 + u]), which
// turn dgates_{t+1} (B, 4H) into its units' share of dh. dh enters holding the gradient of h_n and
// leaves holding that of h0; dc likewise for c (both (B, H) in the compute dtype).
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kThreads, 1)
    lstm_backward_persistent_kernel(const scalar_t* __restrict__ grad_y,
                                    const scalar_t* __restrict__ w_hh,
                                    const scalar_t* __restrict__ gates,
                                    const acc_t* __restrict__ cs, acc_t* __restrict__ dh,
                                    acc_t* __restrict__ dc, scalar_t* __restrict__ dgates,
                                    int steps, int batch, int hidden, int units, int k_split) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int j0 = blockIdx.x * units, owned = min(units, hidden - j0), k_len = 4 * hidden;
  const SmemLayout layout =
      smem_layout(batch, units, k_len, k_split, sizeof(acc_t), sizeof(scalar_t));
  acc_t* part = reinterpret_cast<acc_t*>(smem);
  scalar_t* w_s = reinterpret_cast<scalar_t*>(smem + layout.matrix);  // [units][4H]
  scalar_t* v_s = reinterpret_cast<scalar_t*>(smem + layout.vector);  // [batch][4H]

  // Consecutive threads read consecutive units of one row of W_hh (runs of `units` elements).
  for (int64_t e = threadIdx.x; e < static_cast<int64_t>(units) * k_len; e += blockDim.x) {
    const int u = e % units, r = e / units;
    w_s[static_cast<int64_t>(u) * k_len + r] =
        u < owned ? w_hh[static_cast<int64_t>(r) * hidden + j0 + u] : scalar_t(0);
  }

  const int64_t state = static_cast<int64_t>(batch) * hidden;
  // What one (b, u) of step t reads that no other block writes: the activated gates, grad_y, c_t
  // and c_{t-1}.
  struct Operands {
    acc_t i, f, g, o, grad_y, c, c_prev;
  };
  auto load = [&](int t, int b, int j) {
    const int64_t s = static_cast<int64_t>(b) * hidden + j;
    const scalar_t* row = gates + (static_cast<int64_t>(t) * batch + b) * 4 * hidden;
    return Operands{row[j],
                    row[hidden + j],
                    row[2 * hidden + j],
                    row[3 * hidden + j],
                    static_cast<acc_t>(grad_y[t * state + s]),
                    cs[(t + 1) * state + s],
                    cs[t * state + s]};
  };
  // One (b, u) of step t: writes the gradient of its gates and returns the one reaching c_{t-1}.
  auto unit = [&](int t, int b, int j, const Operands& a, acc_t dh_next, acc_t dc_in) {
    const acc_t d_h = a.grad_y + dh_next;
    const acc_t tc = tanh(a.c);
    const acc_t dct = dc_in + d_h * a.o * (acc_t(1) - tc * tc);
    scalar_t* drow = dgates + (static_cast<int64_t>(t) * batch + b) * 4 * hidden;
    drow[j] = static_cast<scalar_t>(dct * a.g * a.i * (acc_t(1) - a.i));
    drow[hidden + j] = static_cast<scalar_t>(dct * a.c_prev * a.f * (acc_t(1) - a.f));
    drow[2 * hidden + j] = static_cast<scalar_t>(dct * a.i * (acc_t(1) - a.g * a.g));
    drow[3 * hidden + j] = static_cast<scalar_t>(d_h * tc * a.o * (acc_t(1) - a.o));
    return dct * a.f;
  };
  // As in the forward: where each thread has at most one (b, u), dc stays in a register and step
  // t's operands are loaded during step t + 1, so that after the barrier a step waits on memory
  // only for dgates_{t+1}.
  const bool in_registers = batch * owned <= static_cast<int>(blockDim.x);
  const int my_b = threadIdx.x / owned, my_u = threadIdx.x % owned, my_j = j0 + my_u;
  const bool mine = in_registers && static_cast<int>(threadIdx.x) < batch * owned;
  const int64_t my_s = static_cast<int64_t>(my_b) * hidden + my_j;
  Operands next{};
  acc_t dc_r = 0;
  if (mine) {
    dc_r = dc[my_s];
    if (steps > 0) next = load(steps - 1, my_b, my_j);
  }
  for (int t = steps - 1; t >= -1; --t) {
    // dh_t's part from step t + 1: dgates_{t+1} W_hh, this block's columns (at t = -1: h0's).
    if (t + 1 < steps) {
      stage(v_s, dgates + static_cast<int64_t>(t + 1) * 4 * state, 4 * state);
      __syncthreads();
      block_product(w_s, v_s, part, units, batch, k_len, k_split);
      __syncthreads();
    }
    auto dh_next_of = [&](int b, int u, int64_t s) {
      return t + 1 < steps ? sum_shares(part, k_split, batch, units, b, u) : dh[s];
    };
    if (in_registers) {
      if (mine) {
        const acc_t dh_next = dh_next_of(my_b, my_u, my_s);
        if (t < 0) {
          dh[my_s] = dh_next;
          dc[my_s] = dc_r;
        } else {
          const Operands now = next;
          if (t > 0) next = load(t - 1, my_b, my_j);  // lands while this block waits at the barrier
          dc_r = unit(t, my_b, my_j, now, dh_next, dc_r);
        }
      }
    } else {
      for (int e = threadIdx.x; e < batch * owned; e += blockDim.x) {
        const int b = e / owned, u = e % owned, j = j0 + u;
        const int64_t s = static_cast<int64_t>(b) * hidden + j;
        const acc_t dh_next = dh_next_of(b, u, s);
        if (t < 0) {
          dh[s] = dh_next;
          continue;
        }
        dc[s] = unit(t, b, j, load(t, b, j), dh_next, dc[s]);
      }
    }
    if (t >= 0) cg::this_grid().sync();
  }
}

// How one pass is laid out on the GPU, or why it cannot be.
struct Plan {
  bool fits = false;
  int units = 0, blocks = 0, k_split = 1;
  int64_t smem = 0;
};

// Unless custom_ops.lstm_paths(persistent=...) says otherwise (csrc/lstm.h), the kernel runs where
// benchmark_lstm.py --persistent-sweep measured it faster than the step loop on the H100 (fwd+bwd,
// T = 64, H = 256, 512, 1024): in float32 up to B x H = 16384; in the half types, whose step loop
// multiplies on tensor cores while this kernel uses CUDA cores, only up to B x H = 8192 and
// B x H x H = 2^22 (B = 4 at H = 1024).
bool persistent_wanted(int64_t batch, int64_t hidden, int64_t scalar_size) {
  const PathChoice choice = lstm_paths().persistent.load(std::memory_order_relaxed);
  if (choice != PathChoice::kAuto) return choice == PathChoice::kAlways;
  if (scalar_size == 2) return batch * hidden <= 8192 && batch * hidden * hidden <= (1 << 22);
  return batch * hidden <= 16384;
}

// rows_per_unit: 4 forward (a unit's four gate rows), 1 backward (a unit's column); k_len: the
// product's inner length (H forward, 4H backward). Everything but the policy and T depends on the
// device, the kernel and (B, H) only, and asks the driver (an attribute set, an occupancy query:
// microseconds a call), so it is worked out once per such key and then looked up.
template <typename Kernel>
Plan plan_for(Kernel kernel, int64_t steps, int64_t batch, int64_t hidden, int rows_per_unit,
              int64_t k_len, int64_t acc_size, int64_t scalar_size) {
  if (!persistent_wanted(batch, hidden, scalar_size) || steps > INT_MAX) return Plan{};
  static std::mutex mutex;
  static std::map<std::tuple<int, int64_t, int64_t>, Plan> plans;  // (device, B, H), this kernel
  const std::tuple<int, int64_t, int64_t> key{c10::cuda::current_device(), batch, hidden};
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = plans.find(key); found != plans.end()) return found->second;
  Plan& plan = plans[key];
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (!prop->cooperativeLaunch || hidden == 0 || hidden > INT_MAX / 4 || batch > INT_MAX / hidden) {
    return plan;
  }
  // As many blocks as SMs, each owning an equal run of units (the last may own fewer).
  plan.units = static_cast<int>(ceil_div(hidden, prop->multiProcessorCount));
  plan.blocks = static_cast<int>(ceil_div(hidden, plan.units));
  const int64_t rows = static_cast<int64_t>(rows_per_unit) * plan.units;
  const int64_t tiles = ceil_div(rows, kTileRows) * ceil_div(batch, kTileBatch);
  // Idle warps share a tile's k, as long as each share still has a k for every lane.
  while (plan.k_split * 2 * tiles <= kWarps && plan.k_split * 2 * 32 <= k_len) plan.k_split *= 2;
  plan.smem = smem_layout(batch, rows, k_len, plan.k_split, acc_size, scalar_size).total;
  plan.fits = all_blocks_resident(kernel, plan.blocks, kThreads, plan.smem);
  return plan;
}

}  // namespace

bool lstm_forward_persistent(at::Tensor& gates, const at::Tensor& w_hh, const at::Tensor& bias,
                             const at::Tensor& h0, at::Tensor& cs, at::Tensor& y) {
  const int64_t T = gates.size(0), B = gates.size(1), H = w_hh.size(1);
  bool launched = false;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "lstm", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    auto kernel = lstm_forward_persistent_kernel<scalar_t, acc_t>;
    const Plan plan = plan_for(kernel, T, B, H, 4, H, sizeof(acc_t), sizeof(scalar_t));
    if (!plan.fits) return;
    scalar_t* g = gates.mutable_data_ptr<scalar_t>();
    const scalar_t* w = w_hh.const_data_ptr<scalar_t>();
    const acc_t* b = bias.const_data_ptr<acc_t>();
    const scalar_t* h = h0.const_data_ptr<scalar_t>();
    acc_t* c = cs.mutable_data_ptr<acc_t>();
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    int steps = static_cast<int>(T), batch = static_cast<int>(B), hidden = static_cast<int>(H);
    int units = plan.units, k_split = plan.k_split;
    void* args[] = {&g, &w, &b, &h, &c, &out, &steps, &batch, &hidden, &units, &k_split};
    launched = launch_cooperative(kernel, plan.blocks, kThreads, plan.smem, args);
  });
  return launched;
}

bool lstm_backward_runs_persistent(int64_t batch, int64_t hidden, at::ScalarType dtype) {
  bool fits = false;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "lstm_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    auto kernel = lstm_backward_persistent_kernel<scalar_t, acc_t>;
    fits = plan_for(kernel, 1, batch, hidden, 1, 4 * hidden, sizeof(acc_t), sizeof(scalar_t)).fits;
  });
  return fits;
}

bool lstm_backward_persistent(const at::Tensor& grad_y, const at::Tensor& w_hh,
                              const at::Tensor& gates, const at::Tensor& cs, at::Tensor& dh,
                              at::Tensor& dc, at::Tensor& dgates) {
  const int64_t T = gates.size(0), B = gates.size(1), H = w_hh.size(1);
  bool launched = false;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, gates.scalar_type(), "lstm_backward", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        auto kernel = lstm_backward_persistent_kernel<scalar_t, acc_t>;
        const Plan plan = plan_for(kernel, T, B, H, 1, 4 * H, sizeof(acc_t), sizeof(scalar_t));
        if (!plan.fits) return;
        const scalar_t* gy = grad_y.const_data_ptr<scalar_t>();
        const scalar_t* w = w_hh.const_data_ptr<scalar_t>();
        const scalar_t* g = gates.const_data_ptr<scalar_t>();
        const acc_t* c = cs.const_data_ptr<acc_t>();
        acc_t* dh_ptr = dh.mutable_data_ptr<acc_t>();
        acc_t* dc_ptr = dc.mutable_data_ptr<acc_t>();
        scalar_t* dg = dgates.mutable_data_ptr<scalar_t>();
        int steps = static_cast<int>(T), batch = static_cast<int>(B), hidden = static_cast<int>(H);
        int units = plan.units, k_split = plan.k_split;
        void* args[] = {&gy, &w,     &g,     &c,      &dh_ptr, &dc_ptr,
                        &dg, &steps, &batch, &hidden, &units,  &k_split};
        launched = launch_cooperative(kernel, plan.blocks, kThreads, plan.smem, args);
      });
  return launched;
}

}  // namespace custom_ops::cuda
