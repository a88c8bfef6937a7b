#include "model/cuda/compressor.h"

#include "model/cuda/paged_entries.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxPerThread = 8;  // channels of an entry per thread: d' <= 1024

// Where the row at position q of sequence b comes from: the run (row q - p), the stored tail
// (HCA: row q % m; CSA: rows m .. for the window open before the run, 0 .. for the one before
// it), or nowhere (q < 0 or q >= p + L).
struct RowRef {
  const float* kv = nullptr;  // null: no row
  const float* score = nullptr;
  const float* ape = nullptr;  // added to score for run rows (the tail's already has it)
};

__device__ RowRef locate(const CompressorArgs& a, int64_t b, int64_t q) {
  const int64_t p = a.start[b], m = a.ratio, c = a.overlap, width = c * a.dim;
  RowRef r;
  if (q < 0 || q >= p + a.len) return r;
  if (q >= p) {
    const int64_t row = b * a.len + (q - p);
    r.kv = a.kv_rows + row * width;
    r.score = a.score_rows + row * width;
    r.ape = a.ape + (q % m) * width;
    return r;
  }
  int64_t row = q % m;
  if (c == 2 && q >= (p / m) * m) row += m;
  const int64_t at = (a.slots[b] * c * m + row) * width;
  r.kv = a.tail_kv + at;
  r.score = a.tail_score + at;
  return r;
}

// Block (b, k): candidate window w = floor(p/m) + k of sequence b, if the run completes it.
__global__ void __launch_bounds__(kThreads) entries_kernel(const CompressorArgs a) {
  __shared__ float y_s[kMaxPerThread * kThreads];
  __shared__ float part_s[kThreads / 32];
  const int64_t b = blockIdx.x, p = a.start[b], m = a.ratio, d = a.dim;
  const int64_t w = p / m + blockIdx.y;
  if (w >= (p + a.len) / m) return;                          // incomplete: nothing written
  const int per_thread = (a.dim + kThreads - 1) / kThreads;  // channels threadIdx.x * per_thread + i < d'
  float pooled[kMaxPerThread];
  float squares = 0.0f;
  for (int i = 0; i < per_thread; ++i) {
    const int ch = threadIdx.x * per_thread + i;
    if (ch >= a.dim) break;
    // Rows of the window: CSA the previous window's channel ch, then this window's d + ch;
    // visit(score, kv) for each row that exists.
    const auto each_row = [&](auto&& visit) {
      for (int part = 0; part < a.overlap; ++part) {
        const int64_t first = (w - (a.overlap - 1 - part)) * m, channel = a.overlap == 2 && part == 1 ? d + ch : ch;
        for (int64_t j = 0; j < m; ++j) {
          const RowRef r = locate(a, b, first + j);
          if (r.kv != nullptr) visit(r.ape != nullptr ? r.score[channel] + r.ape[channel] : r.score[channel], r.kv[channel]);
        }
      }
    };
    float max = -INFINITY;
    each_row([&](float score, float) { max = fmaxf(max, score); });
    float sum = 0.0f, acc = 0.0f;
    each_row([&](float score, float kv) {
      const float e = expf(score - max);
      sum += e;
      acc += e * kv;
    });
    pooled[i] = acc / sum;
    squares += pooled[i] * pooled[i];
  }
  // RMSNorm: the mean of squares over the d' channels, in a fixed order.
  for (int offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  if (threadIdx.x % 32 == 0) part_s[threadIdx.x / 32] = squares;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < kThreads / 32; ++i) total += part_s[i];
  const float inv = rsqrtf(total / static_cast<float>(d) + a.eps);
  for (int i = 0; i < per_thread; ++i) {
    const int ch = threadIdx.x * per_thread + i;
    if (ch >= a.dim) break;
    const float weight = a.norm_weight != nullptr ? a.norm_weight[ch] : __bfloat162float(a.norm_weight_bf16[ch]);
    y_s[ch] = __fmul_rn(__fmul_rn(pooled[i], inv), weight);
  }
  __syncthreads();
  // RoPE on the last r channels, interleaved pairs, at position w m; then the paged write.
  __nv_bfloat16* out = a.paged + paged_entry_row(a.block_tables, b * a.block_stride, w, m) * d;
  const int rope_first = a.dim - a.rope_dim;
  for (int ch = threadIdx.x; ch < a.dim; ch += kThreads) {
    float v = y_s[ch];
    if (ch >= rope_first) {
      const int pair = (ch - rope_first) / 2;
      const float angle = __fmul_rn(static_cast<float>(w * m), a.inv_freq[pair]);
      const float cos = cosf(angle), sin = sinf(angle);
      const float self = y_s[ch], other = y_s[ch ^ 1];  // rope_first is even: pairs (2i, 2i + 1)
      v = (ch - rope_first) % 2 == 0 ? __fadd_rn(__fmul_rn(self, cos), __fmul_rn(other, -sin))
                                     : __fadd_rn(__fmul_rn(self, cos), __fmul_rn(other, sin));
    }
    out[ch] = __float2bfloat16_rn(v);
  }
}

// Block (b, j): row j (and m + j for CSA) of sequence b's new tail. Each thread reads the sources
// of its channels of those rows, then writes them: the only tail cells those sources can be are
// these two, in the same channels (the open window starts at a multiple of m, so a source at
// q < p is tail row q % m = j, or m + j), so no thread reads a cell another writes. One block per row: a sequence's tail (HCA: 128 rows of
// 512 floats, twice) is spread over the device instead of one multiprocessor.
__global__ void __launch_bounds__(kThreads) tail_kernel(const CompressorArgs a) {
  const int64_t b = blockIdx.x, j = blockIdx.y, p = a.start[b], m = a.ratio, c = a.overlap, width = c * a.dim;
  const int64_t open = ((p + a.len) / m) * m;
  float* tail_kv = a.tail_kv + a.slots[b] * c * m * width;
  float* tail_score = a.tail_score + a.slots[b] * c * m * width;
  RowRef rows[2];
  for (int part = 0; part < c; ++part) rows[part] = locate(a, b, open - (c - 1 - part) * m + j);  // CSA: part 0 the window before
  for (int64_t ch = threadIdx.x; ch < width; ch += kThreads) {
    float kv[2], score[2];
    for (int part = 0; part < c; ++part) {
      const RowRef& r = rows[part];
      kv[part] = r.kv != nullptr ? r.kv[ch] : 0.0f;
      score[part] = r.kv == nullptr ? -INFINITY : (r.ape != nullptr ? r.score[ch] + r.ape[ch] : r.score[ch]);
    }
    for (int part = 0; part < c; ++part) {
      tail_kv[(part * m + j) * width + ch] = kv[part];
      tail_score[(part * m + j) * width + ch] = score[part];
    }
  }
}

}  // namespace

cudaError_t compress(const CompressorArgs& a, cudaStream_t stream) {
  if (a.kv_rows == nullptr || a.score_rows == nullptr || a.ape == nullptr || (a.norm_weight == nullptr && a.norm_weight_bf16 == nullptr) ||
      a.inv_freq == nullptr || a.tail_kv == nullptr || a.tail_score == nullptr || a.paged == nullptr || a.start == nullptr ||
      a.slots == nullptr || a.block_tables == nullptr || a.ratio < 1 || 128 % a.ratio != 0 || (a.overlap != 1 && a.overlap != 2) ||
      a.dim < 2 || a.dim % 2 != 0 || a.dim > kMaxPerThread * kThreads || a.rope_dim < 0 || a.rope_dim % 2 != 0 || a.rope_dim > a.dim ||
      a.num_seqs < 0 || a.len < 0 || a.num_seqs > 0x7fffffff) {
    return cudaErrorInvalidValue;
  }
  if (a.num_seqs == 0 || a.len == 0) return cudaSuccess;
  const int64_t candidates = (a.len + a.ratio - 1) / a.ratio;  // windows a run of L can complete, from floor(p/m)
  if (candidates > 65535) return cudaErrorInvalidValue;
  entries_kernel<<<dim3(static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(candidates)), kThreads, 0, stream>>>(a);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  tail_kernel<<<dim3(static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(a.ratio)), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::model::cuda
