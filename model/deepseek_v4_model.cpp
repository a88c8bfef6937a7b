#include "model/deepseek_v4_model.h"

#include "model/hyper_connection.h"
#include "model/moe.h"
#include "model/sequence_group.h"

namespace deepinfer::model {

DeepseekV4Model::DeepseekV4Model(const ModelWeights& weights, ExpertCommunicator& comm, Options options)
    : weights_(weights),
      comm_(comm),
      options_(options),
      main_rope_(Rope::main(weights.config(), weights.device())),
      compress_rope_(Rope::compress(weights.config(), weights.device())) {
  TORCH_CHECK(options_.arithmetic != nullptr, "DeepseekV4Model: Options::arithmetic is null");
  TORCH_CHECK(options_.attention.query_tile > 0, "DeepseekV4Model: attention.query_tile must be positive, got ",
              options_.attention.query_tile);
}

at::Tensor DeepseekV4Model::run_layers(const ForwardBatch& batch, ModelCache& cache) const {
  const ModelConfig& c = config();
  batch.validate();
  const at::Device batch_device = batch.token_ids.device(), weights_device = weights_.device();
  TORCH_CHECK(batch_device.type() == weights_device.type() &&
                  (!batch_device.has_index() || !weights_device.has_index() || batch_device.index() == weights_device.index()),
              "DeepseekV4Model: batch on ", batch.token_ids.device(), " but weights on ", weights_.device());
  TORCH_CHECK(cache.dtype() == weights_.dtype(), "DeepseekV4Model: cache dtype ", cache.dtype(), " differs from the compute dtype ",
              weights_.dtype());
  const std::vector<SequenceGroup> groups = make_groups(batch);
  const int64_t T = batch.num_tokens();
  const ForwardHooks hooks{.observer = &options_.observer, .clock = options_.clock};
  hooks.enter(ForwardPart::kEmbed, -1);
  const at::Tensor embedded = weights_.get("embed.weight").index_select(0, batch.token_ids);      // [T, D]
  at::Tensor streams = embedded.unsqueeze(1).expand({T, c.hc_mult, c.hidden_size}).contiguous();  // [T, n, D]
  // The token positions' cos / sin, once per rope for all layers.
  const Arithmetic& arith = *options_.arithmetic;
  const at::ScalarType table_dtype = arith.rope_table_dtype(weights_.dtype());
  const RopeAngles main_angles = main_rope_.angles(batch.positions, table_dtype);
  const RopeAngles compress_angles = compress_rope_.angles(batch.positions, table_dtype);
  AttentionOptions attention = options_.attention;
  attention.hooks = &hooks;
  auto tap = [&](int64_t layer, const char* name, const at::Tensor& value) {
    if (hooks.observing()) hooks.observe(layer_prefix(layer) + name, value);
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const bool compressed = c.compress_ratio(l) > 0;
    const Rope& rope = compressed ? compress_rope_ : main_rope_;
    // Attention site.
    hooks.enter(ForwardPart::kMhc, l);
    HcSite site = hc_site(streams, weights_.layer(l, "hc_attn_fn"), weights_.layer(l, "hc_attn_base"), weights_.layer(l, "hc_attn_scale"),
                          weights_.layer(l, "attn_norm.weight"), c, arith, &hooks, l);
    at::Tensor h = site.input;
    tap(l, "attn_norm_out", h);
    at::Tensor y = attention_forward(weights_, l, h, batch, groups, cache.layer(l), rope, compressed ? compress_angles : main_angles, arith,
                                     attention);
    tap(l, "attn_out", y);
    hooks.enter(ForwardPart::kMhc, l);
    streams = arith.hc_expand(streams, y, site.mix);
    tap(l, "attn_streams", streams);
    // FFN site.
    site = hc_site(streams, weights_.layer(l, "hc_ffn_fn"), weights_.layer(l, "hc_ffn_base"), weights_.layer(l, "hc_ffn_scale"),
                   weights_.layer(l, "ffn_norm.weight"), c, arith, &hooks, l);
    h = site.input;
    tap(l, "ffn_norm_out", h);
    y = moe_forward(weights_, l, h, batch.token_ids, comm_, arith, &experts_workspace_, &hooks);
    tap(l, "ffn_out", y);
    hooks.enter(ForwardPart::kMhc, l);
    streams = arith.hc_expand(streams, y, site.mix);
    tap(l, "streams", streams);
  }
  return streams;
}

at::Tensor DeepseekV4Model::final_hidden(const at::Tensor& streams, const at::Tensor& rows) const {
  const ModelConfig& c = config();
  const ForwardHooks hooks{.observer = &options_.observer, .clock = options_.clock};
  hooks.enter(ForwardPart::kMhc, -1);
  const at::Tensor picked = streams.index_select(0, rows);  // [R, n, D]
  const at::Tensor collapsed =
      hc_head(picked, weights_.get("hc_head_fn"), weights_.get("hc_head_base"), weights_.get("hc_head_scale"), c, *options_.arithmetic);
  hooks.enter(ForwardPart::kNorm, -1);
  return options_.arithmetic->rms_norm(collapsed, weights_.get("norm.weight"), c.rms_norm_eps);
}

at::Tensor DeepseekV4Model::forward_hidden(const ForwardBatch& batch, ModelCache& cache) const {
  const at::Tensor hidden = final_hidden(run_layers(batch, cache), batch.sample_rows);
  if (options_.observer) options_.observer("hidden", hidden);
  return hidden;
}

at::Tensor DeepseekV4Model::head(const at::Tensor& hidden) const {
  if (options_.clock != nullptr) options_.clock->enter(ForwardPart::kHead, -1);
  return options_.arithmetic->linear(hidden, weights_.get("head.weight")).to(at::kFloat);
}

at::Tensor DeepseekV4Model::forward(const ForwardBatch& batch, ModelCache& cache) const { return head(forward_hidden(batch, cache)); }

DeepseekV4Model::Scored DeepseekV4Model::forward_scored(const ForwardBatch& batch, ModelCache& cache) const {
  const at::Tensor streams = run_layers(batch, cache);
  const at::Tensor hidden = final_hidden(streams, batch.sample_rows);
  if (options_.observer) options_.observer("hidden", hidden);
  Scored out;
  out.logits = head(hidden);
  const bool any = batch.score_rows.defined() && batch.score_rows.numel() > 0;
  out.score_hidden = any ? final_hidden(streams, batch.score_rows) : at::empty({0, config().hidden_size}, hidden.options());
  return out;
}

}  // namespace deepinfer::model
