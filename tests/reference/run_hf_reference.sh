#!/usr/bin/env bash
# The GPU-machine comparison of our DeepSeek-V4 forward against transformers'
# DeepseekV4ForCausalLM (issue 4): for a dense-expert and an FP4-expert checkpoint written by
# `deepinfer init-model`, hf_reference.py writes transformers' logits (float32 and bfloat16) and
# the hf_reference_tests gtest compares ours (one-shot, chunked / decode, batched).
#
#   tests/reference/run_hf_reference.sh BUILD_DIR [WORK_DIR]
#
# Environment: PYTHON (default python3, needs torch + transformers >= 5.8), DEEPINFER_HF_CONFIG
# (default configs/models/tiny.json), DEEPINFER_HF_DEVICE (cuda or cpu for both sides; default
# cuda), DEEPINFER_HF_SEED (init-model seed, default 7). Exits non-zero on the first failure.
set -uo pipefail  # every combination runs; the exit code counts the failed comparisons
failures=0

BUILD=${1:?usage: run_hf_reference.sh BUILD_DIR [WORK_DIR]}
BUILD=$(cd "$BUILD" && pwd)
WORK=${2:-$BUILD/hf_reference}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3}
CONFIG=${DEEPINFER_HF_CONFIG:-$SRC/configs/models/tiny.json}
DEVICE=${DEEPINFER_HF_DEVICE:-cuda}
SEED=${DEEPINFER_HF_SEED:-7}
DEEPINFER=$BUILD/bin/deepinfer
GTEST=$BUILD/tests/hf_reference_tests

for tool in "$DEEPINFER" "$GTEST"; do
  [[ -x $tool ]] || { echo "run_hf_reference: $tool not built (cmake --build $BUILD --target deepinfer hf_reference_tests)" >&2; exit 1; }
done
"$PYTHON" -c 'import torch, transformers; from transformers import DeepseekV4ForCausalLM; print("run_hf_reference: torch", torch.__version__, "transformers", transformers.__version__)'

rm -rf "$WORK"
mkdir -p "$WORK"
summary=()
for experts in dense fp4; do
  ckpt=$WORK/ckpt_$experts
  flags=()
  [[ $experts == fp4 ]] && flags+=(--experts-fp4)
  echo "== init-model ($experts experts) -> $ckpt"
  "$DEEPINFER" init-model --config "$CONFIG" --output "$ckpt" --seed "$SEED" ${flags[@]+"${flags[@]}"} || exit 1
  "$PYTHON" "$SRC/tests/reference/hf_reference.py" --checkpoint "$ckpt" --check-names || exit 1
  for dtype in float32 bfloat16; do
    ref=$WORK/reference_${experts}_${dtype}.safetensors
    echo "== transformers $dtype ($experts experts) -> $ref"
    "$PYTHON" "$SRC/tests/reference/hf_reference.py" --checkpoint "$ckpt" --out "$ref" --dtype "$dtype" --device "$DEVICE" \
      2>&1 | tee "$WORK/hf_${experts}_${dtype}.log" || { failures=$((failures + 1)); continue; }
    echo "== ours vs transformers ($dtype, $experts experts)"
    if [[ $DEVICE == cpu ]]; then export DEEPINFER_HF_DEVICE=cpu; fi
    DEEPINFER_HF_REFERENCE=$ref DEEPINFER_HF_CHECKPOINT=$ckpt "$GTEST" --gtest_filter='HfReferenceTest.*' \
      2>&1 | tee "$WORK/ours_${experts}_${dtype}.log" || failures=$((failures + 1))
    summary+=("$experts/$dtype: $(grep -h 'max |ours - transformers|' "$WORK/ours_${experts}_${dtype}.log" | sed 's/.*max/max/' || true)")
    if [[ $dtype == float32 ]]; then
      echo "== ours in bfloat16 vs transformers in float32 ($experts experts)"
      DEEPINFER_HF_OURS_DTYPE=bfloat16 DEEPINFER_HF_REFERENCE=$ref DEEPINFER_HF_CHECKPOINT=$ckpt "$GTEST" \
        --gtest_filter='HfReferenceTest.*' 2>&1 | tee "$WORK/ours_bf16_vs_fp32_${experts}.log" || failures=$((failures + 1))
      summary+=("$experts/ours-bf16-vs-hf-fp32: $(grep -h 'max |ours - transformers|' "$WORK/ours_bf16_vs_fp32_${experts}.log" | sed 's/.*max/max/' || true)")
    fi
  done
done
echo "== summary ($failures failed comparisons)"
printf '%s\n' "${summary[@]}"
exit $((failures > 0))
