#!/usr/bin/env bash
# The GPU-machine checks, stage by stage, each with its own time limit and log. Logs and data
# go to $LOGS (default /tmp/gpu-logs) and, after every stage, into $OUT/gpu-logs.tgz (the
# device tool returns at most 8 files from $OUT, and what is packed survives a timeout).
# Run from the repository root after `source .deps/env.sh`:
#   tests/gpu/run_gpu_checks.sh build tests tokenizer reference sampler forward   # correctness, step time
#   tests/gpu/run_gpu_checks.sh build bench peer                 # benchmarks (bench = bench_tiny bench_slice)
#   tests/gpu/run_gpu_checks.sh build breakdown context          # step breakdown; slice decode at 4K/32K/128K
#   tests/gpu/run_gpu_checks.sh build nccl nccl_fail             # 2 GPUs (nvidia-h200-x2)
#   tests/gpu/run_gpu_checks.sh build_bench memory long_bench    # memory plan refusal; bench at 4K/32K/128K
#   tests/gpu/run_gpu_checks.sh build_kernels kernel_tests moe_bench micro forward_kernels   # our kernels
#   tests/gpu/run_gpu_checks.sh build_runner runner_cuda graphs bench_graphs   # sync-free steps, CUDA graphs
#   tests/gpu/run_gpu_checks.sh kernel_busy                      # share of the tiny bench's wall with a kernel running
#   tests/gpu/run_gpu_checks.sh gemm                             # the batch-invariant dense GEMMs: tests, bench
#   tests/gpu/run_gpu_checks.sh fp8                              # the FP8 linears: tests, bench
#   tests/gpu/run_gpu_checks.sh build_invariant invariance bench_invariant   # issue 20: the batch-invariant mode
# A failing stage is reported and the next one still runs; the exit code is the number of
# failed stages.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
LOGS=${LOGS:-/tmp/gpu-logs}
mkdir -p "$OUT" "$LOGS"
build=${DEEPINFER_CUDA_BUILD:-build-cuda}
failed=0
stage() {  # stage NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "== $name (limit ${limit}s)"
  timeout "$limit" bash -c "$*" >"$LOGS/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start))s"
  tail -n 25 "$LOGS/$name.log"
  [ $rc -eq 0 ] || failed=$((failed + 1))
  tar czf "$OUT/gpu-logs.tgz" -C "$LOGS" . 2>/dev/null
}
python3 -c 'import torch; print("torch", torch.__version__, "cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)' | tee "$LOGS/torch.txt"
tlib=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
echo "simdjson/zstd symbols exported by LibTorch: $(nm -D --defined-only "$tlib"/libtorch_cpu.so 2>/dev/null | grep -ci simdjson) / $(nm -D --defined-only "$tlib"/libtorch_cpu.so 2>/dev/null | grep -c ' ZSTD_')" | tee -a "$LOGS/torch.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOGS/gpu.txt"
for s in "$@"; do
  case $s in
    build)
      stage build 420 "cmake -S . -B $build -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $build -j16" ;;
    build_bench)
      # Only what the benchmark stages run (a few minutes instead of the full build).
      stage build_bench 420 "cmake -S . -B $build -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $build -j16 --target deepinfer forward_bench pipeline_tests" ;;
    build_runner)
      # Only the binary and the runner's CUDA tests (the graph and bench stages).
      stage build_runner ${DEEPINFER_BUILD_LIMIT:-420} "cmake -S . -B $build -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $build -j16 --target deepinfer engine_runner_cuda_tests ${DEEPINFER_BUILD_EXTRA:-}" ;;
    build_kernels)
      # The kernels' tests and benchmarks, forward_bench, and the transformers comparison's targets.
      stage build_kernels ${DEEPINFER_BUILD_LIMIT:-420} "cmake -S . -B $build -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $build -j16 --target attention_cuda_tests moe_cuda_tests model_cuda_tests moe_bench attention_micro forward_bench ${DEEPINFER_BUILD_EXTRA:-}" ;;
    kernel_tests)
      for t in ${DEEPINFER_KERNEL_TESTS:-attention_cuda_tests moe_cuda_tests model_cuda_tests}; do
        stage $t ${DEEPINFER_KERNEL_TEST_LIMIT:-150} "DEEPINFER_SOURCE_DIR=\$PWD $build/tests/$t"
        grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "$LOGS/$t.log" | head -20
      done ;;
    gemm)
      # The batch-invariant dense GEMMs (model/cuda/dense_gemm.h): their tests (float64 reference,
      # bitwise batch invariance) and their microbenchmark beside at::linear.
      stage build_gemm ${DEEPINFER_BUILD_LIMIT:-420} "cmake -S . -B $build -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $build -j16 --target dense_gemm_cuda_tests dense_gemm_bench"
      stage dense_gemm_cuda_tests ${DEEPINFER_KERNEL_TEST_LIMIT:-300} "DEEPINFER_SOURCE_DIR=\$PWD $build/tests/dense_gemm_cuda_tests"
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "$LOGS/dense_gemm_cuda_tests.log" | head -20
      stage dense_gemm_bench ${DEEPINFER_GEMM_BENCH_LIMIT:-300} "$build/bin/dense_gemm_bench --rows ${DEEPINFER_GEMM_ROWS:-1,64,256,4096,8192} --iters 30" ;;
    fp8)
      # The FP8 linears kept in FP8 (model/cuda/fp8_gemm.h, act_quant.h): their tests against the
      # dequantise-then-GEMM reference, and their microbenchmark beside bfloat16 at::linear.
      stage build_fp8 ${DEEPINFER_BUILD_LIMIT:-420} "cmake -S . -B $build -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $build -j16 --target fp8_linear_cuda_tests fp8_linear_bench"
      stage fp8_linear_cuda_tests ${DEEPINFER_KERNEL_TEST_LIMIT:-300} "DEEPINFER_SOURCE_DIR=\$PWD $build/tests/fp8_linear_cuda_tests"
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "$LOGS/fp8_linear_cuda_tests.log" | head -20
      stage fp8_linear_bench ${DEEPINFER_FP8_BENCH_LIMIT:-300} "$build/bin/fp8_linear_bench --rows ${DEEPINFER_FP8_ROWS:-1,64,256,4096} --iters 30" ;;
    build_invariant)
      stage build_invariant ${DEEPINFER_BUILD_LIMIT:-420} "cmake -S . -B $build -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $build -j16 --target deepinfer batch_invariant_cuda_tests ${DEEPINFER_BUILD_EXTRA:-}" ;;
    invariance)
      # Issue 20: rows alone vs in batches and chunked prefill, bit for bit (batch_invariant_cuda_tests);
      # then whole jobs against a baseline (tests/gpu/invariance_checks.sh, INVARIANCE_MODELS).
      stage batch_invariant_cuda_tests ${DEEPINFER_KERNEL_TEST_LIMIT:-200} "DEEPINFER_SOURCE_DIR=\$PWD $build/tests/batch_invariant_cuda_tests"
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|^\[batch_invariant\]" "$LOGS/batch_invariant_cuda_tests.log" | head -20
      stage invariance ${DEEPINFER_INVARIANCE_LIMIT:-420} "tests/gpu/invariance_checks.sh $build $LOGS/invariance ${DEEPINFER_INVARIANCE_PROMPTS:-256} ${DEEPINFER_INVARIANCE_ARGS:---batch-invariant}" ;;
    bench_invariant)
      # Issue 20: the mode's cost, side by side: the v4-flash-slice bench workload without and with --batch-invariant.
      for m in official invariant; do
        flag=$([ $m = invariant ] && echo --batch-invariant)
        stage bench_slice_$m ${DEEPINFER_SLICE_LIMIT:-200} "$build/bin/deepinfer bench --model random:configs/models/v4-flash-slice.json --num-prompts ${DEEPINFER_SLICE_PROMPTS:-256} --input-len 100:1024 --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096 --max-num-batched-tokens 8192 $flag --json $LOGS/bench_slice_$m.json"
      done ;;
    moe_bench)
      stage moe_bench ${DEEPINFER_MOE_BENCH_LIMIT:-150} "$build/bin/moe_bench --tokens ${DEEPINFER_MOE_TOKENS:-1,64,256,4096} --iters 30" ;;
    micro)
      # The attention and indexer kernels alone (tests/model/attention_micro.cu, CUDA-graph replay).
      stage micro 120 "for l in csa hca swa; do $build/bin/attention_micro attention --batch 64 --context 32768 --layer \$l; done; $build/bin/attention_micro attention --batch 256 --context 32768 --layer csa; $build/bin/attention_micro attention --batch 64 --context 131072 --layer hca; $build/bin/attention_micro attention --batch 1 --context 32768 --layer csa; for c in 32768 131072; do $build/bin/attention_micro indexer --batch 64 --context \$c; done" ;;
    forward_kernels)
      # forward_bench on v4-flash-slice with the ATen path (gathered) and our kernels (paged), side by side.
      for ctx in ${DEEPINFER_FORWARD_CONTEXTS:-512 32768}; do
        for att in ${DEEPINFER_FORWARD_ATTENTION:-gathered paged}; do
          stage forward_${ctx}_$att ${DEEPINFER_FORWARD_LIMIT:-200} "$build/bin/forward_bench --config configs/models/v4-flash-slice.json --device cuda --batch 1,64,256 --context $ctx --iters 10 --warmup 2 --breakdown 1 --attention $att"
        done
      done ;;
    memory)
      # The memory plan: the full V4-Flash shape is refused on one GPU, with its advice (exit 2).
      stage memory_refusal 120 "$build/bin/deepinfer bench --model random:configs/models/v4-flash.json --num-prompts 1 --input-len 16:16 --output-len 4:4; test \$? -eq 2" ;;
    long_bench)
      # bench --input-len at 4K, 32K and 128K on v4-flash-slice: LEN:PROMPTS, 64 output tokens each.
      for spec in ${DEEPINFER_LONG_BENCH:-4096:64 32768:16 131072:2}; do
        len=${spec%%:*} n=${spec##*:}
        stage long_bench_$len ${DEEPINFER_LONG_LIMIT:-240} "$build/bin/deepinfer bench --model random:configs/models/v4-flash-slice.json --num-prompts $n --input-len $len:$len --output-len 64:64 --max-num-seqs $n --num-blocks 8192 --max-num-batched-tokens 8192 --max-model-len $((len + 128)) --warmup-prompts 1 --breakdown --json $LOGS/long_bench_$len.json"
      done ;;
    tests)
      # What the GPU adds: the CUDA tests, and the suites that touch files through the CUDA
      # LibTorch (the CPU-only rest runs in CI; on 16 cores with every test threaded it is slow).
      stage tests ${DEEPINFER_TESTS_LIMIT:-240} "ctest --test-dir $build -j8 --output-on-failure -R '${DEEPINFER_TESTS_REGEX:-Cuda|Checkpoint|GenerateJob}' ${DEEPINFER_TESTS_ARGS:-}" ;;
    e2e)
      stage e2e 240 "ctest --test-dir $build --output-on-failure -R cli_generate" ;;
    reference)
      stage reference 300 "tests/reference/run_hf_reference.sh $build" ;;
    sampler)
      stage sampler 120 "$build/bin/sampler_bench --device cuda" ;;
    forward)
      # Decode-step time and operator calls, batch 64 (the sampler bench's batch): tiny, then v4-flash-slice.
      stage forward ${DEEPINFER_FORWARD_LIMIT:-240} "$build/bin/forward_bench --config configs/models/tiny.json --device cuda --batch 64 --context 512 && $build/bin/forward_bench --config configs/models/v4-flash-slice.json --device cuda --batch 64 --context 512" ;;
    tokenizer)
      stage tokenizer 120 "python3 tests/reference/tokenizer_parity.py --out $LOGS/tokenizer_parity" ;;
    bench|bench_tiny|bench_slice)
      # The tiny checkpoint both we and the transformers peer run (bfloat16 on CUDA for both).
      [ $s = bench_slice ] || stage tiny_ckpt 60 "$build/bin/deepinfer init-model --config configs/models/tiny.json --output $build/tiny_ckpt --seed 0"
      [ $s = bench_slice ] || stage bench_tiny ${DEEPINFER_BENCH_LIMIT:-200} "$build/bin/deepinfer bench --model $build/tiny_ckpt --num-prompts 256 --input-len 100:1024 --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096 --max-num-batched-tokens 8192 --json $LOGS/bench_tiny.json --prompts-out $LOGS/prompts_tiny.jsonl"
      [ $s = bench_tiny ] || stage bench_slice ${DEEPINFER_SLICE_LIMIT:-300} "$build/bin/deepinfer bench --model random:configs/models/v4-flash-slice.json --num-prompts ${DEEPINFER_SLICE_PROMPTS:-256} --input-len 100:1024 --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096 --max-num-batched-tokens 8192 --json $LOGS/bench_slice.json" ;;
    kernel_busy)
      # Issue 19: the kernel-busy meter's own test, then the share of the tiny bench's wall time in
      # which a kernel ran (bench --kernel-busy, CUPTI; the bench_tiny workload).
      stage build_kernel_busy ${DEEPINFER_BUILD_LIMIT:-420} "cmake -S . -B $build -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build $build -j16 --target deepinfer engine_kernel_busy_cuda_tests ${DEEPINFER_BUILD_EXTRA:-}"
      stage kernel_busy_test 60 "DEEPINFER_SOURCE_DIR=\$PWD $build/tests/engine_kernel_busy_cuda_tests"
      [ -d $build/tiny_ckpt ] || stage tiny_ckpt 60 "$build/bin/deepinfer init-model --config configs/models/tiny.json --output $build/tiny_ckpt --seed 0"
      for g in eager graphs; do  # without, then with CUDA graphs
        flag=$([ $g = eager ] && echo --no-cuda-graphs)
        stage kernel_busy_tiny_$g ${DEEPINFER_BENCH_LIMIT:-200} "$build/bin/deepinfer bench --model $build/tiny_ckpt --num-prompts 256 --input-len 100:1024 --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096 --max-num-batched-tokens 8192 --kernel-busy $flag --json $LOGS/kernel_busy_tiny_$g.json"
      done ;;
    breakdown)
      # Where a step's time goes (engine/part_timer.h): the bench workloads, fewer prompts.
      [ -d $build/tiny_ckpt ] || stage tiny_ckpt 60 "$build/bin/deepinfer init-model --config configs/models/tiny.json --output $build/tiny_ckpt --seed 0"
      stage breakdown_tiny 150 "$build/bin/deepinfer bench --model $build/tiny_ckpt --num-prompts 64 --input-len 100:1024 --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096 --max-num-batched-tokens 8192 --breakdown --json $LOGS/breakdown_tiny.json"
      stage breakdown_slice 200 "$build/bin/deepinfer bench --model random:configs/models/v4-flash-slice.json --num-prompts 64 --input-len 100:1024 --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096 --max-num-batched-tokens 8192 --breakdown --json $LOGS/breakdown_slice.json" ;;
    context)
      # v4-flash-slice decode steps at long contexts, batch 1 / 64 / 256 where memory allows.
      for ctx in ${DEEPINFER_CONTEXTS:-4096 32768 131072}; do
        stage context_$ctx ${DEEPINFER_CONTEXT_LIMIT:-200} "$build/bin/forward_bench --config configs/models/v4-flash-slice.json --device cuda --batch ${DEEPINFER_CONTEXT_BATCHES:-1,64,256} --context $ctx --iters 10 --warmup 2 --breakdown 1"
      done ;;
    peer)
      # The fair peer: every prompt of the bench, at each batch size of DEEPINFER_PEER_BATCHES.
      [ -d $build/tiny_ckpt ] || stage tiny_ckpt 60 "$build/bin/deepinfer init-model --config configs/models/tiny.json --output $build/tiny_ckpt --seed 0"
      for batch in ${DEEPINFER_PEER_BATCHES:-64 128 256}; do
        stage peer_$batch ${DEEPINFER_PEER_LIMIT:-300} "python3 tests/reference/hf_generate_peer.py --checkpoint $build/tiny_ckpt --prompts $LOGS/prompts_tiny.jsonl --dtype bfloat16 --device cuda --batch-size $batch ${DEEPINFER_PEER_ARGS:-} --json $LOGS/peer_tiny_$batch.json"
      done ;;
    runner_cuda)
      # ModelRunner on CUDA: no host sync inside execute(); graphs equal to eager steps (tiny, bfloat16).
      stage runner_cuda 150 "$build/tests/engine_runner_cuda_tests" ;;
    graphs)
      # Results with and without CUDA graphs, byte for byte: tiny and v4-flash-slice, greedy and sampled.
      stage graphs ${DEEPINFER_GRAPHS_LIMIT:-420} "tests/gpu/graph_checks.sh $build $LOGS/graphs ${DEEPINFER_GRAPH_PROMPTS:-256} ${DEEPINFER_GRAPH_SLICE_PROMPTS:-64}" ;;
    bench_graphs)
      # Without and with CUDA graphs in one call: the tiny bench workload, then v4-flash-slice decode at batch 1 and 64.
      [ -d $build/tiny_ckpt ] || stage tiny_ckpt 60 "$build/bin/deepinfer init-model --config configs/models/tiny.json --output $build/tiny_ckpt --seed 0"
      for g in eager graphs; do
        flag=$([ $g = eager ] && echo --no-cuda-graphs)
        stage bench_tiny_$g ${DEEPINFER_BENCH_LIMIT:-200} "$build/bin/deepinfer bench --model $build/tiny_ckpt --num-prompts 256 --input-len 100:1024 --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096 --max-num-batched-tokens 8192 ${DEEPINFER_BENCH_ARGS:-} $flag --json $LOGS/bench_tiny_$g.json"
        for n in 1 64; do
          stage bench_slice_b${n}_$g ${DEEPINFER_SLICE_LIMIT:-200} "$build/bin/deepinfer bench --model random:configs/models/v4-flash-slice.json --num-prompts $n --input-len 512:512 --output-len 256:256 --max-num-seqs $n --num-blocks 1024 --max-num-batched-tokens 8192 --warmup-prompts $n $flag --json $LOGS/bench_slice_b${n}_$g.json"
        done
      done ;;
    nccl)
      stage nccl ${DEEPINFER_NCCL_LIMIT:-400} "tests/gpu/nccl_generate.sh $build $LOGS/nccl ${DEEPINFER_NCCL_PROMPTS:-64} ${DEEPINFER_NCCL_SLICE_PROMPTS:-16}" ;;
    nccl_fail)
      stage nccl_fail ${DEEPINFER_NCCL_FAIL_LIMIT:-240} "tests/gpu/nccl_failure.sh $build $LOGS/nccl_fail" ;;
    *) echo "unknown stage $s"; failed=$((failed + 1)) ;;
  esac
done
exit $failed
