# Helpers shared by the folders' CMakeLists.

# A library that uses LibTorch: precompiles ATen so each source compiles in seconds, not tens.
function(deepinfer_torch_library name)
  add_library(${name} ${ARGN})
  target_link_libraries(${name} PUBLIC ${TORCH_LIBRARIES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_precompile_headers(${name} PRIVATE <ATen/ATen.h>)
endfunction()


# deepinfer_cuda_kernels(NAME TORCH_LIBRARY SOURCES a.cu ... [OPTIONS nvcc flags ...])
# The torch-free kernels of one folder. CUDA build: a static library linked into TORCH_LIBRARY.
# CPU build with DEEPINFER_CUDA_COMPILE_CHECK: the same sources compiled as an object library
# for the same architectures (sm_90) and linked into nothing, so a kernel that does not compile
# fails the CPU build (CI) before any device time is spent on it.
# deepinfer_check_cuda_sources(): every .cu file of the source folders is in some
# deepinfer_cuda_kernels() call, so the compile-only check and the CUDA build cover it.
function(deepinfer_check_cuda_sources)
  get_property(built GLOBAL PROPERTY DEEPINFER_CUDA_SOURCES)
  foreach(folder io engine model pipeline launch)
    file(GLOB_RECURSE found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${folder}/*.cu)
    foreach(source ${found})
      if(NOT source IN_LIST built)
        message(FATAL_ERROR "${source} is not built: name it in a deepinfer_cuda_kernels() call")
      endif()
    endforeach()
  endforeach()
endfunction()

function(deepinfer_cuda_kernels name torch_library)
  cmake_parse_arguments(K "" "" "SOURCES;OPTIONS" ${ARGN})
  foreach(source ${K_SOURCES})
    set_property(GLOBAL APPEND PROPERTY DEEPINFER_CUDA_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/${source})
  endforeach()
  if(DEEPINFER_CUDA)
    add_library(${name} STATIC ${K_SOURCES})
    target_link_libraries(${torch_library} PRIVATE ${name})
  elseif(DEEPINFER_CUDA_COMPILE_CHECK)
    add_library(${name} OBJECT ${K_SOURCES})
  else()
    return()
  endif()
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${K_OPTIONS}>)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
endfunction()
