// The CPU build's model/cuda/kernels.h: no kernels. A CPU LibTorch makes no CUDA tensors, so
// the model's device checks never reach the throwing functions; they exist to link.
#include "model/cuda/kernels.h"

namespace deepinfer::model::cuda {
namespace {

[[noreturn]] void absent(const char* what) { TORCH_CHECK(false, what, " needs the CUDA build (cmake -DDEEPINFER_CUDA=ON)"); }

}  // namespace

bool built() { return false; }
bool sinkhorn_supported(const at::Tensor&, int64_t) { return false; }
at::Tensor sinkhorn(const at::Tensor&, int64_t, double) { absent("cuda::sinkhorn"); }
bool dequant_fp4_supported(const at::Tensor&, const at::Tensor&, int64_t, at::ScalarType) { return false; }
at::Tensor dequant_fp4(const at::Tensor&, const at::Tensor&) { absent("cuda::dequant_fp4"); }
void dequant_fp4_tables(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::Tensor&) { absent("cuda::dequant_fp4_tables"); }
bool sparse_attention_supported(const at::Tensor&, const at::Tensor&) { return false; }
void sparse_attention(const PagedAttention&, at::Tensor&) { absent("cuda::sparse_attention"); }
bool sparse_attention_runs_head_split(const PagedAttention&) { return false; }
bool sparse_attention_runs_split_sm90(const PagedAttention&) { return false; }
bool index_scores_supported(const at::Tensor&, const at::Tensor&) { return false; }
at::Tensor index_scores(const PagedIndexScores&) { absent("cuda::index_scores"); }
at::Tensor index_topk(const at::Tensor&, int64_t, const at::Tensor&, int64_t) { absent("cuda::index_topk"); }
bool hc_supported(const at::Tensor&) { return false; }
HcPreOut hc_pre(const HcPre&) { absent("cuda::hc_pre"); }
at::Tensor hc_post(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&) { absent("cuda::hc_post"); }
bool norm_rope_supported(const at::Tensor&) { return false; }
void norm_rope(const NormRope&, at::Tensor&) { absent("cuda::norm_rope"); }
bool compressor_supported(const at::Tensor&, const at::Tensor&) { return false; }
void compress(const CompressorUpdate&) { absent("cuda::compress"); }
at::Generator make_generator(uint64_t, at::Device) { absent("cuda::make_generator"); }

}  // namespace deepinfer::model::cuda

// Routed experts straight from packed FP4.
namespace deepinfer::model::cuda {

bool moe_fp4_supported(at::Device, int64_t, int64_t, int64_t) { return false; }
at::Tensor moe_fp4(const MoeFp4&) { absent("cuda::moe_fp4"); }

}  // namespace deepinfer::model::cuda

// FP8 linears straight from FP8.
namespace deepinfer::model::cuda {

bool act_quant_supported(const at::Tensor&) { return false; }
Fp8Activations act_quant(const at::Tensor&) { absent("cuda::act_quant"); }
bool fp8_linear_supported(const at::Tensor&, const at::Tensor&, const at::Tensor&) { return false; }
at::Tensor fp8_linear(const at::Tensor&, const at::Tensor&, const at::Tensor&) { absent("cuda::fp8_linear"); }

}  // namespace deepinfer::model::cuda

// Batch-invariant dense linears.
namespace deepinfer::model::cuda {

bool invariant_linear_supported(const at::Tensor&, const at::Tensor&) { return false; }
at::Tensor invariant_linear(const at::Tensor&, const at::Tensor&, at::ScalarType) { absent("cuda::invariant_linear"); }
at::Tensor invariant_group_linear(const at::Tensor&, const at::Tensor&) { absent("cuda::invariant_group_linear"); }
std::string invariant_linear_plan(int64_t, const at::Tensor&) { absent("cuda::invariant_linear_plan"); }

}  // namespace deepinfer::model::cuda
