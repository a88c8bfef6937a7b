#include "launch/exit_code.h"

#include <cstdio>
#include <exception>
#include <stdexcept>

#include "engine/check.h"

namespace deepinfer::launch {

int exit_code_of(const std::exception& error) {
  if (dynamic_cast<const InternalError*>(&error)) return kExitError;
  return dynamic_cast<const std::invalid_argument*>(&error) ? kExitBadArguments : kExitError;
}

int run_reporting_errors(const std::string& name, const std::function<int()>& command) {
  try {
    return command();
  } catch (const InternalError& error) {
    std::fprintf(stderr, "deepinfer %s: internal error: %s\n", name.c_str(), error.what());
    return kExitError;
  } catch (const std::invalid_argument& error) {
    std::fprintf(stderr, "deepinfer %s: %s\n", name.c_str(), error.what());
    return kExitBadArguments;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "deepinfer %s: error: %s\n", name.c_str(), error.what());
    return kExitError;
  }
}

}  // namespace deepinfer::launch
