#include "pipeline/sharding.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace deepinfer::pipeline {

OwnerRank::OwnerRank(int world_size) : load_(static_cast<std::size_t>(std::max(world_size, 0)), 0) {
  if (world_size < 1) throw std::invalid_argument("OwnerRank: world size " + std::to_string(world_size));
}

int OwnerRank::peek() const {
  return static_cast<int>(std::min_element(load_.begin(), load_.end()) - load_.begin());  // first minimum: lowest rank
}

int OwnerRank::next(int64_t prompt_tokens) {
  const int rank = peek();
  load_[static_cast<std::size_t>(rank)] += 1 + prompt_tokens;
  return rank;
}

int64_t sharding_tokens(const io::RequestItem& item) {
  const auto* request = std::get_if<io::RequestLine>(&item);
  return request ? static_cast<int64_t>(request->prompt_token_ids.size()) : 0;
}

}  // namespace deepinfer::pipeline
