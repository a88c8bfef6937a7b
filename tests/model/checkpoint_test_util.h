#pragma once
// Helpers for the checkpoint writer/loader tests: a small config with ragged quantization
// blocks, temporary folders, bitwise weight comparison, and rewriting a checkpoint's tensors.

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "io/safetensors.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::model::testing {

// tiny_fast_test_config shrunk so tests stay fast; hidden 96 and moe width 48 are not
// multiples of the FP8 (128) / FP4 (32) blocks, so every quantized tensor has ragged edges.
inline ModelConfig small_config() {
  ModelConfig c = tiny_fast_test_config();
  c.vocab_size = 160;
  c.hidden_size = 96;
  c.q_lora_rank = 64;
  c.o_lora_rank = 48;
  c.moe_intermediate_size = 48;
  c.validate();
  return c;
}

// Same names, dtypes and bytes.
inline void expect_same_weights(const ModelWeights& a, const ModelWeights& b) {
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names()) {
    const at::Tensor& x = a.get(name);
    const at::Tensor& y = b.get(name);
    ASSERT_EQ(x.scalar_type(), y.scalar_type()) << name;
    ASSERT_EQ(x.sizes(), y.sizes()) << name;
    EXPECT_TRUE(at::equal(x.cpu(), y.cpu())) << name << " differs, max |diff| "
                                             << (x.cpu().to(at::kDouble) - y.cpu().to(at::kDouble)).abs().max().item<double>();
  }
}

// One tensor as the rewrite callback sees it; set drop, or change name/dtype/shape/bytes.
struct RawTensor {
  std::string name;
  io::DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
  bool drop = false;
};

// Copies checkpoint src (config.json + tensors) to dst as one model.safetensors, passing every
// tensor through edit; add (if set) appends extra tensors.
inline void rewrite_checkpoint(const std::string& src, const std::string& dst, const std::function<void(RawTensor&)>& edit,
                               const std::vector<RawTensor>& add = {}) {
  std::filesystem::create_directories(dst);
  std::filesystem::copy_file(std::filesystem::path(src) / "config.json", std::filesystem::path(dst) / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const io::Checkpoint checkpoint = io::Checkpoint::open(src);
  io::SafetensorsWriter writer;
  for (const std::string& name : checkpoint.names()) {
    const io::TensorView* view = checkpoint.find(name);
    RawTensor t{name, view->dtype, view->shape, std::vector<std::byte>(view->data, view->data + view->nbytes)};
    edit(t);
    if (!t.drop) writer.add(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
  }
  for (const RawTensor& t : add) writer.add(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
  writer.write((std::filesystem::path(dst) / "model.safetensors").string());
}

}  // namespace deepinfer::model::testing
