#!/usr/bin/env python3
"""Layer-by-layer comparison of one prompt's intermediate tensors: ours (hf_reference_tests with
DEEPINFER_HF_TAPS_OUT) against transformers' (hf_reference.py --taps-out), in forward order.
For each tensor: the share of elements that are not bit-identical, max |ours - reference| and
max |reference|. The first tensor that differs a lot is where two bfloat16 forwards part ways.

  compare_taps.py OURS.safetensors REFERENCE.safetensors
"""
import sys

STAGES = ["attn_norm_out", "attn.q_residual", "attn.q_proj", "attn.kv_normed", "attn.compressor.entries", "attn.o", "attn.z",
          "attn_out", "attn_streams", "ffn_norm_out", "ffn.routed", "ffn.shared", "ffn_out", "streams"]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    from safetensors.torch import load_file  # noqa: deferred so the usage prints without torch
    ours, ref = load_file(sys.argv[1]), load_file(sys.argv[2])
    layers = sorted({int(k.split(".")[1]) for k in ref if k.startswith("layers.")})
    names = [f"layers.{l}.{s}" for l in layers for s in STAGES] + ["hidden"]
    print(f"{'tensor':38} {'rows':>11} {'not bit-equal':>14} {'max|diff|':>11} {'max|ref|':>9}")
    for name in names:
        if name not in ref or name not in ours:
            if name in ref or name in ours:
                print(f"{name:38} only in {'ours' if name in ours else 'the reference'}")
            continue
        a, b = ours[name], ref[name]
        if a.shape[-1] != b.shape[-1]:
            print(f"{name:38} last dims differ: ours {list(a.shape)}, reference {list(b.shape)}")
            continue
        a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
        rows = min(a.shape[0], b.shape[0])  # compressor entries: ours (official) also has the open window
        note = "" if a.shape[0] == b.shape[0] else f"  (rows: ours {a.shape[0]}, reference {b.shape[0]})"
        if rows == 0:
            print(f"{name:38} no rows{note}")
            continue
        a, b = a[:rows], b[:rows]
        unequal = (a != b).float().mean().item()
        diff = (a.double() - b.double()).abs().max().item()
        print(f"{name:38} {rows:>11} {100 * unequal:>13.3f}% {diff:>11.4g} {b.abs().max().item():>9.4g}{note}")


if __name__ == "__main__":
    main()
