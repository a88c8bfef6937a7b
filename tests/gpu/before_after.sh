#!/usr/bin/env bash
# Issue 19's before and after in one call. BEFORE_TREE is an earlier revision's source, exported
# beside the working tree and carried to the GPU machine, e.g. (on the CPU machine):
#   mkdir -p .wt/before && git archive 871f9a8^ | tar -x -C .wt/before     # .wt/ is ignored locally
#   device run, carry [".deps", ".wt/before"]:  source .deps/env.sh && tests/gpu/before_after.sh .wt/before
# Builds `deepinfer` of BEFORE_TREE into build-before and of this tree into build-cuda (at once,
# -j8 each), then runs every workload with the before binary, then the after one:
#   - tiny `bench`: 256 prompts, input 100:1024, output 100:1024, max_num_seqs 256
#   - tiny decode at batch 256: 256 prompts, input 512, output 256
#   - v4-flash-slice decode at batch 1: 1 prompt, input 512, output 256
# Each run's Throughput / Decode steps lines are printed; logs go to LOGS (default /tmp/gpu-logs/before_after).
set -uo pipefail
before_src=$(cd "$1" && pwd)
logs=${2:-/tmp/gpu-logs/before_after}
mkdir -p "$logs"
flags=(-DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo)
(cmake -S "$before_src" -B build-before "${flags[@]}" >/dev/null && cmake --build build-before -j8 --target deepinfer) >"$logs/build_before.log" 2>&1 &
before_pid=$!
(cmake -S . -B build-cuda "${flags[@]}" >/dev/null && cmake --build build-cuda -j8 --target deepinfer) >"$logs/build_after.log" 2>&1
after_rc=$?
wait $before_pid
before_rc=$?
echo "builds: before exit $before_rc, after exit $after_rc"
[ $before_rc -eq 0 ] && [ $after_rc -eq 0 ] || { tail -20 "$logs"/build_*.log; exit 1; }
[ -d build-cuda/tiny_ckpt ] || build-cuda/bin/deepinfer init-model --config configs/models/tiny.json --output build-cuda/tiny_ckpt --seed 0 >/dev/null
common=(--max-num-batched-tokens 8192)
workload() {  # workload NAME ARGS...: the before binary, then the after one
  local name=$1
  shift
  for side in before after; do
    local bin=build-$side/bin/deepinfer
    [ $side = after ] && bin=build-cuda/bin/deepinfer
    echo "== $name, $side"
    timeout 240 "$bin" bench "$@" "${common[@]}" --json "$logs/${name}_$side.json" >"$logs/${name}_$side.log" 2>&1 || echo "FAIL: exit $?"
    grep -E "^Throughput|^Decode steps|^CUDA graphs" "$logs/${name}_$side.log"
  done
}
workload tiny_bench --model build-cuda/tiny_ckpt --num-prompts 256 --input-len 100:1024 --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096
workload tiny_decode_b256 --model build-cuda/tiny_ckpt --num-prompts 256 --input-len 512:512 --output-len 256:256 --max-num-seqs 256 --num-blocks 4096
workload slice_decode_b1 --model random:configs/models/v4-flash-slice.json --num-prompts 1 --input-len 512:512 --output-len 256:256 --max-num-seqs 1 --num-blocks 1024
