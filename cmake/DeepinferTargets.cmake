# Helpers shared by the folders' CMakeLists.

# A library that uses LibTorch: precompiles ATen so each source compiles in seconds, not tens.
function(deepinfer_torch_library name)
  add_library(${name} ${ARGN})
  target_link_libraries(${name} PUBLIC ${TORCH_LIBRARIES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_precompile_headers(${name} PRIVATE <ATen/ATen.h>)
endfunction()

# Puts simdjson and zstd first in an executable's dynamic dependencies. PyTorch's wheels can
# carry symbols of their own copies of such libraries; the dynamic linker resolves a symbol in
# the first library that defines it, so ours must come before LibTorch's.
function(deepinfer_link_first name)
  foreach(lib simdjson::simdjson ${DEEPINFER_ZSTD})
    if(TARGET ${lib})
      get_target_property(type ${lib} TYPE)
      if(type STREQUAL "SHARED_LIBRARY" OR type STREQUAL "UNKNOWN_LIBRARY")
        target_link_options(${name} BEFORE PRIVATE "LINKER:--no-as-needed" "$<TARGET_FILE:${lib}>")
      endif()
    endif()
  endforeach()
endfunction()
