// step_graph.h: a run of launches recorded once as a CUDA graph and then replayed with one launch
// (lstm.cu's step loop). Why it pays: chapter5_extensions/further/lstm_layer_bounds.md, "The step
// loop from a CUDA graph".
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>

namespace custom_ops::cuda {

// Whether work issued on `stream` now would be recorded into someone's graph instead of running
// (torch.cuda.graph, torch.compile's CUDA graphs): then the caller's graph holds our launches
// already, and a graph of our own can be neither made nor launched.
inline bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// A stream of our own on the current device, for recording only. A stream from PyTorch's pool
// may be the caller's current one, or another thread's, and a capture records whatever is
// launched on its stream, from any thread. Never destroyed, like PyTorch's own streams.
inline c10::cuda::CUDAStream recording_stream() {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, cudaStream_t> streams;
  const c10::DeviceIndex device = c10::cuda::current_device();
  const std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& stream = streams[device];
  if (stream == nullptr) C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return c10::cuda::getStreamFromExternal(stream, device);
}

// An executable graph, owned: made by capture(), launched by replay().
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // A graph still running is freed when it ends (CUDA's rule), so this need not wait. Not
  // checked: at exit CUDA may be torn down already, and there is nothing left to do.
  ~Graph() {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  }

  bool ready() const { return exec_ != nullptr; }

  // Records what issue(prepared, stream) launches on `stream`, without running it. Both run
  // with recording_stream() as the current one, a stream nothing else launches on, one capture
  // at a time (the caller's lock): prepare() first,
  // before recording starts, for what may allocate (a cuBLAS handle bound to the stream); issue()
  // only launches. An allocation or a synchronization while recording is an error.
  template <typename Prepare, typename Issue>
  void capture(Prepare prepare, Issue issue) {
    const c10::cuda::CUDAStream side = recording_stream();
    const c10::cuda::CUDAStreamGuard on_side(side);
    const auto prepared = prepare();
    // Thread-local: another thread's unrelated CUDA calls meanwhile are no error of ours.
    C10_CUDA_CHECK(cudaStreamBeginCapture(side.stream(), cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      issue(prepared, side.stream());
    } catch (...) {
      (void)cudaStreamEndCapture(side.stream(), &graph);  // leave the stream usable
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      throw;
    }
    C10_CUDA_CHECK(cudaStreamEndCapture(side.stream(), &graph));
    const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
    (void)cudaGraphDestroy(graph);  // the executable graph is a copy
    C10_CUDA_CHECK(made);
  }

  void replay(cudaStream_t stream) const { C10_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace custom_ops::cuda
