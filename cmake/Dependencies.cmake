# Finds every external package. A missing one stops configure with the Debian
# package that provides it (launch/test.sh installs them).

function(deepinfer_require found what debian)
  if(NOT ${found})
    message(FATAL_ERROR "mini-DeepInfer needs ${what}. On Debian 12: apt-get install --no-install-recommends ${debian}")
  endif()
endfunction()

find_package(simdjson CONFIG QUIET)
deepinfer_require(simdjson_FOUND "simdjson" "libsimdjson-dev")

find_package(zstd CONFIG QUIET)
if(zstd_FOUND)
  if(TARGET zstd::libzstd_shared)
    set(DEEPINFER_ZSTD zstd::libzstd_shared)
  else()
    set(DEEPINFER_ZSTD zstd::libzstd_static)
  endif()
else()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(ZSTD IMPORTED_TARGET libzstd)
  endif()
  deepinfer_require(ZSTD_FOUND "zstd" "libzstd-dev")
  set(DEEPINFER_ZSTD PkgConfig::ZSTD)
endif()

# PCRE2 by header and library (not pkg-config), so that the copy that launch/gpu_deps.sh
# unpacks under .deps/root on the GPU machine is found through CMAKE_PREFIX_PATH too.
find_path(PCRE2_INCLUDE_DIR pcre2.h)
find_library(PCRE2_LIBRARY NAMES pcre2-8)
if(PCRE2_INCLUDE_DIR AND PCRE2_LIBRARY)
  set(PCRE2_FOUND TRUE)
  add_library(deepinfer_pcre2 INTERFACE)
  target_include_directories(deepinfer_pcre2 INTERFACE ${PCRE2_INCLUDE_DIR})
  target_link_libraries(deepinfer_pcre2 INTERFACE ${PCRE2_LIBRARY})
endif()
deepinfer_require(PCRE2_FOUND "PCRE2 (pcre2.h, libpcre2-8)" "libpcre2-dev")

find_package(MPI COMPONENTS CXX QUIET)
deepinfer_require(MPI_CXX_FOUND "Open MPI" "libopenmpi-dev openmpi-bin")

find_package(Threads REQUIRED)

if(DEEPINFER_CUDA_COMPILE_CHECK AND NOT DEEPINFER_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  message(STATUS "CUDA kernels: compile-only check with ${CMAKE_CUDA_COMPILER} for sm_${CMAKE_CUDA_ARCHITECTURES}")
endif()

if(DEEPINFER_CUDA)
  # CUDA LibTorch comes from PyTorch's wheel: CMAKE_PREFIX_PATH must hold
  # python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' (.deps/env.sh sets it).
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS $ENV{NCCL_ROOT} ${NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}/.. ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
    HINTS $ENV{NCCL_ROOT} ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES lib lib64)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "DEEPINFER_CUDA=ON needs NCCL: set NCCL_ROOT to the CUDA toolkit or to PyTorch's nvidia/nccl folder")
  endif()
  add_library(deepinfer_nccl INTERFACE)
  target_include_directories(deepinfer_nccl INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(deepinfer_nccl INTERFACE ${NCCL_LIBRARY})
  message(STATUS "NCCL: ${NCCL_LIBRARY}")
endif()

find_package(Torch CONFIG QUIET)
deepinfer_require(Torch_FOUND "LibTorch" "libtorch-dev")
if(DEEPINFER_CUDA AND NOT TORCH_CUDA_LIBRARIES)
  message(FATAL_ERROR "DEEPINFER_CUDA=ON found a LibTorch without CUDA at ${Torch_DIR}; point CMAKE_PREFIX_PATH at torch.utils.cmake_prefix_path")
endif()
message(STATUS "LibTorch ${Torch_VERSION} at ${Torch_DIR} (flags: ${TORCH_CXX_FLAGS})")

# Every library passes std::string and std::vector across its boundary, so all of them must
# use LibTorch's libstdc++ ABI, not only those that link torch. PyTorch wheels may use the
# old ABI while Debian/Ubuntu libraries use the new one.
set(DEEPINFER_CXX11_ABI 1)
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  set(DEEPINFER_CXX11_ABI 0)
endif()
add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=${DEEPINFER_CXX11_ABI})

if(DEEPINFER_TESTS)
  if(DEEPINFER_CXX11_ABI EQUAL 0 AND EXISTS /usr/src/googletest/CMakeLists.txt)
    # The packaged GoogleTest uses the new ABI: build it from its packaged sources instead.
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory(/usr/src/googletest ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
    set(GTest_FOUND TRUE)
    message(STATUS "GoogleTest: built from /usr/src/googletest with the old libstdc++ ABI")
  else()
    find_package(GTest CONFIG QUIET)
    if(NOT GTest_FOUND)
      find_package(GTest QUIET)
    endif()
  endif()
  deepinfer_require(GTest_FOUND "GoogleTest" "googletest libgtest-dev libgmock-dev")
endif()
