#pragma once
// The text of one request's output, built token by token as the tokens are committed, and the
// search for the request's stop strings (docs/input-format.md, "Output text and stop strings").
// Owns: incremental decoding (special tokens skipped, as Hugging Face's
// skip_special_tokens=True; ids the tokenizer does not know decode to nothing, as in HF), the
// stop-string search over only the new text plus the last (longest stop - 1) bytes before it,
// and the cut before the stop string.
// Does not own: ending the request (the caller terminates it in the scheduler) or the tokens.
//
// The result depends only on the token ids pushed, never on when they are pushed, so it is
// the same for any batch composition, preemption or step timing.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace deepinfer::io {

class OutputText final {
 public:
  struct Options {
    std::vector<std::string> stop;  // stop strings, each non-empty valid UTF-8
  };

  // Throws std::invalid_argument for a null tokenizer or a stop string that is empty or not UTF-8.
  OutputText(std::shared_ptr<const Tokenizer> tokenizer, Options options);

  // Appends the next output token. True when its text completed a stop string: the text is
  // then cut before that string and later tokens are ignored. Only complete characters are
  // searched (a character split across tokens counts when its last byte arrives). If one
  // token completes several stop strings, the one starting first wins (then the one listed
  // first). may_stop = false (the engine's stop rule, SamplingParams::may_stop_at: min_tokens
  // not reached) adds the token's text without searching it: a stop string ending there
  // never counts.
  bool push(int32_t token_id, bool may_stop = true);

  bool stopped() const { return stop_index_ >= 0; }
  // The stop string found; requires stopped().
  const std::string& stop_string() const;
  // The complete characters so far (cut before the stop string once one is found).
  const std::string& text() const { return text_; }
  int64_t num_tokens() const { return num_tokens_; }

  // The final text: text() plus, unless stopped, a character left unfinished at the end as
  // U+FFFD. Call once, after the last push.
  std::string finish();

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  Detokenizer detokenizer_;
  Options options_;
  std::string text_;
  int64_t num_tokens_ = 0;
  int stop_index_ = -1;  // into options_.stop
};

}  // namespace deepinfer::io
