#pragma once
// What model/cuda/moe_fp4_gemm.cu and moe_fp4_route.cu share: the layout of the GEMMs' B side
// (x rows and activations, the tokens of a tile), the tile lists and the launches of the routing
// stages (sort, gather, sum over slots). Device code only; moe_fp4_gemm.h is the interface.
//
// The reduction dimension is walked in superblocks of 128 values. A weight row's superblock is
// 64 packed bytes (4 e8m0 scale blocks of 32 values); thread t of a quad owns block t (16 bytes,
// one scale), and its 16 bfloat16 pairs (values 8 w + p and 8 w + p + 4 of the block, pair 4 w +
// p) feed the superblock's eight k16 steps in order: step s takes pairs 2 s (the MMA's k slots
// 2 t, 2 t + 1) and 2 s + 1 (slots 2 t + 8, 2 t + 9). So k slot j of step s is not value 16 s + j:
// the B side is stored permuted to match, value v = 32 t + 8 w + 4 e + q of a superblock (t, w,
// q in 0..3, e in 0..1) at the "logical" position 32 w + 8 q + 2 t + e.
//
// A prefill tile's B operand is an "image": the bytes its rows occupy in shared memory, ready
// for wgmma (K-major, 128-byte swizzle). Per 64 logical values (a panel) the tile's R rows (R a
// multiple of 8) of 128 bytes, the 16-byte chunk c of row n at chunk c ^ (n % 8); panels one
// after the other, so a superblock is R x 256 contiguous bytes that one bulk copy brings in.
// Values are stored times 2^64 (the weights are dequantized times 2^-64, so products are exact
// over the whole e8m0 range the header names). Images live one after the other in device memory
// (the gathered x rows of prefill tiles, their activations), a tile's at its image row (tile.w)
// times the row length. A decode tile (at most 8 rows) takes just its rows: its activations are
// rows tile.w + r in the natural order with each group of 8 values in to_operand() order, as its
// kernel (mma.sync, moe_fp4_decode.cu) stages them.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda::moe_fp4_detail {

constexpr int kSuper = 128;
constexpr int kSmallRows = 8;   // decode tiles: up to 8 rows
constexpr int kTileRows = 128;  // prefill tiles: up to 128 rows, an image of the rows rounded up to kImageStep
#ifndef DEEPINFER_MOE_IMAGE_STEP
#define DEEPINFER_MOE_IMAGE_STEP 16
#endif
constexpr int kImageStep = DEEPINFER_MOE_IMAGE_STEP;  // a prefill tile's image rows: its rows rounded up to this
constexpr int kWidths = kTileRows / kImageStep;       // prefill tile widths (image rows): 16, 32, .., 128
constexpr uint32_t kTwo64 = 0x5F805F80u;              // bfloat16 2^64, twice

// Image rows of a prefill tile of `rows` rows (1..kTileRows); a decode tile's image has kSmallRows.
__host__ __device__ constexpr int big_image_rows(int rows) { return (rows + kImageStep - 1) / kImageStep * kImageStep; }

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// 8 natural bfloat16 values x0..x7 -> words (x0, x4), (x1, x5), (x2, x6), (x3, x7), times 2^64.
__device__ __forceinline__ uint4 to_operand(const uint4 v) {
  return make_uint4(mul_bf16x2(__byte_perm(v.x, v.z, 0x5410), kTwo64), mul_bf16x2(__byte_perm(v.x, v.z, 0x7632), kTwo64),
                    mul_bf16x2(__byte_perm(v.y, v.w, 0x5410), kTwo64), mul_bf16x2(__byte_perm(v.y, v.w, 0x7632), kTwo64));
}

// Byte offset in a tile image of R rows of the logical value position L (of the whole
// reduction length) of row n.
__device__ __forceinline__ uint32_t image_offset(int R, int n, int L) {
  const int chunk = (L >> 3) & 7;
  return static_cast<uint32_t>(L >> 6) * (R * 128u) + n * 128 + ((chunk ^ (n & 7)) << 4) + 2 * (L & 7);
}

// The logical position of value v.
__device__ __forceinline__ int logical_position(int v) {
  const int t = (v >> 5) & 3, w = (v >> 3) & 3, e = (v >> 2) & 1, q = v & 3;
  return (v & ~127) | (w << 5) | (q << 3) | (t << 1) | e;
}

// Row n's 128 values of superblock sb, group w (0..3) of each of the four scale blocks: g[t] holds
// values 32 t + 8 w .. + 7 (natural order). They fill the 4 chunks 4 (w % 2) .. + 3 of panel
// 2 sb + w / 2: chunk 4 (w % 2) + q is (word q of each g[t], t = 0..3). Writes those 4 chunks.
__device__ __forceinline__ void store_group_column(uint8_t* image, int R, int n, int sb, int w, const uint4 (&g)[4]) {
  uint4 p[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) p[t] = to_operand(g[t]);
  uint8_t* row = image + static_cast<uint32_t>(2 * sb + (w >> 1)) * (R * 128u) + n * 128;
  const int first = 4 * (w & 1);
  *reinterpret_cast<uint4*>(row + (((first + 0) ^ (n & 7)) << 4)) = make_uint4(p[0].x, p[1].x, p[2].x, p[3].x);
  *reinterpret_cast<uint4*>(row + (((first + 1) ^ (n & 7)) << 4)) = make_uint4(p[0].y, p[1].y, p[2].y, p[3].y);
  *reinterpret_cast<uint4*>(row + (((first + 2) ^ (n & 7)) << 4)) = make_uint4(p[0].z, p[1].z, p[2].z, p[3].z);
  *reinterpret_cast<uint4*>(row + (((first + 3) ^ (n & 7)) << 4)) = make_uint4(p[0].w, p[1].w, p[2].w, p[3].w);
}

// Launches of moe_fp4_route.cu. Tiles are int4 (expert, first sorted row, rows, image row).
// The pairs (token k + slot) of experts[tokens k] that fall in [first, first + E) sorted by
// expert, stable, into order[counts[2]]; each expert's rows cut into a decode tile (1..8 rows) or
// prefill tiles (128 rows, the last one shorter), each with its image row (the experts' images
// one after the other: a decode tile's rows, big_image_rows() of a prefill tile's). Decode tiles
// in small[counts[0]], in expert order; prefill tiles by width: class c (image rows kImageStep (c + 1))
// in big[c big_cap ..], counts[4 + c] of them, in expert order; counts[1] all of them. One block,
// route_shared_bytes(E) bytes of shared memory.
size_t route_shared_bytes(int num_experts);
cudaError_t launch_route(const int64_t* experts, int64_t pairs, int64_t first, int num_experts, int64_t* order, int4* small, int4* big,
                         int64_t big_cap, int32_t* counts, cudaStream_t stream);
// The images of the prefill tiles' x rows (every class of big), x[order[row] / k] for each of
// their rows, into `images` (rows past a tile's own are left as they are).
cudaError_t launch_gather(const __nv_bfloat16* x, const int64_t* order, int64_t k, const int4* big, int64_t big_cap, const int32_t* counts,
                          int dim, uint8_t* images, int sms, cudaStream_t stream);
// out[t] = sum over slots s in order of per_pair[t k + s] weights[t k + s] (each product rounded to
// float32) where experts[t k + s] is in [first, last); per_slot: out[t k + s] = that product, or 0
// outside [first, last) (no sum). Launched as a programmatic dependent of the kernel before it
// (sm90_bulk.cuh).
cudaError_t launch_combine(const __nv_bfloat16* per_pair, const int64_t* experts, const float* weights, int64_t tokens, int k,
                           int64_t first, int64_t last, int dim, float* out, bool per_slot, int sms, cudaStream_t stream);

// Launches kernel(args) with `shared` bytes of dynamic shared memory as a programmatic dependent
// of the stream's previous kernel (cudaLaunchAttributeProgrammaticStreamSerialization): its
// blocks may start before that kernel ends and must call sm90::wait_for_previous_grid() before
// reading what it wrote.
template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, int threads, size_t shared, cudaStream_t stream, const Args&... args) {
  if (shared > 48 * 1024) {
    const cudaError_t configured = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    if (configured != cudaSuccess) return configured;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

}  // namespace deepinfer::model::cuda::moe_fp4_detail
