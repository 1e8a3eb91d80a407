// cooperative.cuh: what the persistent LSTM kernels (lstm_persistent.cu, lstm_persistent_tc.cu)
// need from a cooperative launch: whether every block can be resident at once, and the launch
// itself, which falls back (returns false) instead of failing when the GPU cannot make them so;
// and whether a kernel was compiled for the architecture its code needs.
#pragma once

#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

namespace custom_ops::cuda {

// Whether `blocks` blocks of `threads` threads and `smem` bytes of dynamic shared memory each fit
// on the GPU at once. Asks the driver (an attribute set, an occupancy query: microseconds), so a
// caller works it out once per size and keeps it. The kernel's shared-memory limit is set to the
// device's maximum, never to this size: kernels run on several threads (a forward and a backward),
// and a smaller value set by one could refuse another's launch.
template <typename Kernel>
bool all_blocks_resident(Kernel kernel, int blocks, int threads, int64_t smem) {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (smem > static_cast<int64_t>(prop->sharedMemPerBlockOptin)) return false;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(prop->sharedMemPerBlockOptin)));
  int per_sm = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return static_cast<int64_t>(per_sm) * prop->multiProcessorCount >= blocks;
}

// Whether `kernel` was compiled for virtual architecture `arch` (80 for sm_80) or newer. A kernel
// whose body is under #if __CUDA_ARCH__ >= arch is empty in PTX for an older architecture, and a
// build for that architecture still runs on a newer GPU (the driver compiles the PTX): it would
// launch, do nothing, and leave its outputs unwritten.
template <typename Kernel>
bool compiled_for(Kernel kernel, int arch) {
  cudaFuncAttributes attributes{};
  C10_CUDA_CHECK(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)));
  return attributes.ptxVersion >= arch;
}

// True if launched on the current stream. A GPU shared with other work (MPS limits, another
// persistent kernel) can refuse to make every block resident at once: the caller then runs another
// path instead of failing.
template <typename Kernel>
bool launch_cooperative(Kernel kernel, int blocks, int threads, int64_t smem, void** args) {
  const cudaError_t error =
      cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), blocks, threads, args,
                                  smem, c10::cuda::getCurrentCUDAStream());
  if (error == cudaErrorCooperativeLaunchTooLarge) {
    (void)cudaGetLastError();  // clear it, so that the next check does not report it
    return false;
  }
  C10_CUDA_CHECK(error);
  return true;
}

}  // namespace custom_ops::cuda
