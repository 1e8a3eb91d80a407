// lstm.cu: custom_ops::lstm, custom_ops::lstm_packed and their backwards for CUDA tensors:
// csrc/lstm.cpp's algorithms with the products as direct cuBLAS calls and the pointwise part of
// each step as one fused kernel. Per time step the host issues a GEMM and a kernel (a few more
// calls for a projection, or where sequences begin or end) and nothing else: no tensor is created
// and no ATen op is dispatched inside the loop. At small batch lstm_persistent.cu replaces each of
// lstm's loops with one launch; past it, the loops of both ops are recorded once into a CUDA graph
// and replayed with one launch (the section "The step loop as a CUDA graph").

// Only the headers this file names, not all of ATen (chapter 1, "Narrow headers"). The first
// define makes ATen's own headers do the same (<ATen/TensorOperators.h> would pull in every op
// without it); the second turns an include of <ATen/ATen.h> or <ATen/Functions.h> into an error.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/cuda/CUDADataType.h>
#include <ATen/cuda/Exceptions.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <c10/core/InferenceMode.h>
#include <torch/library.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "../lstm.h"
#include "launch_utils.cuh"
#include "lstm_persistent.h"
#include "step_graph.h"

namespace custom_ops::cuda {
namespace {

// What every product of one call shares: the handle (bound to the current stream) and the compute
// type. Taken once per call, not per product: the time loop makes thousands of products.
struct Blas {
  cublasHandle_t handle;
  cublasComputeType_t compute;
};

Blas blas_for(at::ScalarType dtype) {
  Blas blas{at::cuda::getCurrentCUDABlasHandle(), CUBLAS_COMPUTE_32F};
  // The compute type says the precision explicitly; the handle's math mode must not widen it.
  TORCH_CUDABLAS_CHECK(cublasSetMathMode(blas.handle, CUBLAS_DEFAULT_MATH));
  if (dtype == at::kDouble) {
    blas.compute = CUBLAS_COMPUTE_64F;
  } else if (dtype == at::kFloat && at::globalContext().allowTF32CuDNN(at::Float32Op::RNN)) {
    // float32 on TF32 tensor cores exactly when torch.nn.LSTM would use them: cuDNN's RNN flag
    // (torch.backends.cudnn.rnn.fp32_precision, "tf32" by default), not the matmul one.
    blas.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  return blas;
}

// C = op(A) op(B) + beta C for ROW-major matrices: op(A) is m x k, op(B) is k x n, C is m x n,
// and each leading dimension is a row's length as stored. A and B have type `ab`, C `c_type`
// (float where a result is summed further, as the weight gradients and dh are).
//
// cuBLAS is column-major (Fortran's BLAS; the production notes this course grew from warn of it).
// Read as column-major, a row-major matrix is its transpose, so instead of copying we ask for C^T =
// op(B)^T op(A)^T: swap the two operands and the two sizes m and n, and every matrix is passed
// exactly as it lies in memory.
void gemm(const Blas& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc,
          at::ScalarType ab, at::ScalarType c_type, const char* op = "lstm") {
  if (m == 0 || n == 0) return;
  for (const int64_t v : {m, n, k, lda, ldb, ldc}) {
    TORCH_CHECK(v <= INT_MAX, op, ": a matrix dimension of ", v, " is beyond cuBLAS's int API");
  }
  const double alpha = 1.0;
  const float alpha_f = 1.0f, beta_f = static_cast<float>(beta);
  const bool in_double = blas.compute == CUBLAS_COMPUTE_64F;  // alpha and beta in double too
  TORCH_CUDABLAS_CHECK(
      cublasGemmEx(blas.handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                   static_cast<int>(k), in_double ? static_cast<const void*>(&alpha) : &alpha_f, b,
                   at::cuda::ScalarTypeToCudaDataType(ab), static_cast<int>(ldb), a,
                   at::cuda::ScalarTypeToCudaDataType(ab), static_cast<int>(lda),
                   in_double ? static_cast<const void*>(&beta) : &beta_f, c,
                   at::cuda::ScalarTypeToCudaDataType(c_type), static_cast<int>(ldc), blas.compute,
                   CUBLAS_GEMM_DEFAULT));
}

template <typename acc_t>
__device__ __forceinline__ acc_t sigmoid(acc_t v) {
  return acc_t(1) / (acc_t(1) + exp(-v));
}

// What every step kernel, forward or back, does for one unit j of one row: `row` is that row's 4H
// gates, in nn.LSTM's order i, f, g, o.

// Forward: adds the bias to the pre-activations, activates them in place (the backward reads the
// activated gates) and returns c_t = f c_{t-1} + i g; *o_out gets o, for h_t = o tanh(c_t).
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t gates_forward(scalar_t* row, const acc_t* bias, int64_t j,
                                               int64_t hidden, acc_t c_prev, acc_t* o_out) {
  const acc_t i = sigmoid(static_cast<acc_t>(row[j]) + bias[j]);
  const acc_t f = sigmoid(static_cast<acc_t>(row[hidden + j]) + bias[hidden + j]);
  const acc_t g = tanh(static_cast<acc_t>(row[2 * hidden + j]) + bias[2 * hidden + j]);
  const acc_t o = sigmoid(static_cast<acc_t>(row[3 * hidden + j]) + bias[3 * hidden + j]);
  row[j] = static_cast<scalar_t>(i);
  row[hidden + j] = static_cast<scalar_t>(f);
  row[2 * hidden + j] = static_cast<scalar_t>(g);
  row[3 * hidden + j] = static_cast<scalar_t>(o);
  *o_out = o;
  return f * c_prev + i * g;
}

// Back: from dh (the gradient reaching h_t) and dc (reaching c_t from step t+1), writes the
// gradient of the pre-activation gates to drow, in x's dtype (the products that follow read it),
// and returns the gradient reaching c_{t-1}.
template <typename scalar_t, typename acc_t>
__device__ __forceinline__ acc_t gates_backward(const scalar_t* row, scalar_t* drow, int64_t j,
                                                int64_t hidden, acc_t dh, acc_t dc, acc_t c,
                                                acc_t c_prev) {
  const acc_t i = row[j], f = row[hidden + j], g = row[2 * hidden + j], o = row[3 * hidden + j];
  const acc_t tc = tanh(c);
  const acc_t dct = dc + dh * o * (acc_t(1) - tc * tc);
  drow[j] = static_cast<scalar_t>(dct * g * i * (acc_t(1) - i));
  drow[hidden + j] = static_cast<scalar_t>(dct * c_prev * f * (acc_t(1) - f));
  drow[2 * hidden + j] = static_cast<scalar_t>(dct * i * (acc_t(1) - g * g));
  drow[3 * hidden + j] = static_cast<scalar_t>(dh * tc * o * (acc_t(1) - o));
  return dct * f;
}

// One step forward. gates (B, 4H) holds x_t W_ih^T + h_{t-1} W_hh^T; add the bias, activate in
// place (the backward reads the activated gates), c_t = f c_{t-1} + i g, y_t = o tanh(c_t).
// A thread per (b, j).
template <typename scalar_t, typename acc_t>
__global__ void lstm_step_forward_kernel(scalar_t* __restrict__ gates,
                                         const acc_t* __restrict__ bias,
                                         const acc_t* __restrict__ c_prev,
                                         acc_t* __restrict__ c_next, scalar_t* __restrict__ y,
                                         int64_t batch, int64_t hidden) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < batch * hidden; idx += stride) {
    const int64_t b = idx / hidden, j = idx % hidden;
    acc_t o;
    const acc_t c = gates_forward(gates + b * 4 * hidden, bias, j, hidden, c_prev[idx], &o);
    c_next[idx] = c;
    y[idx] = static_cast<scalar_t>(o * tanh(c));
  }
}

// One step back. dh = grad_y_t + dh_next (what step t+1 sent back through W_hh); dc holds the
// gradient reaching c_t from step t+1 and leaves holding the one reaching c_{t-1}. Writes the
// gradient of the pre-activation gates, in x's dtype: the products that follow read it.
template <typename scalar_t, typename acc_t>
__global__ void lstm_step_backward_kernel(const scalar_t* __restrict__ grad_y,
                                          const acc_t* __restrict__ dh_next, acc_t* __restrict__ dc,
                                          const scalar_t* __restrict__ gates,
                                          const acc_t* __restrict__ c,
                                          const acc_t* __restrict__ c_prev,
                                          scalar_t* __restrict__ dgates, int64_t batch,
                                          int64_t hidden) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < batch * hidden; idx += stride) {
    const int64_t b = idx / hidden, j = idx % hidden;
    const acc_t dh = static_cast<acc_t>(grad_y[idx]) + dh_next[idx];
    dc[idx] = gates_backward(gates + b * 4 * hidden, dgates + b * 4 * hidden, j, hidden, dh,
                             dc[idx], c[idx], c_prev[idx]);
  }
}

// Step 2 for every t, the step loop: per step a product and the fused kernel. What it reads and
// writes, each pointer at step 0.
template <typename scalar_t, typename acc_t>
struct ForwardSteps {
  scalar_t* gates;       // (T, B, 4H): x W_ih^T in, the activated gates out
  const acc_t* bias;     // (4H,): b_ih + b_hh
  acc_t* cs;             // (T + 1, B, H): c0 in cs[0], c_t out in cs[t + 1]
  scalar_t* y;           // (T, B, H)
  const scalar_t* h0;    // (B, H)
  const scalar_t* w_hh;  // (4H, H)
  int64_t steps, batch, hidden, grid;
};

template <typename scalar_t, typename acc_t>
void forward_steps(const Blas& blas, cudaStream_t stream, const ForwardSteps<scalar_t, acc_t>& a,
                   at::ScalarType dtype) {
  const int64_t B = a.batch, H = a.hidden;
  for (int64_t t = 0; t < a.steps; ++t) {
    // 2. gates[t] += h_{t-1} W_hh^T (beta = 1 adds to the projection in place), then the step.
    const scalar_t* h_prev = t == 0 ? a.h0 : a.y + (t - 1) * B * H;
    gemm(blas, false, true, B, 4 * H, H, h_prev, H, a.w_hh, H, 1.0, a.gates + t * B * 4 * H, 4 * H,
         dtype, dtype);
    lstm_step_forward_kernel<scalar_t, acc_t>
        <<<a.grid, kThreads, 0, stream>>>(a.gates + t * B * 4 * H, a.bias, a.cs + t * B * H,
                                          a.cs + (t + 1) * B * H, a.y + t * B * H, B, H);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

// Step 3 for every t, in reverse.
template <typename scalar_t, typename acc_t>
struct BackwardSteps {
  const scalar_t* grad_y;  // (T, B, H)
  acc_t* dh;               // (B, H): the gradient of h_n in, of h0 out
  acc_t* dc;               // (B, H): the gradient of c_n in, of c0 out
  const scalar_t* gates;   // (T, B, 4H), as the forward left them
  const acc_t* cs;         // (T + 1, B, H)
  scalar_t* dgates;        // (T, B, 4H), written
  const scalar_t* w_hh;    // (4H, H)
  int64_t steps, batch, hidden, grid;
};

template <typename scalar_t, typename acc_t>
void backward_steps(const Blas& blas, cudaStream_t stream, const BackwardSteps<scalar_t, acc_t>& a,
                    at::ScalarType dtype) {
  const int64_t B = a.batch, H = a.hidden;
  for (int64_t t = a.steps - 1; t >= 0; --t) {
    // 3. One step back: the fused pointwise backward, then dh_{t-1} = dgates[t] W_hh.
    lstm_step_backward_kernel<scalar_t, acc_t><<<a.grid, kThreads, 0, stream>>>(
        a.grad_y + t * B * H, a.dh, a.dc, a.gates + t * B * 4 * H, a.cs + (t + 1) * B * H,
        a.cs + t * B * H, a.dgates + t * B * 4 * H, B, H);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    gemm(blas, false, false, B, H, 4 * H, a.dgates + t * B * 4 * H, 4 * H, a.w_hh, H, 0.0, a.dh, H,
         dtype, opmath_dtype(dtype));
  }
}

// ---- The step loop as a CUDA graph --------------------------------------------------------------
// Where the batch is too large for the persistent kernel but a step is still little work (T = 64,
// B = 64, H = 1024: about 10 us of GPU time a step), the host's two launches a step (5-10 us each)
// cost more than the kernels they launch. A CUDA graph records the loop's 2T launches once and
// replays them with one. But a graph replays fixed pointers, so the memory it reads and writes is
// fixed too: it belongs to a slot of the cache below, and a call's y, gates and cs ARE the slot's
// memory, handed out under new tensor handles. A slot is taken again only when nothing outside
// the cache holds that memory (autograd keeps gates and cs until the backward has run), and only
// on the stream it was made on, whose order then makes the next call wait for the last one to
// finish on the GPU. What changes address every call is copied in: w_hh, the bias, h0 and c0, and
// backward grad_y and the gradients of h_n and c_n (w_hh is the largest, 8 MiB at H = 1024 in
// float16: a few microseconds of copying).

struct StepGraphKey {
  int device;
  cudaStream_t stream;
  at::ScalarType dtype;
  cublasComputeType_t compute;  // TF32 or not: captured into the graph's products
  // Under torch.inference_mode the slot's tensors are inference tensors, which may not be written
  // in place outside it: such a slot serves inference-mode calls only.
  bool inference;
  int64_t steps, batch, input, hidden;
  bool operator==(const StepGraphKey& o) const {
    return std::tie(device, stream, dtype, compute, inference, steps, batch, input, hidden) ==
           std::tie(o.device, o.stream, o.dtype, o.compute, o.inference, o.steps, o.batch, o.input,
                    o.hidden);
  }
};

StepGraphKey key_for(const at::Tensor& x, cudaStream_t stream, const Blas& blas,
                     const LstmSizes& s) {
  return {x.get_device(), stream,  x.scalar_type(), blas.compute, c10::InferenceMode::is_enabled(),
          s.steps,        s.batch, s.input,         s.hidden};
}

// Whether nothing outside the cache holds these tensors of a slot, the ones the op handed out.
// Every handle it gave out keeps a reference to the slot's storage (share() below), and so does
// every view of one, and the copy autograd saves of an output: the storage's count says whether any
// is left.
bool none_held(std::initializer_list<const at::Tensor*> handed_out) {
  for (const at::Tensor* t : handed_out) {
    if (t->use_count() > 1 || t->storage().use_count() > 1) return false;
  }
  return true;
}

int64_t total_bytes(std::initializer_list<const at::Tensor*> tensors) {
  int64_t n = 0;
  for (const at::Tensor* t : tensors) {
    if (t->defined()) n += t->nbytes();
  }
  return n;
}

struct StepGraphSlot {
  StepGraphKey key;
  at::Tensor w_hh, bias, h0, gates, cs, y;  // the forward graph's memory
  at::Tensor grad_y, dh, dc, dgates;        // the backward graph's, from its first call
  at::Tensor workspace;                     // cuBLAS's, recorded into both graphs
  Graph forward, backward;
  uint64_t last_use = 0;

  bool idle() const { return none_held({&y, &gates, &cs}); }
  int64_t bytes() const {
    return total_bytes(
        {&w_hh, &bias, &h0, &gates, &cs, &y, &grad_y, &dh, &dc, &dgates, &workspace});
  }
};

// A new tensor over t's memory for the caller: its own autograd metadata and version counter, and
// its own storage, which holds a reference to the slot's until it is freed. What the caller does
// to it (autograd records the op's outputs; untyped_storage().resize_(0) frees a storage) never
// touches the cache's tensor or the graph's memory: a resize gives that storage new memory from
// the allocator and lets go of the slot's. Not the caching allocator's block: record_stream on it
// has no effect.
at::Tensor share(const at::Tensor& t) {
  auto* keep = new c10::Storage(t.storage());
  c10::DataPtr data(
      t.storage().mutable_data(), keep, [](void* s) { delete static_cast<c10::Storage*>(s); },
      t.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), t.storage().nbytes(), std::move(data),
                       t.storage().allocator(), /*resizable=*/true);
  at::Tensor handle =
      at::detail::make_tensor<c10::TensorImpl>(std::move(storage), t.key_set(), t.dtype());
  handle.unsafeGetTensorImpl()->set_sizes_contiguous(t.sizes());
  return handle;
}

// Where step graphs are used (custom_ops.lstm_paths(step_graphs="auto")): up to B x H = 2^18
// (H = 1024 at B = 256; at B = 4096 the kernels hide the launches and a graph saved nothing, and
// a slot's memory grows with B; nothing between was measured); from a shape's second call, so
// that a shape seen once is not captured; within 16 slots and 2 GiB for each op's cache, the least
// recently used idle slot making room.
constexpr int64_t kGraphMaxBatchHidden = int64_t{1} << 18;
constexpr size_t kGraphMaxSlots = 16;
constexpr int64_t kGraphMaxBytes = int64_t{2} << 30;

// One lock for both caches (lstm's and lstm_packed's), held by a call for as long as it uses a
// cache and a slot's memory, capture included: calls from several threads (the autograd engine's,
// one per GPU) take turns on the host, and two captures never share the recording stream.
std::mutex& graphs_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

// The slots of one op (Slot: StepGraphSlot, or PackedGraphSlot below), each with its key.
template <typename Slot>
class GraphCache {
 public:
  using Key = decltype(Slot::key);

  // An idle slot for key, or a new one; nullptr where graphs are not to be used. make(slot) gives
  // a new slot its forward memory.
  template <typename Make>
  Slot* acquire(const Key& key, int64_t new_bytes, Make make) {
    const PathChoice choice = lstm_paths().step_graphs.load(std::memory_order_relaxed);
    if (choice == PathChoice::kNever) return nullptr;
    if (choice == PathChoice::kAuto) {
      if (key.batch * key.hidden > kGraphMaxBatchHidden) return nullptr;
      const bool seen =
          std::find(seen_.begin(), seen_.end(), key) != seen_.end() ||
          std::any_of(slots_.begin(), slots_.end(), [&](const auto& s) { return s->key == key; });
      if (!seen) {
        if (seen_.size() == 64) seen_.erase(seen_.begin());
        seen_.push_back(key);
        return nullptr;
      }
    }
    for (auto& slot : slots_) {
      if (slot->key == key && slot->idle()) {
        slot->last_use = ++clock_;
        return slot.get();
      }
    }
    if (!make_room(new_bytes)) return nullptr;
    slots_.push_back(std::make_unique<Slot>());
    Slot* slot = slots_.back().get();
    slot->key = key;
    slot->last_use = ++clock_;
    make(*slot);
    return slot;
  }

  // The slot whose forward made these gates and cs, if it is on this key (device, stream, shape).
  Slot* owner(const Key& key, const at::Tensor& gates, const at::Tensor& cs) {
    if (lstm_paths().step_graphs.load(std::memory_order_relaxed) == PathChoice::kNever) {
      return nullptr;
    }
    for (auto& slot : slots_) {
      if (slot->key == key && slot->gates.const_data_ptr() == gates.const_data_ptr() &&
          slot->cs.const_data_ptr() == cs.const_data_ptr()) {
        slot->last_use = ++clock_;
        return slot.get();
      }
    }
    return nullptr;
  }

 private:
  // Drops idle slots, least recently used first, until one of new_bytes fits the limits.
  bool make_room(int64_t new_bytes) {
    while (true) {
      int64_t total = new_bytes;
      for (const auto& slot : slots_) total += slot->bytes();
      if (slots_.size() < kGraphMaxSlots && total <= kGraphMaxBytes) return true;
      auto oldest = slots_.end();
      for (auto it = slots_.begin(); it != slots_.end(); ++it) {
        if ((*it)->idle() && (oldest == slots_.end() || (*it)->last_use < (*oldest)->last_use)) {
          oldest = it;
        }
      }
      if (oldest == slots_.end()) return false;
      // Its graphs may still be running: CUDA frees a graph when it ends, and the caching
      // allocator reuses the memory in the order of the stream it was made on, the graphs' own.
      slots_.erase(oldest);
    }
  }

  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Key> seen_;  // the shapes called lately, to capture from a second call
  uint64_t clock_ = 0;
};

GraphCache<StepGraphSlot>& step_graphs() {
  static auto* cache = new GraphCache<StepGraphSlot>;  // never deleted: no CUDA calls at exit
  return *cache;
}

// cuBLAS's workspace for a graph: our own, the size PyTorch gives its handles. PyTorch's may be
// freed (torch._C._cuda_clearCublasWorkspaces) while a recorded graph still points at it.
at::Tensor blas_workspace(const at::Tensor& like) {
  return at::empty({static_cast<int64_t>(at::cuda::getChosenWorkspaceSize())},
                   like.options().dtype(at::kByte));
}

// The handle for issuing into a graph on the current stream, with `workspace` as its workspace.
Blas blas_for_graph(at::ScalarType dtype, at::Tensor& workspace) {
  Blas blas = blas_for(dtype);
  TORCH_CUDABLAS_CHECK(cublasSetWorkspace(blas.handle, workspace.data_ptr(), workspace.nbytes()));
  return blas;
}

LstmOut lstm_cuda(const at::Tensor& x_in, const at::Tensor& h0_in, const at::Tensor& c0,
                  const at::Tensor& w_ih_in, const at::Tensor& w_hh_in, const at::Tensor& b_ih,
                  const at::Tensor& b_hh) {
  const LstmSizes s = check_lstm_inputs(x_in, h0_in, c0, w_ih_in, w_hh_in, b_ih, b_hh, "lstm");
  const int64_t T = s.steps, B = s.batch, I = s.input, H = s.hidden;
  check_cuda(x_in, "lstm", "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  // cuBLAS reads row-major matrices with unit column stride: contiguous (free when they are).
  const at::Tensor x = x_in.contiguous(), h0_c = h0_in.contiguous();
  const at::Tensor w_ih = w_ih_in.contiguous(), w_hh_c = w_hh_in.contiguous();
  const auto dtype = x.scalar_type(), acc = opmath_dtype(x);
  const auto acc_options = x.options().dtype(acc);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const Blas blas = blas_for(dtype);
  // The step loop from a graph: not where both passes run persistent, not while the caller is
  // capturing a graph of its own. Where only the forward fits the persistent kernel, it writes
  // into a slot's memory all the same, and the backward's loop is replayed from the slot's graph.
  std::unique_lock<std::mutex> cache_lock;
  StepGraphSlot* slot = nullptr;
  if (T > 1 && B > 0 && !lstm_backward_runs_persistent(B, H, dtype) && !is_capturing(stream)) {
    cache_lock = std::unique_lock<std::mutex>(graphs_mutex());
    const StepGraphKey key = key_for(x, stream, blas, s);
    // Both passes' memory: gates and dgates, y and grad_y, w_hh in x's dtype; cs, dh, dc and
    // the bias in the compute dtype.
    const int64_t elements = 2 * T * B * 4 * H + 2 * T * B * H + 4 * H * H + B * H;
    const int64_t acc_elements = (T + 1) * B * H + 2 * B * H + 4 * H;
    const int64_t bytes = elements * x.element_size() + acc_elements * at::elementSize(acc);
    slot = step_graphs().acquire(key, bytes, [&](StepGraphSlot& made) {
      made.w_hh = at::empty_like(w_hh_c);
      made.bias = at::empty({4 * H}, acc_options);
      made.h0 = at::empty_like(h0_c);
      made.gates = at::empty({T, B, 4 * H}, x.options());
      made.cs = at::empty({T + 1, B, H}, acc_options);
      made.y = at::empty({T, B, H}, x.options());
      made.workspace = blas_workspace(x);
    });
    if (slot == nullptr) cache_lock.unlock();
  }
  // The gates in x's dtype, as nn.LSTMCell keeps them: for bfloat16 at B = 4096 they are the
  // largest tensor by far (T*B*4H), and float32 gates doubled the bytes every step moves.
  at::Tensor gates = slot ? slot->gates : at::empty({T, B, 4 * H}, x.options());
  at::Tensor cs = slot ? slot->cs : at::empty({T + 1, B, H}, acc_options);
  at::Tensor y = slot ? slot->y : at::empty({T, B, H}, x.options());
  cs[0].copy_(c0);
  if (T * B == 0) return {y, fresh(h0_c, dtype), fresh(c0, dtype), gates, cs};
  at::Tensor bias = b_ih.to(acc) + b_hh.to(acc);
  const at::Tensor h0 = slot ? slot->h0.copy_(h0_c) : h0_c;
  const at::Tensor w_hh = slot ? slot->w_hh.copy_(w_hh_c) : w_hh_c;
  if (slot) bias = slot->bias.copy_(bias);

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "lstm", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    scalar_t* g = gates.mutable_data_ptr<scalar_t>();
    // 1. gates = x W_ih^T for all T steps: one (T*B, I) x (I, 4H) product.
    gemm(blas, false, true, T * B, 4 * H, I, x.const_data_ptr<scalar_t>(), I,
         w_ih.const_data_ptr<scalar_t>(), I, 0.0, g, 4 * H, dtype, dtype);
    // All T steps as one launch, at small batch, when they fit: on tensor cores in the half types
    // (lstm_persistent_tc.cu), else on CUDA cores (lstm_persistent.cu).
    if (lstm_forward_persistent_tc(gates, w_hh, bias, h0, cs, y)) return;
    if (lstm_forward_persistent(gates, w_hh, bias, h0, cs, y)) return;
    ForwardSteps<scalar_t, acc_t> steps;
    steps.gates = g;
    steps.bias = bias.const_data_ptr<acc_t>();
    steps.cs = cs.mutable_data_ptr<acc_t>();
    steps.y = y.mutable_data_ptr<scalar_t>();
    steps.h0 = h0.const_data_ptr<scalar_t>();
    steps.w_hh = w_hh.const_data_ptr<scalar_t>();
    steps.steps = T, steps.batch = B, steps.hidden = H;
    steps.grid = grid_for(lstm_step_forward_kernel<scalar_t, acc_t>, B * H);
    if (slot == nullptr) return forward_steps(blas, stream, steps, dtype);
    if (!slot->forward.ready()) {
      slot->forward.capture([&] { return blas_for_graph(dtype, slot->workspace); },
                            [&](const Blas& recording, cudaStream_t side) {
                              forward_steps(recording, side, steps, dtype);
                            });
      blas_for(dtype);  // the handle back on this call's stream, as in the backward
    }
    slot->forward.replay(stream);
  });
  LstmOut out{y, fresh(y[T - 1], dtype), fresh(cs[T], dtype), gates, cs};
  if (slot) {  // the caller's handles on the slot's memory
    std::get<0>(out) = share(y);
    std::get<3>(out) = share(gates);
    std::get<4>(out) = share(cs);
  }
  return out;
}

LstmGrads lstm_backward_cuda(const at::Tensor& grad_y_in, const at::Tensor& grad_hn,
                             const at::Tensor& grad_cn, const at::Tensor& x_in,
                             const at::Tensor& h0_in, const at::Tensor& w_ih_in,
                             const at::Tensor& w_hh_in, const at::Tensor& y_in,
                             const at::Tensor& gates_in, const at::Tensor& cs_in) {
  const LstmSizes s = check_lstm_backward_inputs(grad_y_in, grad_hn, grad_cn, x_in, h0_in, w_ih_in,
                                                 w_hh_in, y_in, gates_in, cs_in);
  const int64_t T = s.steps, B = s.batch, I = s.input, H = s.hidden;
  check_cuda(x_in, "lstm_backward", "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor grad_y_c = grad_y_in.contiguous(), x = x_in.contiguous();
  const at::Tensor h0 = h0_in.contiguous(), w_ih = w_ih_in.contiguous();
  const at::Tensor w_hh_c = w_hh_in.contiguous(), y = y_in.contiguous();
  const at::Tensor gates = gates_in.contiguous(), cs = cs_in.contiguous();
  const auto dtype = x.scalar_type(), acc = opmath_dtype(x);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  Blas blas = blas_for(dtype);
  // The step loop from the graph of the slot whose forward made these gates, if any.
  std::unique_lock<std::mutex> cache_lock;
  StepGraphSlot* slot = nullptr;
  if (T > 1 && B > 0 && !lstm_backward_runs_persistent(B, H, dtype) && !is_capturing(stream)) {
    cache_lock = std::unique_lock<std::mutex>(graphs_mutex());
    const StepGraphKey key = key_for(x, stream, blas, s);
    slot = step_graphs().owner(key, gates, cs);
    if (slot == nullptr) {
      cache_lock.unlock();
    } else if (!slot->dgates.defined()) {
      slot->grad_y = at::empty_like(grad_y_c);
      slot->dh = at::empty({B, H}, x.options().dtype(acc));
      slot->dc = at::empty({B, H}, x.options().dtype(acc));
      slot->dgates = at::empty({T, B, 4 * H}, x.options());
    }
  }
  // dh and dc carry the gradient from step to step, in the compute dtype; dgates is in x's dtype
  // because it is an operand of the products, like x and the weights.
  at::Tensor dh = slot ? slot->dh.copy_(grad_hn) : fresh(grad_hn, acc);
  at::Tensor dc = slot ? slot->dc.copy_(grad_cn) : fresh(grad_cn, acc);
  at::Tensor dgates = slot ? slot->dgates : at::empty({T, B, 4 * H}, x.options());
  const at::Tensor grad_y = slot ? slot->grad_y.copy_(grad_y_c) : grad_y_c;
  const at::Tensor w_hh = slot ? slot->w_hh.copy_(w_hh_c) : w_hh_c;
  at::Tensor grad_x = at::empty({T, B, I}, x.options());
  at::Tensor grad_w_ih = at::zeros({4 * H, I}, x.options().dtype(acc));
  at::Tensor grad_w_hh = at::zeros({4 * H, H}, x.options().dtype(acc));
  if (T * B == 0) {
    return {grad_x,
            fresh(dh, dtype),
            fresh(dc, dtype),
            grad_w_ih.to(dtype),
            grad_w_hh.to(dtype),
            at::zeros({4 * H}, x.options())};
  }

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "lstm_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    scalar_t* dg = dgates.mutable_data_ptr<scalar_t>();
    BackwardSteps<scalar_t, acc_t> steps;
    steps.grad_y = grad_y.const_data_ptr<scalar_t>();
    steps.dh = dh.mutable_data_ptr<acc_t>();
    steps.dc = dc.mutable_data_ptr<acc_t>();
    steps.gates = gates.const_data_ptr<scalar_t>();
    steps.cs = cs.const_data_ptr<acc_t>();
    steps.dgates = dg;
    steps.w_hh = w_hh.const_data_ptr<scalar_t>();
    steps.steps = T, steps.batch = B, steps.hidden = H;
    steps.grid = grid_for(lstm_step_backward_kernel<scalar_t, acc_t>, B * H);
    if (slot != nullptr) {
      if (!slot->backward.ready()) {
        slot->backward.capture([&] { return blas_for_graph(dtype, slot->workspace); },
                               [&](const Blas& recording, cudaStream_t side) {
                                 backward_steps(recording, side, steps, dtype);
                               });
        // The thread's one cuBLAS handle was bound to the recording stream, with the slot's
        // workspace: bind it back to this call's stream before the products below.
        blas = blas_for(dtype);
      }
      slot->backward.replay(stream);
    } else if (!lstm_backward_persistent(grad_y, w_hh, gates, cs, dh, dc, dgates)) {
      // All T steps back as one launch (lstm_persistent.cu) at small batch, when they fit.
      backward_steps(blas, stream, steps, dtype);
    }
    // 4. One product each over all T steps.
    const scalar_t* x_ptr = x.const_data_ptr<scalar_t>();
    gemm(blas, false, false, T * B, I, 4 * H, dg, 4 * H, w_ih.const_data_ptr<scalar_t>(), I, 0.0,
         grad_x.mutable_data_ptr<scalar_t>(), I, dtype, dtype);
    gemm(blas, true, false, 4 * H, I, T * B, dg, 4 * H, x_ptr, I, 0.0,
         grad_w_ih.mutable_data_ptr<acc_t>(), I, dtype, acc);
    // dW_hh = dgates[0]^T h_0 + dgates[1:]^T y[:-1]: h_{t-1} is h0 for the first step, y after.
    acc_t* gw_hh = grad_w_hh.mutable_data_ptr<acc_t>();
    gemm(blas, true, false, 4 * H, H, B, dg, 4 * H, h0.const_data_ptr<scalar_t>(), H, 0.0, gw_hh, H,
         dtype, acc);
    if (T > 1) {
      gemm(blas, true, false, 4 * H, H, (T - 1) * B, dg + B * 4 * H, 4 * H,
           y.const_data_ptr<scalar_t>(), H, 1.0, gw_hh, H, dtype, acc);
    }
  });
  at::Tensor grad_bias = dgates.view({T * B, 4 * H}).sum(0, /*keepdim=*/false, acc).to(dtype);
  return {grad_x,   fresh(dh, dtype), fresh(dc, dtype), grad_w_ih.to(dtype), grad_w_hh.to(dtype),
          grad_bias};
}

// ---- lstm_packed: a packed batch, either direction, optionally projected (csrc/lstm.h) ----------
// csrc/lstm.cpp's lstm_packed_cpu, with the products on cuBLAS and a fused kernel per step. Step t
// works on its batch_sizes[t] rows only, so no thread and no product touches padding. A step's h
// is read where it already is: the step before's rows of y, and h0 for rows that begin here (in
// reverse); c_state holds every sequence's c, and the step kernel writes h_n for the rows that
// end. Per step, 2 calls forward and 2 backward; a projection adds a product forward (and a copy of
// h_n where sequences end) and an addition and a product backward; a step where sequences begin
// adds a product for their rows.

// Where one step of lstm_packed's forward reads and writes, each pointer at the step's first row.
template <typename scalar_t, typename acc_t>
struct PackedStepForward {
  scalar_t* gates;    // (rows, 4H): x W_ih^T + h W_hh^T in, the activated gates out
  const acc_t* bias;  // (4H,): b_ih + b_hh
  acc_t* c_state;     // (B, H): every sequence's c; the first `rows` are read and written
  acc_t* c_saved;     // (rows, H): this step's c, for the backward
  scalar_t* out;      // (rows, H): o * tanh(c), which is y, or r when projected
  scalar_t* h_n;      // (B, H) or null: gets the h of rows from `staying` on, which end
  int64_t staying;    // how many rows take part in the next step
  const scalar_t* h_continuing;  // (continuing, P): the h of rows that were in the step before
  int64_t continuing;
  const scalar_t* h0;                  // (B, P): the h of rows that begin at this step
  scalar_t* h_prev;                    // (rows, P): the h each row started from, for dW_hh
  int64_t out_features, rows, hidden;  // P, this step's rows, H
};

// One step forward on a.rows rows: as lstm_step_forward_kernel, with c in a state buffer, h_n
// written for the rows that end here, and the h each row started from saved for the backward: a
// read and a write more per element, and no launch of their own.
template <typename scalar_t, typename acc_t>
__global__ void lstm_packed_step_forward_kernel(const PackedStepForward<scalar_t, acc_t> a) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < a.rows * a.hidden; idx += stride) {
    const int64_t b = idx / a.hidden, j = idx % a.hidden;
    acc_t o;
    const acc_t c =
        gates_forward(a.gates + b * 4 * a.hidden, a.bias, j, a.hidden, a.c_state[idx], &o);
    a.c_state[idx] = c;
    a.c_saved[idx] = c;
    const scalar_t h = static_cast<scalar_t>(o * tanh(c));
    a.out[idx] = h;
    if (a.h_n != nullptr && b >= a.staying) a.h_n[idx] = h;
    if (idx < a.rows * a.out_features) {  // h has out_features <= hidden per row
      a.h_prev[idx] = idx / a.out_features < a.continuing ? a.h_continuing[idx] : a.h0[idx];
    }
  }
}

// One step back on `rows` rows: as lstm_step_backward_kernel, with the gradient reaching
// o * tanh(c) given as grad_y + dh (grad_y null when projected: dh then holds all of it), and c
// before the step read from c_prev for the first `continuing` rows and from c0 for the rows that
// begin at this step.
template <typename scalar_t, typename acc_t>
__global__ void lstm_packed_step_backward_kernel(
    const scalar_t* __restrict__ grad_y, const acc_t* __restrict__ dh, acc_t* __restrict__ dc,
    const scalar_t* __restrict__ gates, const acc_t* __restrict__ c,
    const acc_t* __restrict__ c_prev, int64_t continuing, const acc_t* __restrict__ c0,
    scalar_t* __restrict__ dgates, int64_t rows, int64_t hidden) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < rows * hidden; idx += stride) {
    const int64_t b = idx / hidden, j = idx % hidden;
    const acc_t dh_t = (grad_y != nullptr ? static_cast<acc_t>(grad_y[idx]) : acc_t(0)) + dh[idx];
    const acc_t cp = b < continuing ? c_prev[idx] : c0[idx];
    dc[idx] = gates_backward(gates + b * 4 * hidden, dgates + b * 4 * hidden, j, hidden, dh_t,
                             dc[idx], c[idx], cp);
  }
}

// out = a + b, rounded to scalar_t: the gradient reaching a projected step's h (grad_y + dh), an
// operand of the products that follow.
template <typename scalar_t, typename acc_t>
__global__ void add_rounded_kernel(const scalar_t* __restrict__ a, const acc_t* __restrict__ b,
                                   scalar_t* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += stride) {
    out[idx] = static_cast<scalar_t>(static_cast<acc_t>(a[idx]) + b[idx]);
  }
}

// Copies `count` elements between device buffers on the current stream (capturable in a graph).
template <typename T>
void copy_async(T* dst, const T* src, int64_t count, cudaStream_t stream) {
  if (count > 0) {
    C10_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  }
}

// Step 2 for every step of a packed batch, in the order it runs: per step the product with W_hh
// (two where sequences begin), the fused kernel and, when projected, the product with W_hr. What it
// reads and writes, each pointer at the first row.
template <typename scalar_t, typename acc_t>
struct PackedForwardSteps {
  scalar_t* gates;       // (N, 4H): x W_ih^T in, the activated gates out
  const acc_t* bias;     // (4H,)
  acc_t* c_state;        // (B, H): c0 in, c_n out
  acc_t* cs;             // (N, H): each row's c
  scalar_t* r;           // (N, H) when projected, else null
  scalar_t* y;           // (N, P)
  scalar_t* h_n;         // (B, P)
  scalar_t* h_prev;      // (N, P)
  const scalar_t* h0;    // (B, P)
  const scalar_t* w_hh;  // (4H, P)
  const scalar_t* w_hr;  // (P, H) or null
  int64_t grid;
};

template <typename scalar_t, typename acc_t>
void packed_forward_steps(const Blas& blas, cudaStream_t stream, const LstmPackedSizes& s,
                          bool reverse, const PackedForwardSteps<scalar_t, acc_t>& a,
                          at::ScalarType dtype) {
  const int64_t H = s.hidden, P = s.out;
  const bool projected = a.w_hr != nullptr;
  const char* op = "lstm_packed";
  for (int64_t k = 0; k < s.steps; ++k) {
    const int64_t t = s.step(k, reverse), n = s.batch_sizes[t], first = s.offsets[t];
    if (n == 0) continue;  // an empty batch: no rows, and a launch of no blocks is an error
    // This step's rows: gates += h W_hh^T, h being the step before's y for the rows that
    // continue and h0 for those that begin here; then the pointwise part, then the projection.
    const PreviousRows prev = previous_rows(s, k, reverse);
    const scalar_t* h_continuing = a.y + prev.offset * P;
    gemm(blas, false, true, prev.count, 4 * H, P, h_continuing, P, a.w_hh, P, 1.0,
         a.gates + first * 4 * H, 4 * H, dtype, dtype, op);
    gemm(blas, false, true, n - prev.count, 4 * H, P, a.h0 + prev.count * P, P, a.w_hh, P, 1.0,
         a.gates + (first + prev.count) * 4 * H, 4 * H, dtype, dtype, op);
    // Rows from `staying` on end at this step (forward: the sequences of this length; in
    // reverse: all of them, at step 0). Their h is h_n.
    const int64_t staying =
        k + 1 < s.steps ? std::min(s.batch_sizes[s.step(k + 1, reverse)], n) : 0;
    PackedStepForward<scalar_t, acc_t> step{};
    step.gates = a.gates + first * 4 * H;
    step.bias = a.bias;
    step.c_state = a.c_state;
    step.c_saved = a.cs + first * H;
    step.out = projected ? a.r + first * H : a.y + first * P;
    step.h_n = projected ? nullptr : a.h_n;
    step.staying = staying;
    step.h_continuing = h_continuing;
    step.continuing = prev.count;
    step.h0 = a.h0;
    step.h_prev = a.h_prev + first * P;
    step.out_features = P;
    step.rows = n;
    step.hidden = H;
    lstm_packed_step_forward_kernel<scalar_t, acc_t><<<a.grid, kThreads, 0, stream>>>(step);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (projected) {  // y_t = r_t W_hr^T, which the next step reads as its h
      gemm(blas, false, true, n, P, H, a.r + first * H, H, a.w_hr, H, 0.0, a.y + first * P, P,
           dtype, dtype, op);
      copy_async(a.h_n + staying * P, a.y + (first + staying) * P, (n - staying) * P, stream);
    }
  }
}

// Step 3 for every step of a packed batch, in reverse order: when projected, the gradient reaching
// r ((grad_y + dh) W_hr); the fused kernel; the gradient reaching the h each row started from
// (dgates W_hh). Each pointer at the first row.
template <typename scalar_t, typename acc_t>
struct PackedBackwardSteps {
  const scalar_t* grad_y;  // (N, P)
  acc_t* dh;               // (B, P): the gradient of h_n in, of h0 out
  acc_t* dc;               // (B, H): the gradient of c_n in, of c0 out
  const scalar_t* gates;   // (N, 4H), as the forward left them
  const acc_t* cs;         // (N, H)
  const acc_t* c0;         // (B, H)
  scalar_t* dgates;        // (N, 4H), written
  scalar_t* dh_all;        // (N, P) when projected: each step's grad_y + dh, for dW_hr
  acc_t* dr;               // (B, H) when projected
  const scalar_t* w_hh;    // (4H, P)
  const scalar_t* w_hr;    // (P, H) or null
  int64_t grid, add_grid;
};

template <typename scalar_t, typename acc_t>
void packed_backward_steps(const Blas& blas, cudaStream_t stream, const LstmPackedSizes& s,
                           bool reverse, const PackedBackwardSteps<scalar_t, acc_t>& a,
                           at::ScalarType dtype) {
  const int64_t H = s.hidden, P = s.out;
  const auto acc = opmath_dtype(dtype);
  const char* op = "lstm_packed_backward";
  for (int64_t k = s.steps - 1; k >= 0; --k) {
    const int64_t t = s.step(k, reverse), n = s.batch_sizes[t], first = s.offsets[t];
    if (n == 0) continue;
    const PreviousRows prev = previous_rows(s, k, reverse);
    const scalar_t* grad_y_t = a.grad_y + first * P;
    const acc_t* dh_t = a.dh;
    if (a.w_hr != nullptr) {  // the gradient reaching r: (grad_y + dh) W_hr
      scalar_t* dh_rows = a.dh_all + first * P;
      add_rounded_kernel<scalar_t, acc_t>
          <<<a.add_grid, kThreads, 0, stream>>>(grad_y_t, a.dh, dh_rows, n * P);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      gemm(blas, false, false, n, H, P, dh_rows, P, a.w_hr, H, 0.0, a.dr, H, dtype, acc, op);
      grad_y_t = nullptr;
      dh_t = a.dr;
    }
    lstm_packed_step_backward_kernel<scalar_t, acc_t><<<a.grid, kThreads, 0, stream>>>(
        grad_y_t, dh_t, a.dc, a.gates + first * 4 * H, a.cs + first * H, a.cs + prev.offset * H,
        prev.count, a.c0, a.dgates + first * 4 * H, n, H);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // The gradient reaching the h this step started from: dgates W_hh.
    gemm(blas, false, false, n, P, 4 * H, a.dgates + first * 4 * H, 4 * H, a.w_hh, P, 0.0, a.dh, P,
         dtype, acc, op);
  }
}

// lstm_packed's step loops from CUDA graphs, as lstm's: a slot's graph replays one packed batch's
// steps, so its key holds the batch's sizes, step by step. A padded batch with a projection (the
// same B at every step) then replays one graph from its second call; packed batches of sequences
// whose lengths change from batch to batch are seen once each, and never recorded.
struct PackedGraphKey {
  int device;
  cudaStream_t stream;
  at::ScalarType dtype;
  cublasComputeType_t compute;
  bool inference, reverse;
  int64_t batch, input, hidden, out;  // B, I, H, P
  std::vector<int64_t> batch_sizes;
  bool operator==(const PackedGraphKey& o) const {
    return std::tie(device, stream, dtype, compute, inference, reverse, batch, input, hidden, out,
                    batch_sizes) == std::tie(o.device, o.stream, o.dtype, o.compute, o.inference,
                                             o.reverse, o.batch, o.input, o.hidden, o.out,
                                             o.batch_sizes);
  }
};

PackedGraphKey packed_key_for(const at::Tensor& x, cudaStream_t stream, const Blas& blas,
                              const LstmPackedSizes& s, bool reverse) {
  return {x.get_device(), stream,  x.scalar_type(), blas.compute, c10::InferenceMode::is_enabled(),
          reverse,        s.batch, s.input,         s.hidden,     s.out,
          s.batch_sizes};
}

struct PackedGraphSlot {
  PackedGraphKey key;
  at::Tensor w_hh, w_hr, bias, h0, c_state, h_n;      // copied in, or the state the loop carries
  at::Tensor gates, cs, r, y, h_prev;                 // the forward's outputs, handed out
  at::Tensor grad_y, dh, dc, c0, dgates, dh_all, dr;  // the backward's, from its first call
  at::Tensor workspace;
  Graph forward, backward;
  uint64_t last_use = 0;

  bool idle() const { return none_held({&gates, &cs, &r, &y, &h_prev}); }
  int64_t bytes() const {
    return total_bytes({&w_hh, &w_hr, &bias, &h0, &c_state, &h_n, &gates, &cs, &r, &y, &h_prev,
                        &grad_y, &dh, &dc, &c0, &dgates, &dh_all, &dr, &workspace});
  }
};

GraphCache<PackedGraphSlot>& packed_graphs() {
  static auto* cache = new GraphCache<PackedGraphSlot>;  // never deleted, as step_graphs()'s
  return *cache;
}

LstmPackedOut lstm_packed_cuda(const at::Tensor& x_in, const at::Tensor& batch_sizes,
                               const at::Tensor& h0_in, const at::Tensor& c0,
                               const at::Tensor& w_ih_in, const at::Tensor& w_hh_in,
                               const at::Tensor& b_ih, const at::Tensor& b_hh,
                               const std::optional<at::Tensor>& w_hr_in, bool reverse) {
  const char* op = "lstm_packed";
  const LstmPackedSizes s =
      check_lstm_packed_inputs(x_in, batch_sizes, h0_in, c0, w_ih_in, w_hh_in, w_hr_in, op);
  check_lstm_bias(x_in, b_ih, b_hh, s.hidden, op);
  check_cuda(x_in, op, "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const int64_t N = s.rows, I = s.input, H = s.hidden, P = s.out, B = s.batch;
  const bool projected = w_hr_in.has_value();
  const at::Tensor x = x_in.contiguous(), h0_c = h0_in.contiguous();
  const at::Tensor w_ih = w_ih_in.contiguous(), w_hh_c = w_hh_in.contiguous();
  const at::Tensor w_hr_c = projected ? w_hr_in->contiguous() : at::Tensor();
  const auto dtype = x.scalar_type(), acc = opmath_dtype(x);
  const auto acc_options = x.options().dtype(acc);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const Blas blas = blas_for(dtype);
  std::unique_lock<std::mutex> cache_lock;
  PackedGraphSlot* slot = nullptr;
  if (s.steps > 1 && N > 0 && !is_capturing(stream)) {
    cache_lock = std::unique_lock<std::mutex>(graphs_mutex());
    // Both passes' memory, as for lstm: in x's dtype gates and dgates, y, grad_y, h_prev and
    // dh_all, r, the weights, h0 and h_n; in the compute dtype cs, the state and its gradients.
    const int64_t elements = N * (8 * H + 4 * P + H) + 4 * H * P + P * H + 2 * B * P;
    const int64_t acc_elements = N * H + B * (3 * H + P) + B * H + 4 * H;
    const int64_t bytes = elements * x.element_size() + acc_elements * at::elementSize(acc);
    slot = packed_graphs().acquire(packed_key_for(x, stream, blas, s, reverse), bytes,
                                   [&](PackedGraphSlot& made) {
                                     made.w_hh = at::empty_like(w_hh_c);
                                     if (projected) made.w_hr = at::empty_like(w_hr_c);
                                     made.bias = at::empty({4 * H}, acc_options);
                                     made.h0 = at::empty_like(h0_c);
                                     made.c_state = at::empty({B, H}, acc_options);
                                     made.h_n = at::empty({B, P}, x.options());
                                     made.gates = at::empty({N, 4 * H}, x.options());
                                     made.cs = at::empty({N, H}, acc_options);
                                     made.r = at::empty({projected ? N : 0, H}, x.options());
                                     // Zeroed once: initcheck checks a graph's copy (of h_n's
                                     // rows, when projected) at launch, before the product that
                                     // writes its source has run.
                                     made.y = at::zeros({N, P}, x.options());
                                     made.h_prev = at::empty({N, P}, x.options());
                                     made.workspace = blas_workspace(x);
                                   });
    if (slot == nullptr) cache_lock.unlock();
  }
  at::Tensor gates = slot ? slot->gates : at::empty({N, 4 * H}, x.options());
  at::Tensor cs = slot ? slot->cs : at::empty({N, H}, acc_options);
  at::Tensor r = slot ? slot->r : at::empty({projected ? N : 0, H}, x.options());
  at::Tensor y = slot ? slot->y : at::empty({N, P}, x.options());
  at::Tensor h_prev = slot ? slot->h_prev : at::empty({N, P}, x.options());
  at::Tensor h_n = slot ? slot->h_n.copy_(h0_c) : fresh(h0_c, dtype);
  at::Tensor c_state = slot ? slot->c_state.copy_(c0) : fresh(c0, acc);
  if (N == 0) return {y, h_n, fresh(c0, dtype), gates, cs, r, h_prev};
  at::Tensor bias = b_ih.to(acc) + b_hh.to(acc);
  if (slot) bias = slot->bias.copy_(bias);
  const at::Tensor h0 = slot ? slot->h0.copy_(h0_c) : h0_c;
  const at::Tensor w_hh = slot ? slot->w_hh.copy_(w_hh_c) : w_hh_c;
  const at::Tensor w_hr = slot && projected ? slot->w_hr.copy_(w_hr_c) : w_hr_c;

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "lstm_packed", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    scalar_t* g = gates.mutable_data_ptr<scalar_t>();
    // 1. gates = x W_ih^T for every row of every step: one (N, I) x (I, 4H) product.
    gemm(blas, false, true, N, 4 * H, I, x.const_data_ptr<scalar_t>(), I,
         w_ih.const_data_ptr<scalar_t>(), I, 0.0, g, 4 * H, dtype, dtype, op);
    PackedForwardSteps<scalar_t, acc_t> steps{};
    steps.gates = g;
    steps.bias = bias.const_data_ptr<acc_t>();
    steps.c_state = c_state.mutable_data_ptr<acc_t>();
    steps.cs = cs.mutable_data_ptr<acc_t>();
    steps.r = projected ? r.mutable_data_ptr<scalar_t>() : nullptr;
    steps.y = y.mutable_data_ptr<scalar_t>();
    steps.h_n = h_n.mutable_data_ptr<scalar_t>();
    steps.h_prev = h_prev.mutable_data_ptr<scalar_t>();
    steps.h0 = h0.const_data_ptr<scalar_t>();
    steps.w_hh = w_hh.const_data_ptr<scalar_t>();
    steps.w_hr = projected ? w_hr.const_data_ptr<scalar_t>() : nullptr;
    steps.grid = grid_for(lstm_packed_step_forward_kernel<scalar_t, acc_t>, B * H);
    if (slot == nullptr) return packed_forward_steps(blas, stream, s, reverse, steps, dtype);
    if (!slot->forward.ready()) {
      slot->forward.capture([&] { return blas_for_graph(dtype, slot->workspace); },
                            [&](const Blas& recording, cudaStream_t side) {
                              packed_forward_steps(recording, side, s, reverse, steps, dtype);
                            });
      blas_for(dtype);  // the handle back on this call's stream
    }
    slot->forward.replay(stream);
  });
  if (slot == nullptr) return {y, h_n, c_state.to(dtype), gates, cs, r, h_prev};
  // The caller's handles on the slot's memory; h_n and c_n, small, as copies.
  return {share(y),     fresh(h_n, dtype), fresh(c_state, dtype),
          share(gates), share(cs),         projected ? share(r) : at::empty({0, H}, x.options()),
          share(h_prev)};
}

LstmPackedGrads lstm_packed_backward_cuda(const at::Tensor& grad_y_in, const at::Tensor& grad_hn,
                                          const at::Tensor& grad_cn, const at::Tensor& x_in,
                                          const at::Tensor& batch_sizes, const at::Tensor& h0_in,
                                          const at::Tensor& c0, const at::Tensor& w_ih_in,
                                          const at::Tensor& w_hh_in,
                                          const std::optional<at::Tensor>& w_hr_in, bool reverse,
                                          const at::Tensor& gates_in, const at::Tensor& cs_in,
                                          const at::Tensor& r_in, const at::Tensor& h_prev_in) {
  const char* op = "lstm_packed_backward";
  const LstmPackedSizes s =
      check_lstm_packed_inputs(x_in, batch_sizes, h0_in, c0, w_ih_in, w_hh_in, w_hr_in, op);
  const bool projected = w_hr_in.has_value();
  check_lstm_packed_saved(s, x_in, grad_y_in, grad_hn, grad_cn, gates_in, cs_in, r_in, h_prev_in,
                          projected, op);
  check_cuda(x_in, op, "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const int64_t N = s.rows, I = s.input, H = s.hidden, P = s.out, B = s.batch;
  const at::Tensor grad_y_c = grad_y_in.contiguous(), x = x_in.contiguous();
  const at::Tensor w_ih = w_ih_in.contiguous(), w_hh_c = w_hh_in.contiguous();
  const at::Tensor w_hr_c = projected ? w_hr_in->contiguous() : at::Tensor();
  const at::Tensor gates = gates_in.contiguous(), cs = cs_in.contiguous();
  const at::Tensor r = r_in.contiguous(), h_prev = h_prev_in.contiguous();
  const auto dtype = x.scalar_type(), acc = opmath_dtype(x);
  const auto acc_options = x.options().dtype(acc);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  Blas blas = blas_for(dtype);
  // The step loop from the graph of the slot whose forward made these gates, if any.
  std::unique_lock<std::mutex> cache_lock;
  PackedGraphSlot* slot = nullptr;
  if (s.steps > 1 && N > 0 && !is_capturing(stream)) {
    cache_lock = std::unique_lock<std::mutex>(graphs_mutex());
    slot = packed_graphs().owner(packed_key_for(x, stream, blas, s, reverse), gates, cs);
    if (slot == nullptr) {
      cache_lock.unlock();
    } else if (!slot->dgates.defined()) {
      slot->grad_y = at::empty_like(grad_y_c);
      slot->dh = at::empty({B, P}, acc_options);
      slot->dc = at::empty({B, H}, acc_options);
      slot->c0 = at::empty({B, H}, acc_options);
      slot->dgates = at::empty({N, 4 * H}, x.options());
      slot->dh_all = at::empty({projected ? N : 0, P}, x.options());
      slot->dr = at::empty({projected ? B : 0, H}, acc_options);
    }
  }
  // dh_state and dc_state: the gradient reaching each sequence's current h and c, as the loop
  // walks back; a row that takes no part in a step keeps its gradient.
  at::Tensor dh_state = slot ? slot->dh.copy_(grad_hn) : fresh(grad_hn, acc);
  at::Tensor dc_state = slot ? slot->dc.copy_(grad_cn) : fresh(grad_cn, acc);
  at::Tensor dgates = slot ? slot->dgates : at::empty({N, 4 * H}, x.options());
  at::Tensor grad_x = at::empty({N, I}, x.options());
  at::Tensor grad_w_ih = at::zeros({4 * H, I}, acc_options);
  at::Tensor grad_w_hh = at::zeros({4 * H, P}, acc_options);
  at::Tensor grad_w_hr =  // an empty (0,) without a projection, as on the CPU
      projected ? at::zeros({P, H}, acc_options) : at::zeros({0}, acc_options);
  if (N == 0) {
    return {grad_x,
            fresh(dh_state, dtype),
            fresh(dc_state, dtype),
            grad_w_ih.to(dtype),
            grad_w_hh.to(dtype),
            at::zeros({4 * H}, x.options()),
            grad_w_hr.to(dtype)};
  }
  const at::Tensor grad_y = slot ? slot->grad_y.copy_(grad_y_c) : grad_y_c;
  const at::Tensor c0_acc = slot ? slot->c0.copy_(c0) : c0.to(acc).contiguous();
  const at::Tensor w_hh = slot ? slot->w_hh.copy_(w_hh_c) : w_hh_c;
  const at::Tensor w_hr = slot && projected ? slot->w_hr.copy_(w_hr_c) : w_hr_c;
  at::Tensor dh_all = slot ? slot->dh_all : at::empty({projected ? N : 0, P}, x.options());
  at::Tensor dr = slot ? slot->dr : at::empty({projected ? B : 0, H}, acc_options);

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "lstm_packed_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    scalar_t* dg = dgates.mutable_data_ptr<scalar_t>();
    PackedBackwardSteps<scalar_t, acc_t> steps{};
    steps.grad_y = grad_y.const_data_ptr<scalar_t>();
    steps.dh = dh_state.mutable_data_ptr<acc_t>();
    steps.dc = dc_state.mutable_data_ptr<acc_t>();
    steps.gates = gates.const_data_ptr<scalar_t>();
    steps.cs = cs.const_data_ptr<acc_t>();
    steps.c0 = c0_acc.const_data_ptr<acc_t>();
    steps.dgates = dg;
    steps.dh_all = projected ? dh_all.mutable_data_ptr<scalar_t>() : nullptr;
    steps.dr = projected ? dr.mutable_data_ptr<acc_t>() : nullptr;
    steps.w_hh = w_hh.const_data_ptr<scalar_t>();
    steps.w_hr = projected ? w_hr.const_data_ptr<scalar_t>() : nullptr;
    // Sized for the largest step, once: grid_for asks the driver, which a loop should not do.
    steps.grid = grid_for(lstm_packed_step_backward_kernel<scalar_t, acc_t>, B * H);
    steps.add_grid = grid_for(add_rounded_kernel<scalar_t, acc_t>, B * P);
    if (slot == nullptr) {
      packed_backward_steps(blas, stream, s, reverse, steps, dtype);
    } else {
      if (!slot->backward.ready()) {
        slot->backward.capture([&] { return blas_for_graph(dtype, slot->workspace); },
                               [&](const Blas& recording, cudaStream_t side) {
                                 packed_backward_steps(recording, side, s, reverse, steps, dtype);
                               });
        blas = blas_for(dtype);  // the handle back on this call's stream, for the products below
      }
      slot->backward.replay(stream);
    }
    // Every product that does not wait on the recurrence, once over all N rows.
    gemm(blas, false, false, N, I, 4 * H, dg, 4 * H, w_ih.const_data_ptr<scalar_t>(), I, 0.0,
         grad_x.mutable_data_ptr<scalar_t>(), I, dtype, dtype, op);
    gemm(blas, true, false, 4 * H, I, N, dg, 4 * H, x.const_data_ptr<scalar_t>(), I, 0.0,
         grad_w_ih.mutable_data_ptr<acc_t>(), I, dtype, acc, op);
    gemm(blas, true, false, 4 * H, P, N, dg, 4 * H, h_prev.const_data_ptr<scalar_t>(), P, 0.0,
         grad_w_hh.mutable_data_ptr<acc_t>(), P, dtype, acc, op);
    if (projected) {
      gemm(blas, true, false, P, H, N, dh_all.const_data_ptr<scalar_t>(), P,
           r.const_data_ptr<scalar_t>(), H, 0.0, grad_w_hr.mutable_data_ptr<acc_t>(), H, dtype, acc,
           op);
    }
  });
  at::Tensor grad_bias = dgates.sum(0, /*keepdim=*/false, acc).to(dtype);
  return {grad_x,
          fresh(dh_state, dtype),
          fresh(dc_state, dtype),
          grad_w_ih.to(dtype),
          grad_w_hh.to(dtype),
          grad_bias,
          grad_w_hr.to(dtype)};
}

}  // namespace

TORCH_LIBRARY_IMPL(custom_ops, CUDA, m) {
  m.impl("lstm", &lstm_cuda);
  m.impl("lstm_backward", &lstm_backward_cuda);
  m.impl("lstm_packed", &lstm_packed_cuda);
  m.impl("lstm_packed_backward", &lstm_packed_backward_cuda);
}

}  // namespace custom_ops::cuda
