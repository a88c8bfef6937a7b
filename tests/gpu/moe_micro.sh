#!/usr/bin/env bash
# The torch-free routed-expert microbenchmark (tests/model/moe_micro.cu) on the GPU machine: built
# with nvcc alone (seconds, no LibTorch), then run for the token counts of issue 18 (1, 64, 256,
# 4,096 at v4-flash-slice's dimensions). With a reference copy of the kernels (made here first by
# `tests/gpu/moe_micro.sh --prepare REV`: git REV's model/cuda/ into .deps/moe_ref/, its kernels
# compiled against its own headers with -Ddeepinfer=deepinfer_ref), each output is compared with
# that revision's and both are timed in the same run. `profile` as an argument adds each kernel's
# device time from Nsight Compute (one call at 1 and at 4,096 tokens; ncu serializes the kernels).
# `prefill` adds Nsight Compute's view of the prefill kernels at 4,096 tokens: L2, DRAM, tensor pipe and
# issue throughput, and the cycles a warp waits per issued instruction by stall reason.
# `source` adds Nsight Compute's stall samples per SASS instruction of the prefill kernels at 4,096
# tokens (prefill_source.csv under $OUT), the sort's stall reasons, and each prefill kernel's SM
# active cycles (min, mean, max: how evenly the persistent blocks' items spread).
# Variants (MOE_VARIANTS) are checked against the reference too, unless named time_* (timing only).
# `probe` as an argument also builds and runs tests/model/moe_load_probe.cu (the decode kernels'
# loads without their arithmetic, beside variants of the pattern).
# `decode` adds Nsight Compute's view of the decode kernels at 1 token: stall samples summed by
# SASS opcode (decode_source.txt under $OUT), issue and occupancy figures.
# `chain` also builds and runs tests/model/mma_chain.cu (a dependent mma.sync chain's latency and the
# decode superblock without global memory, at 1-24 warps a multiprocessor) before the rest.
# `rate` builds and runs tests/model/wgmma_rate.cu alone (the register-A wgmma's rate at the prefill
# widths, with and without the dequantization in front of it) and nothing else.
# `--build-only` builds here (nvcc needs no GPU) and stops; `--no-build` runs what build-micro/
# holds (carry it), so the call spends no device time compiling.
#   tests/gpu/moe_micro.sh --prepare e40fd58           (here, before the call; .deps travels as carry)
#   tests/gpu/moe_micro.sh [--build-only|--no-build] [profile|prefill|source|decode|chain|probe|rate]
set -uo pipefail
if [ "${1:-}" = "--prepare" ]; then
  rm -rf .deps/moe_ref && mkdir -p .deps/moe_ref
  git archive "${2:-HEAD}" model/cuda | tar -x -C .deps/moe_ref || exit 1
  echo "reference kernels of ${2:-HEAD} in .deps/moe_ref"
  exit 0
fi
build=1 run=1
case "${1:-}" in
  --build-only) run=0; shift ;;
  --no-build) build=0; shift ;;
esac
mode=${1:-}
out=${OUT:-/tmp}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
M=build-micro/moe_micro
if [ $build = 1 ]; then
  mkdir -p build-micro
  : > "$out/moe_micro_build.log"
  ref=()
  if [ -f .deps/moe_ref/model/cuda/moe_fp4_gemm.cu ]; then
    for src in .deps/moe_ref/model/cuda/moe_fp4_*.cu; do
      f=$(basename "$src" .cu)
      # The reference's arch: sm_90a where its kernels use wgmma, else sm_90.
      arch=(-arch=sm_90)
      grep -q wgmma "$src" && arch=(-gencode=arch=compute_90a,code=sm_90a)
      $nvcc -std=c++17 -O3 "${arch[@]}" -I.deps/moe_ref -I. -Ddeepinfer=deepinfer_ref -c "$src" \
        -o build-micro/moe_ref_$f.o >> "$out/moe_micro_build.log" 2>&1 || { cat "$out/moe_micro_build.log"; exit 1; }
      ref+=(build-micro/moe_ref_$f.o)
    done
    ref=(-DDEEPINFER_MICRO_REFERENCE "${ref[@]}")
  fi
  # The kernels: the prefill GEMMs for sm_90a (wgmma), the rest for sm_90.
  objs=()
  for f in moe_fp4_gemm moe_fp4_decode moe_fp4_route moe_fp4_prefill; do
    arch=(-arch=sm_90)
    [ $f = moe_fp4_prefill ] && arch=(-gencode=arch=compute_90a,code=sm_90a)
    $nvcc -std=c++17 -O3 "${arch[@]}" -lineinfo -I. -Xptxas -v -c model/cuda/$f.cu -o build-micro/$f.o >> "$out/moe_micro_build.log" 2>&1 ||
      { cat "$out/moe_micro_build.log"; exit 1; }
    objs+=(build-micro/$f.o)
  done
  $nvcc -std=c++17 -O3 -arch=sm_90 -I. tests/model/moe_micro.cu "${objs[@]}" "${ref[@]}" -o $M >> "$out/moe_micro_build.log" 2>&1 ||
    { cat "$out/moe_micro_build.log"; exit 1; }
  grep -E "registers|spill|C75" "$out/moe_micro_build.log" | grep -v "0 bytes spill" | head -20
  if [ "$mode" = probe ]; then
    $nvcc -std=c++17 -O3 -arch=sm_90 -I. tests/model/moe_load_probe.cu -o build-micro/moe_load_probe >> "$out/moe_micro_build.log" 2>&1 ||
      { cat "$out/moe_micro_build.log"; exit 1; }
  fi
fi
if [ "$mode" = chain ]; then
  if [ $build = 1 ]; then
    $nvcc -std=c++17 -O3 -arch=sm_90 -I. tests/model/mma_chain.cu -o build-micro/mma_chain >> "$out/moe_micro_build.log" 2>&1 ||
      { cat "$out/moe_micro_build.log"; exit 1; }
  fi
  if [ $run = 1 ]; then
    build-micro/mma_chain 2>&1 | tee "$out/mma_chain.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || exit 1
  fi
fi
if [ "$mode" = rate ]; then
  if [ $build = 1 ]; then
    $nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. tests/model/wgmma_rate.cu -o build-micro/wgmma_rate >> "$out/moe_micro_build.log" 2>&1 ||
      { cat "$out/moe_micro_build.log"; exit 1; }
  fi
  [ $run = 1 ] || exit 0
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
  build-micro/wgmma_rate 2>&1 | tee "$out/wgmma_rate.txt"
  exit "${PIPESTATUS[0]}"
fi
# Variants named in MOE_VARIANTS as NAME:FLAGS (e.g. "st3:-DDEEPINFER_MOE_PREFILL_STAGES=3"; commas for
# spaces): the kernels (and moe_micro.cu) rebuilt with those flags into build-micro/moe_micro_NAME, run after
# the main binary. "time_trace:-DDEEPINFER_MOE_TRACE=1" prints the decode kernels' per-block timeline.
if [ $build = 1 ]; then
  for v in ${MOE_VARIANTS:-}; do
    name=${v%%:*} flags=${v#*:}
    vobjs=()
    : > "$out/moe_micro_build_$name.log"
    for f in moe_fp4_gemm moe_fp4_decode moe_fp4_route moe_fp4_prefill; do
      arch=(-arch=sm_90)
      [ $f = moe_fp4_prefill ] && arch=(-gencode=arch=compute_90a,code=sm_90a)
      $nvcc -std=c++17 -O3 "${arch[@]}" -I. -Xptxas -v ${flags//,/ } -c model/cuda/$f.cu -o build-micro/${f}_$name.o >> "$out/moe_micro_build_$name.log" 2>&1 ||
        { cat "$out/moe_micro_build_$name.log"; exit 1; }
      [ $f = moe_fp4_prefill ] && grep -E "registers|spill|C75" "$out/moe_micro_build_$name.log" | grep -v "0 bytes spill" | sed "s/^/$name: /" | head -8
      vobjs+=(build-micro/${f}_$name.o)
    done
    vref=("${ref[@]}")
    case $name in time_*) vref=() ;; esac
    $nvcc -std=c++17 -O3 -arch=sm_90 -I. ${flags//,/ } tests/model/moe_micro.cu "${vobjs[@]}" "${vref[@]}" -o build-micro/moe_micro_$name >> "$out/moe_micro_build.log" 2>&1 ||
      { cat "$out/moe_micro_build.log"; exit 1; }
  done
fi
[ $run = 1 ] || exit 0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
# Against the reference copy (when built with one): the test suite's configurations, bit for bit.
$M --check > "$out/moe_check.txt" 2>&1
check_status=$?
grep -cE "^  check" "$out/moe_check.txt" | sed 's/$/ configurations checked/'
grep -E "DIFFERENT|: [1-9][0-9]* of [0-9]+ values| [1-9][0-9]* NaN|--check:|moe_micro:" "$out/moe_check.txt" | head -20
tokens=${MOE_TOKENS:-1,64,256,4096}
$M --tokens $tokens --iters 20 2>&1 | tee "$out/moe_micro.txt"
status=$(( ${PIPESTATUS[0]} + check_status ))
for b in build-micro/moe_micro_*; do
  [ -x "$b" ] || continue
  name=${b#build-micro/moe_micro_}
  echo "== variant $name"
  case $name in
    time_*) ;;
    *) $b --check > /tmp/moe_check_$name.txt 2>&1 || status=$(( status + 1 ))
       grep -cE "^  check" /tmp/moe_check_$name.txt | sed 's/$/ configurations checked against the reference/'
       grep -E "DIFFERENT|: [1-9][0-9]* of [0-9]+ values| [1-9][0-9]* NaN|--check:|moe_micro:" /tmp/moe_check_$name.txt | head -8 ;;
  esac
  $b --tokens $tokens --iters 20 2>&1 | grep -E "tokens:|this version|CHECKS|NO|  trace|    [a-z/ ()]+ min " | tee -a "$out/moe_micro.txt"
done
if [ "$mode" = probe ]; then
  build-micro/moe_load_probe 2>&1 | tee "$out/moe_load_probe.txt"
  status=$(( status + ${PIPESTATUS[0]} ))
fi
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ "$mode" = profile ]; then
  for t in 1 64 4096; do
    for side in "deepinfer::" "deepinfer_ref::"; do
      echo "== ncu, $t tokens, kernels of ${side%::}: device time per launch (serialized), the first call's"
      $ncu --clock-control none --metrics gpu__time_duration.sum --kernel-name-base demangled --kernel-name "regex:${side}model" \
        --launch-count 8 $M --tokens $t --iters 1 > "$out/moe_ncu_${t}_${side%::}.txt" 2>&1
      awk '/^  [a-zA-Z_].*\(/ { name = $0; sub(/^ +/, "", name); sub(/\(.*/, "", name); n = split(name, parts, "::"); name = parts[n] }
           /gpu__time_duration.sum/ { printf "  %-40s %s %s\n", name, $3, $2 }' "$out/moe_ncu_${t}_${side%::}.txt"
    done
  done
fi
if [ "$mode" = source ]; then
  # Where in the prefill kernels' SASS the warps wait: Nsight Compute's stall samples per SASS
  # instruction at 4,096 tokens (this build), as CSV.
  $ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:deepinfer::.*prefill_kernel" --launch-count 2 \
    --section SourceCounters --section WarpStateStats --import-source yes -f -o /tmp/moe_source $M --tokens 4096 --iters 1 > /dev/null 2>&1
  $ncu --import /tmp/moe_source.ncu-rep --page source --csv --print-source sass > /tmp/prefill_source_full.csv 2>&1
  # Only the columns read here (address, SASS, stall samples, executions, the per-reason stall
  # columns) and only the instructions that executed, so the file comes back from the machine.
  python3 - /tmp/prefill_source_full.csv "$out/prefill_source.csv" <<'PY'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
keep, kept = None, 0
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f)
    for r in rows:
        if r and r[0] == "Kernel Name":
            w.writerow(r[:2]); keep = None; continue
        if r and r[0] == "Address":
            ie = r.index("Instructions Executed")
            keep = [i for i, h in enumerate(r) if i < 3 or h in ("Instructions Executed", "Warp Stall Sampling (Not-issued Samples)") or re.search("stall", h, re.I)]
            print("columns kept:", [r[i] for i in keep]); w.writerow([r[i] for i in keep]); continue
        if keep and len(r) > max(keep) and (r[2] not in ("0", "") or r[ie] not in ("0", "")):
            w.writerow([r[i] for i in keep]); kept += 1
print(kept, "instructions kept of", len(rows), "lines")
PY
  echo "== ncu, 4,096 tokens, the sort (route_kernel): duration and the cycles a warp waits per issued instruction"
  $ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:deepinfer::.*route_kernel" --launch-count 1 \
    --metrics "gpu__time_duration.sum,smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    $M --tokens 4096 --iters 1 2>&1 | awk '/gpu__time|inst_executed/ { print "    " $1, $2, $3 } $3 + 0 >= 0.2 && /stalled/ { sub(/smsp__average_warps_issue_stalled_/, ""); printf "    %-50s %s\n", $1, $3 }'
  # How evenly the persistent blocks' items spread: each SM's active cycles (min, mean, max).
  for b in $M build-micro/moe_micro_*; do
    echo "== ncu, 4,096 tokens, prefill kernels of $b: duration and SM active cycles min / mean / max"
    $ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:deepinfer::.*prefill_kernel" --launch-count 2 \
      --metrics gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max $b --tokens 4096 --iters 1 2>&1 |
      grep -E "prefill_kernel|gpu__time|sm__cycles" | sed 's/^ */  /'
  done
fi
if [ "$mode" = decode ]; then
  # Where the decode kernels' warps wait at 1 token: Nsight Compute's stall samples per SASS
  # instruction, summed by opcode (decode_source.txt under $OUT), and each kernel's figures; of the
  # binary MOE_DECODE_BIN (a variant's) where set.
  $ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:deepinfer::.*decode_kernel" --launch-count 2 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section SchedulerStats --section Occupancy \
    --import-source yes -f -o /tmp/moe_decode ${MOE_DECODE_BIN:-$M} --tokens 1 --iters 1 > /dev/null 2>&1
  $ncu --import /tmp/moe_decode.ncu-rep --page details 2>&1 | grep -E "decode_kernel|Duration|DRAM Throughput|Issued Warp|Eligible Warps|Active Warps Per|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers" | sed 's/^ */  /'
  $ncu --import /tmp/moe_decode.ncu-rep --page source --csv --print-source sass > /tmp/decode_source_full.csv 2>&1
  python3 - /tmp/decode_source_full.csv "$out/decode_source.txt" <<'PY'
import csv, re, sys, collections
rows = list(csv.reader(open(sys.argv[1], newline="")))
out = open(sys.argv[2], "w")
def flush(name, agg, total):
    if not agg: return
    print("==", name[:90], file=out); print("==", name[:90])
    reasons = collections.Counter()
    for op, (n, ex, st) in agg.items(): reasons.update(st)
    top = [r for r, _ in reasons.most_common(8)]
    line = "%-14s %6s %9s %7s " % ("opcode", "count", "executed", "samples") + " ".join("%9s" % r.replace("stall_", "")[:9] for r in top)
    print(line, file=out); print(line)
    for op, (n, ex, st) in sorted(agg.items(), key=lambda kv: -sum(kv[1][2].values())):
        line = "%-14s %6d %9d %7d " % (op, n, ex, sum(st.values())) + " ".join("%9d" % st.get(r, 0) for r in top)
        print(line, file=out); print(line)
    line = "total samples %d" % total; print(line, file=out); print(line)
name, agg, cols, total = "", {}, None, 0
for r in rows:
    if r and r[0] == "Kernel Name":
        flush(name, agg, total); name, agg, cols, total = r[1], {}, None, 0; continue
    if r and r[0] == "Address":
        ie = r.index("Instructions Executed")
        cols = [(i, h) for i, h in enumerate(r) if h.startswith("stall_") and "Not Issued" not in h]
        continue
    if cols and len(r) > ie:
        op = r[1].strip().split()
        if not op: continue
        op = op[1] if op[0].startswith("@") and len(op) > 1 else op[0]
        op = op.split(".")[0]
        ex = int(r[ie] or 0)
        st = {h: int(r[i] or 0) for i, h in cols if (r[i] or "0") != "0"}
        if ex == 0 and not st: continue
        n0, e0, s0 = agg.get(op, (0, 0, collections.Counter()))
        s0.update(st); agg[op] = (n0 + 1, e0 + ex, s0); total += sum(st.values())
flush(name, agg, total)
PY
fi
if [ "$mode" = prefill ]; then
  # Where the prefill GEMMs' time goes at 4,096 tokens (this build and each variant's).
  for b in $M build-micro/moe_micro_*; do
    [ -x "$b" ] || continue
    echo "== ncu, 4,096 tokens, prefill kernels of $b"
    $ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:deepinfer::.*prefill_kernel" --launch-count 2 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats \
      --metrics lts__t_bytes.sum.per_second,dram__bytes_read.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,sm__cycles_elapsed.avg.per_second \
      $b --tokens 4096 --iters 1 > "$out/moe_prefill_$(basename $b).txt" 2>&1
    grep -E "prefill_kernel|Duration|Throughput|Busy|Hit Rate|per_second|Spilling Requests  |Executed Ipc" "$out/moe_prefill_$(basename $b).txt" | head -60
  done
  echo "== ncu, 4,096 tokens, where the prefill kernels' warps wait (cycles a warp an issued instruction)"
  $ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:deepinfer::.*prefill_kernel" --launch-count 2 \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" $M --tokens 4096 --iters 1 > "$out/moe_stalls.txt" 2>&1
  awk '/prefill_kernel/ { print } $3 + 0 >= 0.05 && /stalled/ { sub(/smsp__average_warps_issue_stalled_/, ""); printf "    %-50s %s\n", $1, $3 }' "$out/moe_stalls.txt"
fi
exit $status
