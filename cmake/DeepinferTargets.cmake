# Helpers shared by the folders' CMakeLists.

# A library that uses LibTorch: precompiles ATen so each source compiles in seconds, not tens.
function(deepinfer_torch_library name)
  add_library(${name} ${ARGN})
  target_link_libraries(${name} PUBLIC ${TORCH_LIBRARIES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_precompile_headers(${name} PRIVATE <ATen/ATen.h>)
endfunction()

