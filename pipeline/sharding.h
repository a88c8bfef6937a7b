#pragma once
// Which rank owns each input item, in global input order. Every rank reads every line and
// makes the same decisions: the item goes to the rank with the smallest load so far (ties: the
// lowest rank), then that rank's load grows by 1 + the item's prompt tokens (0 for a line that
// is an error). Streaming, the same on every rerun, recorded as "sharding": kShardingName in
// job.json. `deepinfer cat` inverts it from the records' num_prompt_tokens.
// Owns: the ownership rule. Does not own: reading the input (admission.h).

#include <cstdint>
#include <vector>

#include "io/request_reader.h"

namespace deepinfer::pipeline {

inline constexpr const char* kShardingName = "balanced-by-prompt-tokens";

class OwnerRank final {
 public:
  explicit OwnerRank(int world_size);
  int peek() const;                 // owner of the next item (it does not depend on the item)
  int next(int64_t prompt_tokens);  // owner of the next item, which then counts as assigned

 private:
  std::vector<int64_t> load_;
};

// The prompt tokens that sharding counts for an input item.
int64_t sharding_tokens(const io::RequestItem& item);

}  // namespace deepinfer::pipeline
