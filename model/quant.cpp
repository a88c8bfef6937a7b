#include "model/quant.h"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "model/cuda/kernels.h"

namespace deepinfer::model {
namespace {

at::Tensor table_tensor(const float* values, int64_t n, at::Device device) {
  return at::from_blob(const_cast<float*>(values), {n}, at::TensorOptions().dtype(at::kFloat)).clone().to(device);
}

std::array<float, 256> make_e4m3_values() {
  std::array<float, 256> v{};
  for (int b = 0; b < 256; ++b) {
    const int exponent = (b >> 3) & 0xF;
    const int mantissa = b & 0x7;
    float magnitude;
    if (exponent == 15 && mantissa == 7) {
      magnitude = std::numeric_limits<float>::quiet_NaN();
    } else if (exponent == 0) {
      magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // m/8 * 2^-6
    } else {
      magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);  // (1 + m/8) * 2^(e-7)
    }
    v[b] = (b & 0x80) ? -magnitude : magnitude;  // 0x80 decodes to -0.0
  }
  return v;
}

std::array<float, 256> make_e8m0_values() {
  std::array<float, 256> v{};
  for (int b = 0; b < 255; ++b) v[b] = std::ldexp(1.0f, b - 127);
  v[255] = std::numeric_limits<float>::quiet_NaN();
  return v;
}

constexpr std::array<float, 16> kE2m1Values = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Looks up every byte of codes [...] uint8 in table [n] float -> [...] float.
at::Tensor lookup(const at::Tensor& table, const at::Tensor& codes) {
  return table.index_select(0, codes.reshape({-1}).to(at::kLong)).view(codes.sizes());
}

std::vector<int64_t> lead_sizes(const at::Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - 2); }

// x [..., R, C] multiplied (or divided) by s [..., ceil(R/br), ceil(C/bc)] broadcast over its blocks.
at::Tensor apply_block_scale(const at::Tensor& x, const at::Tensor& s, int64_t br, int64_t bc, bool divide) {
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const int64_t so = ceil_div(rows, br), si = ceil_div(cols, bc);
  at::Tensor padded = x;
  if (so * br != rows || si * bc != cols) padded = at::constant_pad_nd(x, {0, si * bc - cols, 0, so * br - rows}, 0);
  std::vector<int64_t> blocked = lead_sizes(x);
  blocked.insert(blocked.end(), {so, br, si, bc});
  std::vector<int64_t> scale_view = lead_sizes(x);
  scale_view.insert(scale_view.end(), {so, 1, si, 1});
  at::Tensor xb = padded.reshape(blocked);
  at::Tensor sb = s.reshape(scale_view);
  at::Tensor y = divide ? xb / sb : xb * sb;
  std::vector<int64_t> flat = lead_sizes(x);
  flat.insert(flat.end(), {so * br, si * bc});
  return y.reshape(flat).narrow(-2, 0, rows).narrow(-1, 0, cols);
}

// Per-block absolute maximum: x [..., R, C] -> [..., ceil(R/br), ceil(C/bc)].
at::Tensor block_amax(const at::Tensor& x, int64_t br, int64_t bc) {
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const int64_t so = ceil_div(rows, br), si = ceil_div(cols, bc);
  at::Tensor padded = at::constant_pad_nd(x.abs(), {0, si * bc - cols, 0, so * br - rows}, 0);
  std::vector<int64_t> blocked = lead_sizes(x);
  blocked.insert(blocked.end(), {so, br, si, bc});
  const int64_t nd = static_cast<int64_t>(blocked.size());
  return at::amax(padded.reshape(blocked), {nd - 3, nd - 1});
}

// 2^e for an integer-valued float64 e in [-1022, 1023], built from the bits of the double, so it
// is exact on every device (at::pow(2.0, e) on CUDA is not: its codes then differed from the CPU's
// and from act_quant's in about 1% of the places, fp8_linear_cuda_tests).
at::Tensor exact_pow2(const at::Tensor& e) { return ((e.to(at::kLong) + 1023) * (int64_t{1} << 52)).view(at::kDouble); }

// Smallest integer e with qmax * 2^e >= amax (0 for amax == 0), clamped to the e8m0 range.
// amax is float64; the two corrections make the result exact where log2 rounds.
at::Tensor pow2_ceil_exponent(const at::Tensor& amax, double qmax) {
  at::Tensor safe = at::where(amax == 0, at::full_like(amax, qmax), amax);
  at::Tensor e = at::ceil(at::log2(safe / qmax));
  e = at::where(exact_pow2(e) * qmax < safe, e + 1, e);
  e = at::where(exact_pow2(e - 1) * qmax >= safe, e - 1, e);
  return e.clamp(-127, 127);
}

// Nearest code for magnitudes |x| (float64) among ascending non-negative code values, ties to
// the even code; values past the largest saturate to it.
at::Tensor encode_magnitude(const at::Tensor& magnitude, const std::vector<double>& values) {
  std::vector<double> mids;
  for (size_t i = 0; i + 1 < values.size(); ++i) mids.push_back((values[i] + values[i + 1]) / 2);
  at::Tensor boundaries = at::from_blob(mids.data(), {static_cast<int64_t>(mids.size())}, at::TensorOptions().dtype(at::kDouble))
                              .clone()
                              .to(magnitude.device());
  at::Tensor lo = at::bucketize(magnitude, boundaries, /*out_int32=*/false, /*right=*/false);
  at::Tensor hi = at::bucketize(magnitude, boundaries, /*out_int32=*/false, /*right=*/true);
  at::Tensor lo_even = at::remainder(lo, 2) == 0;
  return at::where(lo == hi, lo, at::where(lo_even, lo, hi));
}

// The e4m3 magnitudes, ascending: codes 0x00..0x7E (0x7F is NaN).
const std::vector<double>& e4m3_magnitudes() {
  static const std::vector<double> magnitudes = [] {
    std::vector<double> v;
    const std::array<float, 256> all = make_e4m3_values();
    for (int b = 0; b < 127; ++b) v.push_back(all[b]);
    return v;
  }();
  return magnitudes;
}

// Nearest e4m3 code of x (float64, |x| <= 448 after scaling), ties to the even code, the sign in bit 7.
at::Tensor encode_e4m3(const at::Tensor& x) {
  at::Tensor code = encode_magnitude(x.abs(), e4m3_magnitudes());
  return at::where(at::signbit(x), code + 0x80, code).to(at::kByte);
}

void check_finite(const at::Tensor& weight, const char* what) {
  TORCH_CHECK(weight.is_floating_point(), what, ": weight must be floating point, got ", weight.scalar_type());
  TORCH_CHECK(weight.dim() >= 2, what, ": weight must be [..., out, in], got ", weight.sizes());
  TORCH_CHECK(at::isfinite(weight).all().item<bool>(), what, ": weight holds NaN or infinity");
}

}  // namespace

at::Tensor e4m3_table(at::Device device) {
  static const std::array<float, 256> values = make_e4m3_values();
  return table_tensor(values.data(), 256, device);
}

at::Tensor e8m0_table(at::Device device) {
  static const std::array<float, 256> values = make_e8m0_values();
  return table_tensor(values.data(), 256, device);
}

at::Tensor e2m1_table(at::Device device) { return table_tensor(kE2m1Values.data(), 16, device); }

at::Tensor dequant_fp8_blockwise(const at::Tensor& weight, const at::Tensor& scale, at::ScalarType out_dtype, int64_t block) {
  TORCH_CHECK(scale.scalar_type() == at::kByte, "dequant_fp8_blockwise: scale must be uint8 e8m0, got ", scale.scalar_type());
  return dequant_fp8_scaled(weight, lookup(e8m0_table(scale.device()), scale), out_dtype, block);
}

at::Tensor decode_e8m0(const at::Tensor& scale) {
  TORCH_CHECK(scale.scalar_type() == at::kByte, "decode_e8m0: scale must be uint8 e8m0, got ", scale.scalar_type());
  return lookup(e8m0_table(scale.device()), scale).contiguous();
}

at::Tensor dequant_fp8_scaled(const at::Tensor& weight, const at::Tensor& scale, at::ScalarType out_dtype, int64_t block) {
  TORCH_CHECK(block > 0, "dequant_fp8: block must be positive, got ", block);
  TORCH_CHECK(weight.scalar_type() == at::kByte && scale.scalar_type() == at::kFloat,
              "dequant_fp8: weight must be uint8 e4m3 and its decoded scale float32, got ", weight.scalar_type(), " and ",
              scale.scalar_type());
  TORCH_CHECK(weight.dim() >= 2 && scale.dim() == weight.dim(),
              "dequant_fp8: weight [..., out, in] and scale [..., out/B, in/B] expected, got ", weight.sizes(), " and ", scale.sizes());
  std::vector<int64_t> expected = lead_sizes(weight);
  expected.push_back(ceil_div(weight.size(-2), block));
  expected.push_back(ceil_div(weight.size(-1), block));
  TORCH_CHECK(scale.sizes() == at::IntArrayRef(expected), "dequant_fp8: weight ", weight.sizes(), " with block ", block, " needs scale ",
              at::IntArrayRef(expected), ", got ", scale.sizes());
  TORCH_CHECK(scale.device() == weight.device(), "dequant_fp8: weight on ", weight.device(), " but scale on ", scale.device());
  const at::Tensor values = lookup(e4m3_table(weight.device()), weight);
  return apply_block_scale(values, scale, block, block, /*divide=*/false).to(out_dtype).contiguous();
}

at::Tensor dequant_fp4(const at::Tensor& packed, const at::Tensor& scale, at::ScalarType out_dtype, int64_t block) {
  TORCH_CHECK(block > 0, "dequant_fp4: block must be positive, got ", block);
  TORCH_CHECK(packed.scalar_type() == at::kByte && scale.scalar_type() == at::kByte, "dequant_fp4: packed and scale must be uint8, got ",
              packed.scalar_type(), " and ", scale.scalar_type());
  TORCH_CHECK(packed.dim() >= 2 && scale.dim() == packed.dim(),
              "dequant_fp4: packed [..., out, in/2] and scale [..., out, in/B] expected, got ", packed.sizes(), " and ", scale.sizes());
  const int64_t in = 2 * packed.size(-1);
  std::vector<int64_t> expected = lead_sizes(packed);
  expected.push_back(packed.size(-2));
  expected.push_back(ceil_div(in, block));
  TORCH_CHECK(scale.sizes() == at::IntArrayRef(expected), "dequant_fp4: packed ", packed.sizes(), " (in ", in, ") with block ", block,
              " needs scale ", at::IntArrayRef(expected), ", got ", scale.sizes());
  TORCH_CHECK(scale.device() == packed.device(), "dequant_fp4: packed on ", packed.device(), " but scale on ", scale.device());
  // The CUDA kernel (model/cuda/kernels.h): same bits (NaN payloads aside), one pass instead of ~8 ATen ops.
  if (cuda::dequant_fp4_supported(packed, scale, block, out_dtype)) return cuda::dequant_fp4(packed, scale);
  const at::Device device = packed.device();
  at::Tensor low = at::bitwise_and(packed, 0x0F);
  at::Tensor high = at::bitwise_right_shift(packed, 4);
  std::vector<int64_t> out_sizes = lead_sizes(packed);
  out_sizes.push_back(packed.size(-2));
  out_sizes.push_back(in);
  at::Tensor codes = at::stack({low, high}, -1).reshape(out_sizes);  // [..., out, in]: even column first
  at::Tensor values = lookup(e2m1_table(device), codes);
  at::Tensor scales = lookup(e8m0_table(device), scale);
  return apply_block_scale(values, scales, 1, block, /*divide=*/false).to(out_dtype).contiguous();
}

std::pair<at::Tensor, at::Tensor> quantize_fp8_blockwise(const at::Tensor& weight, int64_t block) {
  TORCH_CHECK(block > 0, "quantize_fp8_blockwise: block must be positive, got ", block);
  check_finite(weight, "quantize_fp8_blockwise");
  const at::Tensor x = weight.to(at::kDouble);
  const at::Tensor exponent = pow2_ceil_exponent(block_amax(x, block, block), kFp8Max);
  const at::Tensor scaled = apply_block_scale(x, exact_pow2(exponent), block, block, /*divide=*/true);
  return {encode_e4m3(scaled).contiguous(), (exponent + 127).to(at::kByte).contiguous()};
}

std::pair<at::Tensor, at::Tensor> quantize_fp8_activations(const at::Tensor& x, int64_t block) {
  TORCH_CHECK(block > 0, "quantize_fp8_activations: block must be positive, got ", block);
  TORCH_CHECK(x.is_floating_point() && x.dim() >= 1 && x.size(-1) > 0,
              "quantize_fp8_activations: x must be floating point [..., K] with K > 0, got ", x.scalar_type(), " ", x.sizes());
  TORCH_CHECK(at::isfinite(x).all().item<bool>(), "quantize_fp8_activations: x holds NaN or infinity");
  const int64_t cols = x.size(-1), blocks = ceil_div(cols, block);
  const at::Tensor rows = x.to(at::kFloat).reshape({-1, cols});
  const int64_t count = rows.size(0);
  const at::Tensor padded = at::constant_pad_nd(rows, {0, blocks * block - cols}, 0).view({count, blocks, block});
  // As the official kernel: the float32 amax, at least the float32 1e-4.
  const at::Tensor amax = padded.abs().amax(-1).clamp_min(static_cast<double>(kFp8ActAmaxFloor));  // [rows, blocks]
  const at::Tensor exponent = pow2_ceil_exponent(amax.to(at::kDouble), kFp8Max);
  const at::Tensor scaled = padded.to(at::kDouble) / exact_pow2(exponent).unsqueeze(-1);  // exact: a power of two
  std::vector<int64_t> scale_sizes(x.sizes().begin(), x.sizes().end());
  scale_sizes.back() = blocks;
  const at::Tensor codes = encode_e4m3(scaled).view({count, blocks * block}).narrow(1, 0, cols).reshape(x.sizes()).contiguous();
  return {codes, exact_pow2(exponent).to(at::kFloat).reshape(scale_sizes).contiguous()};
}

std::pair<at::Tensor, at::Tensor> quantize_fp4(const at::Tensor& weight, int64_t block) {
  TORCH_CHECK(block > 0, "quantize_fp4: block must be positive, got ", block);
  check_finite(weight, "quantize_fp4");
  TORCH_CHECK(weight.size(-1) % 2 == 0,
              "quantize_fp4: the input dimension must be even to pack two codes per "
              "byte, got ",
              weight.sizes());
  const at::Tensor x = weight.to(at::kDouble);
  const at::Tensor exponent = pow2_ceil_exponent(block_amax(x, 1, block), kFp4Max);
  const at::Tensor scaled = apply_block_scale(x, exact_pow2(exponent), 1, block, /*divide=*/true);
  static const std::vector<double> magnitudes = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  at::Tensor code = encode_magnitude(scaled.abs(), magnitudes);
  code = at::where(at::signbit(scaled), code + 8, code);
  std::vector<int64_t> pairs = lead_sizes(weight);
  pairs.insert(pairs.end(), {weight.size(-2), weight.size(-1) / 2, 2});
  code = code.reshape(pairs);
  at::Tensor packed = code.select(-1, 0) + code.select(-1, 1) * 16;  // low nibble = even column
  return {packed.to(at::kByte).contiguous(), (exponent + 127).to(at::kByte).contiguous()};
}

}  // namespace deepinfer::model
