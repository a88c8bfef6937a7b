#!/usr/bin/env bash
# The test command: installs the Debian packages that are missing, configures, builds
# (incrementally on a rerun) and runs every ctest suite, the mpirun ones included.
#   ./launch/test.sh              everything that can run here (GPU tests skip with a message)
#   ./launch/test.sh -L cpu       extra arguments go to ctest
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${DEEPINFER_BUILD_DIR:-build}

packages=(cmake g++ make pkg-config libtorch-dev libsimdjson-dev libzstd-dev libpcre2-dev libopenmpi-dev openmpi-bin
          googletest libgtest-dev libgmock-dev clang libclang-rt-14-dev clang-format-14 zstd)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Open MPI refuses root unless told; CI runs as root on 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

# The CUDA kernels are compiled (not run) where the toolkit is, so one that does not compile fails here.
cuda_check=()
nvcc=${DEEPINFER_NVCC:-/usr/local/cuda/bin/nvcc}
if [ -x "$nvcc" ]; then
  cuda_check=(-DDEEPINFER_CUDA_COMPILE_CHECK=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90)
else
  echo "test.sh: no CUDA toolkit at $nvcc: the .cu kernels are not compiled (set DEEPINFER_NVCC)" >&2
fi

jobs=$(nproc)
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cuda_check[@]}"
cmake --build "$build" -j"$jobs"
[ -n "${DEEPINFER_SKIP_TESTS:-}" ] && exit 0
ctest --test-dir "$build" --output-on-failure -j"$jobs" "$@"

# The torch-free suites (io, engine core) again under AddressSanitizer + UndefinedBehaviorSanitizer,
# in their own build tree; a finding fails the run. DEEPINFER_SKIP_SANITIZE=1 leaves it out.
[ -n "${DEEPINFER_SKIP_SANITIZE:-}" ] && exit 0
asan=${DEEPINFER_ASAN_BUILD_DIR:-build-asan}
[ -f "$asan/CMakeCache.txt" ] || cmake -S . -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEEPINFER_SANITIZE=ON >/dev/null
cmake --build "$asan" -j"$jobs" --target io_tests engine_core_tests
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for suite in io_tests engine_core_tests; do
  echo "test.sh: $suite under ASan/UBSan"
  (cd "$root" && DEEPINFER_SOURCE_DIR="$root" "$asan/tests/$suite" --gtest_brief=1)
done
