#pragma once
// Helpers shared by the tensor-core kernels of model/cuda/: asynchronous 16-byte copies into
// shared memory, ldmatrix loads and the bf16 m16n8k16 MMA (sm_80 and later), and their launch.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// 16 bytes global -> shared, asynchronously; zero-filled when !valid (src is then not read).
__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `pending` committed groups of copies are still in flight.
template <int pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

// Orders this thread's earlier shared-memory writes (cp.async ones included, once waited for)
// before reads by the asynchronous proxy (wgmma, bulk copies) after the next barrier (sm_90).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Four 8 x 8 bf16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// The same, each matrix transposed.
__device__ __forceinline__ void load_matrices_transposed(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// c (16 x 8 float32) += a (16 x 16 bfloat16, row-major) b (16 x 8 bfloat16, column-major).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Launches kernel(args) with `shared` bytes of dynamic shared memory, first raising the kernel's
// limit to that (on every launch: the attribute belongs to the current device; ~1 us of host
// time). The launch's error, or the attribute's.
template <typename... Params, typename... Args>
cudaError_t launch_with_shared(void (*kernel)(Params...), dim3 grid, int threads, size_t shared, cudaStream_t stream, const Args&... args) {
  const cudaError_t configured = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
  if (configured != cudaSuccess) return configured;
  kernel<<<grid, threads, shared, stream>>>(args...);
  return cudaGetLastError();
}

}  // namespace deepinfer::model::cuda
