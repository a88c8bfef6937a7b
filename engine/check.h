#pragma once
// Error checks, torch-free (engine core, pipeline and launch all use them).
// ENGINE_CHECK: a bad argument to a public function, one that can come from outside the
//   program (options, configuration, a request) -> std::invalid_argument.
// ENGINE_ASSERT: a broken internal invariant or a protocol violation between our own
//   components (an id out of range, a call out of order) -> deepinfer::InternalError.
// The message names the failed condition and the offending values; never abort()s.
// launch/ maps InternalError to exit 1 ("internal error") and std::invalid_argument to exit 2.

#include <sstream>
#include <stdexcept>
#include <string>

namespace deepinfer {

// A bug, never bad input: what ENGINE_ASSERT throws.
class InternalError final : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace deepinfer

namespace deepinfer::engine::detail {

template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace deepinfer::engine::detail

#define ENGINE_CHECK(cond, ...)                                                                        \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      throw std::invalid_argument(::deepinfer::engine::detail::concat("[", #cond, "] ", __VA_ARGS__)); \
    }                                                                                                  \
  } while (0)

#define ENGINE_ASSERT(cond, ...)                                                                            \
  do {                                                                                                      \
    if (!(cond)) {                                                                                          \
      throw ::deepinfer::InternalError(::deepinfer::engine::detail::concat("[", #cond, "] ", __VA_ARGS__)); \
    }                                                                                                       \
  } while (0)
