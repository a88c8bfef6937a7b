#pragma once
// Error checks for the torch-free engine core.
// ENGINE_CHECK: a bad argument to a public function -> std::invalid_argument.
// ENGINE_ASSERT: a broken internal invariant or a call out of order -> std::logic_error.
// The message names the failed condition and the offending values; never abort()s.

#include <sstream>
#include <stdexcept>
#include <string>

namespace deepinfer::engine::detail {

template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace deepinfer::engine::detail

#define ENGINE_CHECK(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      throw std::invalid_argument(::deepinfer::engine::detail::concat("[", #cond, "] ", __VA_ARGS__)); \
    }                                                                                             \
  } while (0)

#define ENGINE_ASSERT(cond, ...)                                                                  \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      throw std::logic_error(::deepinfer::engine::detail::concat("[", #cond, "] ", __VA_ARGS__));   \
    }                                                                                             \
  } while (0)
