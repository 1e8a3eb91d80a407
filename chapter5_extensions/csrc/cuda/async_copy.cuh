// async_copy.cuh: 16-byte copies from global to shared memory that bypass registers and L1
// (cp.async.cg), for the persistent LSTM kernels (lstm_persistent.cu, lstm_persistent_tc.cu),
// whose blocks read what other blocks wrote during the previous step.
#pragma once

#include <cuda_runtime.h>

namespace custom_ops::cuda {

// A 16-byte copy from global to shared memory that does not pass through registers (cp.async,
// sm_80 on; .cg: from L2, never this SM's L1). A thread issues all of its copies before waiting
// for any: a loop of plain loads and stores waits a whole L2 round trip (hundreds of cycles) per
// iteration, 16 of them for a (16, 1024) float32 h_{t-1} in every step.
__device__ __forceinline__ void copy16_async(void* smem_dst, const void* global_src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src)
               : "memory");
#else
  *reinterpret_cast<int4*>(smem_dst) = __ldcg(reinterpret_cast<const int4*>(global_src));
#endif
}

// Wait until this thread's copy16_async copies have landed (a __syncthreads() must follow before
// other threads read them).
__device__ __forceinline__ void wait_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

}  // namespace custom_ops::cuda
