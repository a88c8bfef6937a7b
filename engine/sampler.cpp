#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <tuple>

#include "engine/sampler_noise.h"
#include "engine/sampler_ops.h"

namespace deepinfer::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check_inputs(const at::Tensor& logits, const SamplingBatch& batch) {
  TORCH_CHECK(logits.dim() == 2, "logits must be [B, V], got ", logits.sizes());
  const auto dtype = logits.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf, "logits must be float32, bfloat16 or float16, got ",
              dtype);
  TORCH_CHECK(logits.size(1) > 0 && logits.size(1) <= (int64_t{1} << 31), "logits must have 1 to 2^31 columns, got ", logits.size(1));
  const int64_t b = logits.size(0);
  // rows: the required size of dim 0, or -1 for the bias triplets (any length).
  const auto check = [&](const at::Tensor& t, const char* name, at::ScalarType type, int dims, int64_t rows) {
    TORCH_CHECK(t.defined(), "SamplingBatch.", name, " is undefined");
    TORCH_CHECK(t.scalar_type() == type && t.dim() == dims, "SamplingBatch.", name, " must be ", dims, "-d ", type, ", got ", t.sizes(),
                " ", t.scalar_type());
    TORCH_CHECK(t.device() == logits.device(), "SamplingBatch.", name, " is on ", t.device(), " but logits are on ", logits.device());
    TORCH_CHECK(rows < 0 || t.size(0) == rows, "SamplingBatch.", name, " has ", t.size(0), " rows, logits have ", rows);
  };
  check(batch.temperature, "temperature", at::kFloat, 1, b);
  check(batch.top_k, "top_k", at::kLong, 1, b);
  check(batch.top_p, "top_p", at::kFloat, 1, b);
  check(batch.min_p, "min_p", at::kFloat, 1, b);
  check(batch.seed, "seed", at::kLong, 1, b);
  check(batch.position, "position", at::kLong, 1, b);
  check(batch.suppress_stop, "suppress_stop", at::kBool, 1, b);
  check(batch.stop_ids, "stop_ids", at::kLong, 2, b);
  check(batch.bias_rows, "bias_rows", at::kLong, 1, -1);
  check(batch.bias_tokens, "bias_tokens", at::kLong, 1, -1);
  check(batch.bias_values, "bias_values", at::kFloat, 1, -1);
  TORCH_CHECK(batch.bias_tokens.size(0) == batch.bias_rows.size(0) && batch.bias_values.size(0) == batch.bias_rows.size(0),
              "SamplingBatch bias triplets differ in length: ", batch.bias_rows.size(0), ", ", batch.bias_tokens.size(0), ", ",
              batch.bias_values.size(0));
  TORCH_CHECK(batch.num_logprobs >= -1 && batch.num_logprobs <= logits.size(1), "num_logprobs must be in [-1, V=", logits.size(1),
              "], got ", batch.num_logprobs);
}

// Step 1: [B, V] float32 copy of the logits with bias added and suppressed stop ids at -inf.
at::Tensor masked_logits(const at::Tensor& logits, const SamplingBatch& batch) {
  const int64_t b = logits.size(0);
  const int64_t v = logits.size(1);
  at::Tensor l = at::empty({b, v}, logits.options().dtype(at::kFloat));
  l.copy_(logits);
  if (batch.bias_rows.size(0) > 0) {
    // (row, token) pairs are unique, so this scatter writes each element once.
    at::Tensor flat = l.view({-1});
    const at::Tensor index = batch.bias_rows.mul(v).add_(batch.bias_tokens);
    flat.scatter_(0, index, flat.gather(0, index).add_(batch.bias_values));
  }
  if (batch.hints.any_suppress_stop && batch.stop_ids.size(1) > 0) {
    // Padding (-1) goes to an extra column v that is dropped, so it never meets a real id.
    const at::Tensor real = batch.stop_ids.ge(0);
    const at::Tensor column = at::where(real, batch.stop_ids, v);
    const at::Tensor on = real.logical_and(batch.suppress_stop.unsqueeze(1));
    at::Tensor mask = at::zeros({b, v + 1}, l.options().dtype(at::kBool));
    mask.scatter_(1, column, on);
    l.masked_fill_(mask.narrow(1, 0, v), kNegInf);
  }
  return l;
}

// Integer masses round(exact_exp(x) * 2^F) of x = s - max s <= 0 (NaN and < kExactExpMin count
// as kExactExpMin, whose mass rounds to 0 for every F <= 40). [B, W] float -> [B, W] int64.
at::Tensor integer_mass(const at::Tensor& x, int bits) {
  const at::Tensor clamped = at::where(x.ge(kExactExpMin), x, kExactExpMin);
  return exact_exp(clamped).mul_(std::ldexp(1.0f, bits)).round_().to(at::kLong);
}

// Step 3, top-p: sorted [B, V] descending, s_max [B], thr_k [B], top_p [B] -> thr_p [B].
at::Tensor top_p_threshold(const at::Tensor& sorted, const at::Tensor& s_max, const at::Tensor& thr_k, const at::Tensor& top_p) {
  const int64_t v = sorted.size(1);
  at::Tensor mass = integer_mass(sorted - s_max.unsqueeze(1), fixed_point_bits(v));
  mass.masked_fill_(sorted.lt(thr_k.unsqueeze(1)), 0);  // removed by top-k: no mass
  // Exclusive prefix sums and totals are exact integers below 2^52, hence exact as doubles.
  const at::Tensor before = at::cumsum(mass, 1).sub_(mass);
  const at::Tensor total = before.select(1, v - 1).add(mass.select(1, v - 1));
  const at::Tensor limit = top_p.to(at::kDouble).mul_(total.to(at::kDouble));
  // before[0] = 0 < limit (top_p > 0, total >= 1), so count >= 1 whenever the row has a finite s.
  const at::Tensor count = before.to(at::kDouble).lt(limit.unsqueeze(1)).sum(1);
  const at::Tensor last = count.sub(1).clamp_(0, v - 1).unsqueeze(1);
  return at::where(top_p.lt(1.0f), sorted.gather(1, last).squeeze(1), kNegInf);
}

// Step 3: the per-row keep threshold on scaled logits s [B, V]; s_max [B].
at::Tensor keep_threshold(const at::Tensor& s, const at::Tensor& s_max, const SamplingBatch& batch) {
  const int64_t v = s.size(1);
  const SamplingHints& hints = batch.hints;
  at::Tensor thr = at::full_like(s_max, kNegInf);
  if (hints.max_top_k > 0 || hints.any_top_p) {
    // The top-k threshold is a value of the sorted row, the same whether it comes from a full
    // sort or from topk(max_top_k): values are unique as a multiset, whatever the tie order.
    at::Tensor sorted;  // [B, W] the W largest s per row, descending
    if (hints.any_top_p || hints.max_top_k >= v) {
      sorted = std::get<0>(at::sort(s, /*dim=*/1, /*descending=*/true));
    } else {
      sorted = std::get<0>(at::topk(s, hints.max_top_k, /*dim=*/1, /*largest=*/true,
                                    /*sorted=*/true));
    }
    const int64_t w = sorted.size(1);
    const at::Tensor k = batch.top_k;
    const at::Tensor k_on = k.gt(0).logical_and_(k.lt(v));
    const at::Tensor kth = sorted.gather(1, k.sub(1).clamp_(0, w - 1).unsqueeze(1)).squeeze(1);
    const at::Tensor thr_k = at::where(k_on, kth, kNegInf);
    thr = at::maximum(thr, thr_k);
    if (hints.any_top_p) {
      thr = at::maximum(thr, top_p_threshold(sorted, s_max, thr_k, batch.top_p));
    }
  }
  if (hints.any_min_p) {
    const at::Tensor log_min_p = exact_log(batch.min_p.clamp(std::numeric_limits<float>::min(), 1.0f));
    thr = at::maximum(thr, at::where(batch.min_p.gt(0.0f), s_max + log_min_p, kNegInf));
  }
  return at::minimum(thr, s_max);  // the top token always stays
}

struct Scaled {
  at::Tensor s;       // [B, V] float32 scaled logits
  at::Tensor greedy;  // [B] bool
  at::Tensor keep;    // [B, V] bool
};

Scaled scale_and_filter(const at::Tensor& logits, const SamplingBatch& batch) {
  Scaled out;
  out.greedy = batch.temperature.eq(0.0f);
  const at::Tensor temperature = at::where(out.greedy, 1.0f, batch.temperature);
  // Tensor / tensor: a true IEEE division on every device (never a reciprocal multiply).
  out.s = masked_logits(logits, batch).div_(temperature.unsqueeze(1));
  const at::Tensor s_max = out.s.amax(1);
  out.keep = out.s.ge(keep_threshold(out.s, s_max, batch).unsqueeze(1));
  return out;
}

// Step 5: log-softmax normalizer of x = raw - max raw, [B, V] -> [B].
at::Tensor log_normalizer(const at::Tensor& x) {
  const int bits = fixed_point_bits(x.size(1));
  const at::Tensor total = integer_mass(x, bits).sum(1);  // exact, in [2^F, 2^52]
  return exact_log(total.to(at::kDouble).mul_(std::ldexp(1.0, -bits)).to(at::kFloat));
}

void add_logprobs(const at::Tensor& logits, const SamplingBatch& batch, SampleResult& out) {
  TokenLogprobs lp = token_logprobs(logits, out.tokens, std::max<int64_t>(batch.num_logprobs, 0));
  out.logprobs = std::move(lp.logprobs);
  out.top_ids = std::move(lp.top_ids);
  out.top_logprobs = std::move(lp.top_logprobs);
}

}  // namespace

TokenLogprobs token_logprobs(const at::Tensor& logits, const at::Tensor& tokens, int64_t top_n) {
  TORCH_CHECK(logits.dim() == 2 && tokens.dim() == 1 && tokens.size(0) == logits.size(0) && top_n >= 0 && top_n <= logits.size(1),
              "token_logprobs: logits [B, V], tokens [B] and top_n in [0, V] expected, got ", logits.sizes(), ", ", tokens.sizes(), ", ",
              top_n);
  const at::Tensor raw = logits.to(at::kFloat);
  const at::Tensor x = raw - raw.amax(1, /*keepdim=*/true);  // [B, V]
  const at::Tensor log_z = log_normalizer(x).unsqueeze(1);   // [B, 1]
  const at::Tensor chosen = tokens.clamp_min(0).unsqueeze(1);
  TokenLogprobs out;
  out.logprobs = at::where(tokens.ge(0), (x.gather(1, chosen) - log_z).squeeze(1), kNegInf);
  if (top_n > 0) {
    // A stable sort puts equal logprobs in id order on every device.
    auto [values, ids] = at::sort(x, /*stable=*/true, /*dim=*/1, /*descending=*/true);
    out.top_ids = ids.narrow(1, 0, top_n).contiguous();
    out.top_logprobs = (values.narrow(1, 0, top_n) - log_z).contiguous();
  }
  return out;
}

int fixed_point_bits(int64_t vocab_size) {
  TORCH_CHECK(vocab_size > 0, "vocab_size must be > 0, got ", vocab_size);
  const int ceil_log2 = static_cast<int>(std::bit_width(static_cast<uint64_t>(vocab_size - 1)));
  return std::min(40, 52 - ceil_log2);
}

at::Tensor candidate_mask(const at::Tensor& logits, const SamplingBatch& batch) {
  check_inputs(logits, batch);
  const Scaled scaled = scale_and_filter(logits, batch);
  return scaled.keep.logical_and(scaled.s.gt(kNegInf));
}

SampleResult sample(const at::Tensor& logits, const SamplingBatch& batch) {
  check_inputs(logits, batch);
  const int64_t v = logits.size(1);
  const Scaled scaled = scale_and_filter(logits, batch);
  at::Tensor z;  // [B, V] scaled logits plus noise, -inf where filtered out
  if (batch.hints.any_random) {
    at::Tensor noise = gumbel_noise(mix_seed(batch.seed, batch.position), v);
    z = noise.masked_fill_(scaled.greedy.unsqueeze(1), 0.0f).add_(scaled.s);
  } else {
    z = scaled.s.clone();
  }
  z.masked_fill_(scaled.keep.logical_not(), kNegInf);
  SampleResult out;
  const at::Tensor best = z.argmax(1);  // lowest id on ties, on CPU and CUDA
  const at::Tensor best_value = z.gather(1, best.unsqueeze(1)).squeeze(1);
  out.tokens = at::where(best_value.gt(kNegInf), best, -1);
  if (batch.num_logprobs >= 0) add_logprobs(logits, batch, out);
  return out;
}

}  // namespace deepinfer::engine
