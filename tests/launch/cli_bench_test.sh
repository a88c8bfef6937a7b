#!/usr/bin/env bash
# `deepinfer bench` through the binary on the CPU (tiny random model): it prints the memory plan,
# the workload and throughput lines, the decode steps against their roofline floor, the host's
# time per decode step and, with --breakdown, the time of each part; --json holds the same
# figures; a plan that cannot fit, and --kernel-busy without a CUDA device, are refused (exit 2)
# before anything is loaded.
set -u
bin=$1
src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check PATTERN FILE: the file has a line matching PATTERN
  grep -Eq -e "$1" "$2" || { echo "FAIL: no line matching '$1' in $2"; cat "$2"; fail=1; }
}
"$bin" bench --model "random:$src/configs/models/tiny.json" --num-prompts 6 --input-len 16:40 --output-len 8:24 \
  --job "$src/configs/jobs/tiny-cpu.json" --breakdown --json "$tmp/bench.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: bench exited $rc"; cat "$tmp/out" "$tmp/err"; exit 1; }
check '^memory plan, rank 0 of 1 on cpu:' "$tmp/err"
check '^  total .* available: fits' "$tmp/err"
check '^workload: 6 prompts, input 16:40, output 8:24' "$tmp/out"
check '^Throughput: [0-9.]+ requests/s, [0-9.]+ total tokens/s, [0-9.]+ output tokens/s' "$tmp/out"
check '^Decode steps: [1-9][0-9]* timed, .* measured / floor = [0-9.]+x' "$tmp/out"
check "^Host per decode step: schedule [0-9.]+ ms, execute .* [0-9.]+ ms, process .* [0-9.]+ ms, waiting for the device [0-9.]+ ms" "$tmp/out"
check '^  routed experts +[0-9.]+ ms' "$tmp/out"
check '^  attention core +[0-9.]+ ms' "$tmp/out"
for key in output_tokens_per_s decode_roofline_ratio decode_host_schedule_ms breakdown; do
  check "\"$key\"" "$tmp/bench.json"
done
# --kernel-busy on the CPU (the CPU build, or --device cpu in the CUDA build): refused, exit 2, nothing run.
"$bin" bench --model "random:$src/configs/models/tiny.json" --num-prompts 2 --input-len 4:4 --output-len 2:2 \
  --job "$src/configs/jobs/tiny-cpu.json" --kernel-busy >"$tmp/out3" 2>&1
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: --kernel-busy on the CPU exited $rc, want 2"; cat "$tmp/out3"; fail=1; }
check '--kernel-busy needs (the CUDA build|a CUDA device)' "$tmp/out3"
# 10^9 blocks cannot fit: refused with the largest count that does, exit 2, nothing run.
"$bin" bench --model "random:$src/configs/models/tiny.json" --num-prompts 2 --input-len 4:4 --output-len 2:2 \
  --job "$src/configs/jobs/tiny-cpu.json" --num-blocks 1000000000 >"$tmp/out2" 2>&1
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: an impossible plan exited $rc, want 2"; cat "$tmp/out2"; fail=1; }
check 'does not fit cpu; lower num_blocks .* from 1000000000 to at most [0-9]+' "$tmp/out2"
# Workloads that cannot run or be held, and output paths that cannot be written: refused, exit 2,
# before anything runs (no 0.00-throughput "success", no figures lost after the run).
refuse() {  # refuse NAME MESSAGE ARGS...
  local name=$1 message=$2; shift 2
  "$bin" bench --model "random:$src/configs/models/tiny.json" --job "$src/configs/jobs/tiny-cpu.json" "$@" >"$tmp/$name" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || { echo "FAIL: $name exited $rc, want 2"; cat "$tmp/$name"; fail=1; }
  grep -qF -- "$message" "$tmp/$name" || { echo "FAIL: $name lacks '$message'"; cat "$tmp/$name"; fail=1; }
  ! grep -q "^Throughput" "$tmp/$name" || { echo "FAIL: $name ran"; fail=1; }
}
refuse many "option --num-prompts = 99999999999 is out of range" --num-prompts 99999999999 --input-len 4:4 --output-len 2:2
refuse long "exceeds max_model_len" --num-prompts 2 --input-len 4:99999999999 --output-len 2:2
refuse overflow "exceeds max_model_len" --num-prompts 2 --input-len 1:9223372036854775807 --output-len 1:9223372036854775807
refuse range "must be A:B with 1 <= A <= B" --num-prompts 2 --input-len 4:4:4 --output-len 2:2
refuse junk "must be A:B with 1 <= A <= B" --num-prompts 2 --input-len 4x:4 --output-len 2:2
refuse json "--json $tmp/none/b.json: $tmp/none is not a directory" --num-prompts 2 --input-len 4:4 --output-len 2:2 --json "$tmp/none/b.json"
refuse prompts "--prompts-out is empty" --num-prompts 2 --input-len 4:4 --output-len 2:2 --prompts-out ""
exit $fail
