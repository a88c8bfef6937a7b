#include "io/output_text.h"

#include <stdexcept>

#include "io/utf8.h"

namespace deepinfer::io {

OutputText::OutputText(std::shared_ptr<const Tokenizer> tokenizer, Options options)
    : tokenizer_(tokenizer), detokenizer_(std::move(tokenizer), /*skip_special_tokens=*/true), options_(std::move(options)) {
  for (const std::string& stop : options_.stop) {
    if (stop.empty() || to_valid_utf8(stop) != stop) throw std::invalid_argument("OutputText: a stop string must be non-empty valid UTF-8");
  }
}

bool OutputText::push(int32_t token_id, bool may_stop) {
  if (stopped()) return false;
  ++num_tokens_;
  if (!tokenizer_->contains(token_id)) return false;
  const std::size_t old_size = text_.size();
  text_ += detokenizer_.push(token_id);
  if (text_.size() == old_size || !may_stop) return false;
  // No stop string ended inside text_[0, old_size), so a new one ends after old_size: it
  // starts at or after old_size - (its length - 1).
  std::size_t best = std::string::npos;
  for (std::size_t i = 0; i < options_.stop.size(); ++i) {
    const std::string& stop = options_.stop[i];
    const std::size_t from = old_size >= stop.size() ? old_size - stop.size() + 1 : 0;
    const std::size_t at = text_.find(stop, from);
    if (at < best) {
      best = at;
      stop_index_ = static_cast<int>(i);
    }
  }
  if (best == std::string::npos) return false;
  // Both are valid UTF-8, so a byte match starts and ends on character boundaries.
  text_.resize(best);
  return true;
}

const std::string& OutputText::stop_string() const {
  if (!stopped()) throw std::logic_error("OutputText::stop_string: no stop string was found");
  return options_.stop[static_cast<std::size_t>(stop_index_)];
}

std::string OutputText::finish() {
  if (!stopped()) text_ += detokenizer_.finish();
  return text_;
}

}  // namespace deepinfer::io
