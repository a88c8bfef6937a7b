#!/usr/bin/env python3
"""Reference logits from transformers' DeepseekV4ForCausalLM for a mini-DeepInfer checkpoint.

Builds DeepseekV4Config from the checkpoint's config.json (explicit layer_types, compress
rates, yarn compress rope, no MTP, eager attention, eager experts loop), instantiates DeepseekV4ForCausalLM, loads
the checkpoint's safetensors itself through an explicit official -> HF rename table
(deepseek-v4.md section 3; FP8 linears and FP4 routed experts are dequantized here; routed
experts are merged into gate_up_proj [E, 2I, D] = cat(w1, w3) and down_proj [E, D, I]),
checks every HF parameter and buffer was assigned, then runs several prompts (random ids,
fixed seed, lengths >= 300) one-shot (use_cache=False) and chunked / token-by-token
(use_cache=True), and writes ids, chunk sizes and logits to a safetensors file that
tests/reference/hf_reference_test.cpp compares our forward against.

Needs torch and transformers >= 5.8 with deepseek_v4 (the GPU machine has torch 2.11 and
transformers 5.17). `--check-names` runs without torch: it only checks that the rename table
maps a checkpoint onto the HF key set this script expects (useful where torch is missing).

Usage:
  hf_reference.py --checkpoint DIR --out FILE [--dtype float32|bfloat16] [--device cuda|cpu]
  hf_reference.py --checkpoint DIR --check-names
"""

import argparse
import json
import math
import os
import struct
import sys
import time

from hf_checkpoint import (CheckpointReader, build_hf_config, checkpoint_headers, check_names, expected_hf_shapes,
                           fail, hf_config_kwargs, load_our_config, log, plan_rename, set_experts_implementation)


# ----------------------------------------------------------------------------- torch part


def torch_part(args):
    import torch  # noqa: deferred so --check-names runs without torch
    import transformers
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    log(f"torch {torch.__version__}, transformers {transformers.__version__}, python {sys.version.split()[0]}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda but torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.set_default_dtype(torch.float32)

    # ---- read our checkpoint
    cj = load_our_config(args.checkpoint)
    kw, yarn, rope_dim = hf_config_kwargs(cj)
    headers = checkpoint_headers(args.checkpoint)
    plan, ignored, by_official = plan_rename(headers, kw)
    reader = CheckpointReader(headers, by_official)
    dense = reader.dense

    # ---- config
    cfg = build_hf_config(DeepseekV4Config, kw, yarn, rope_dim)
    try:
        cfg._attn_implementation = "eager"
    except Exception as error:
        log(f"note: could not set _attn_implementation: {error}")
    log(f"layer_types {cfg.layer_types}")
    log(f"mlp_layer_types {cfg.mlp_layer_types}; compress_rates {cfg.compress_rates}")
    log(f"rope_parameters {cfg.rope_parameters}")

    model = DeepseekV4ForCausalLM(cfg).float().eval()
    log(f"attention implementation: {getattr(model.config, '_attn_implementation', '?')}")

    # ---- rope check: HF's compress inv_freq against the official yarn formula (deepseek-v4.md 2.3)
    rotary = getattr(model.model, "rotary_emb", None)
    if rotary is not None and hasattr(rotary, "compress_inv_freq"):
        r, base = rope_dim, kw["compress_rope_theta"]
        f = [base ** (-2.0 * i / r) for i in range(r // 2)]

        def cd(rot):
            return r * math.log(yarn["original_max_position_embeddings"] / (rot * 2 * math.pi)) / (2 * math.log(base))
        low = max(math.floor(cd(yarn["beta_fast"])), 0)
        high = min(math.ceil(cd(yarn["beta_slow"])), r - 1)
        if high == low:
            high += 0.001
        want = []
        for i in range(r // 2):
            ramp = min(max((i - low) / (high - low), 0.0), 1.0)
            want.append(f[i] / yarn["factor"] * ramp + f[i] * (1 - ramp))
        got = rotary.compress_inv_freq.double().cpu()
        rel = ((got - torch.tensor(want, dtype=torch.float64)).abs() / torch.tensor(want, dtype=torch.float64)).max().item()
        scaling = getattr(rotary, "compress_attention_scaling", None)
        log(f"compress inv_freq vs official yarn: max rel diff {rel:.3e}; attention scaling {scaling}")
        if rel > 1e-5 or (scaling is not None and abs(float(scaling) - 1.0) > 1e-12):
            log("WARNING: HF's compress rope differs from deepseek-v4.md 2.3; logits will not match")
    else:
        log("note: model.model.rotary_emb.compress_inv_freq not found; skipping the rope check")

    # ---- load weights
    sd = model.state_dict()
    expected = expected_hf_shapes(kw)
    missing = sorted(set(sd) - set(plan))
    extra = sorted(set(plan) - set(sd))
    if set(sd) != set(expected):
        log("NOTE: this transformers' state_dict differs from the key set the script expects:")
        for k in sorted(set(sd) - set(expected))[:40]:
            log(f"    in model, not expected: {k} {list(sd[k].shape)}")
        for k in sorted(set(expected) - set(sd))[:40]:
            log(f"    expected, not in model: {k} {expected[k]}")
    if missing or extra:
        layer0 = sorted(k for k in sd if k.startswith("model.layers.0.") or not k.startswith("model.layers."))
        fail("rename table does not cover the model:\n  missing: " + ", ".join(missing[:40]) +
             "\n  unexpected: " + ", ".join(extra[:40]) + "\n  model keys (layer 0 + top): " + ", ".join(layer0))
    new_sd, problems = {}, []
    E = kw["n_routed_experts"]
    for key, (kind, arg) in plan.items():
        if kind == "copy":
            value = dense(arg)
        elif kind == "experts_gate_up":
            value = torch.stack([torch.cat([dense(f"layers.{arg}.ffn.experts.{e}.w1.weight"),
                                            dense(f"layers.{arg}.ffn.experts.{e}.w3.weight")], dim=0) for e in range(E)])
        else:
            value = torch.stack([dense(f"layers.{arg}.ffn.experts.{e}.w2.weight") for e in range(E)])
        if list(value.shape) != list(sd[key].shape):
            problems.append(f"{key}: checkpoint {kind} {arg} gives {list(value.shape)}, model has {list(sd[key].shape)}")
            continue
        new_sd[key] = value.to(sd[key].dtype)
    if problems:
        fail("shape mismatches:\n  " + "\n  ".join(problems))
    result = model.load_state_dict(new_sd, strict=True)
    log(f"load_state_dict: {result}")
    after = model.state_dict()
    worst = max(((after[k].double() - new_sd[k].double()).abs().max().item(), k) for k in new_sd)
    if worst[0] != 0.0:
        fail(f"after loading, {worst[1]} differs from the checkpoint by {worst[0]} (tied or shared parameters?)")
    if model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr():
        fail("lm_head is tied to embed_tokens; V4 has an untied head")
    log(f"every HF parameter and buffer assigned ({len(new_sd)} tensors); ignored checkpoint tensors: {len(ignored)}")

    # ---- dtype / device
    fp32_kept = []
    if args.dtype == "bfloat16":
        keep = {key for key, (kind, arg) in plan.items()
                if kind == "copy" and headers[by_official[arg]][1] == "F32" and sd[key].is_floating_point()}
        # Buffers the model computes itself (the rotary inv_freq tables, non-persistent) stay float32,
        # as from_pretrained(torch_dtype=bfloat16) leaves them; a plain .to(bfloat16) would round the
        # RoPE frequencies (relative error up to ~4e-3, ~0.02 rad at distance 127).
        computed = {k: b.detach().clone() for k, b in model.named_buffers() if k not in new_sd and b.is_floating_point()}
        model = model.to(torch.bfloat16)
        params = dict(model.named_parameters())
        buffers = dict(model.named_buffers())
        for key, value in computed.items():
            buffers[key].data = value
        log(f"bfloat16 model; computed buffers kept in their dtype: {sorted(computed)[:6]}{' ...' if len(computed) > 6 else ''} "
            f"({len(computed)})")
        for key in sorted(keep):  # F32 in the checkpoint (hc, sinks, ape, gate bias) stays float32
            holder = params.get(key, buffers.get(key))
            if holder is not None:
                holder.data = new_sd[key].float()
                fp32_kept.append(key)
        log(f"bfloat16 model; {len(fp32_kept)} checkpoint-F32 tensors kept in float32")
    model = model.to(device)
    bf16_mode = "checkpoint-f32-kept" if args.dtype == "bfloat16" else "none"
    if args.dtype == "bfloat16":
        try:  # smoke test: does this transformers accept float32 sinks / hc / biases in a bf16 model?
            with torch.no_grad():
                model(input_ids=torch.zeros(1, 8, dtype=torch.int64, device=device), use_cache=False)
        except Exception as error:
            log(f"WARNING: bf16 forward with float32 parameters failed ({type(error).__name__}: {error}); "
                "falling back to an all-bfloat16 model")
            model = model.to(torch.bfloat16)
            buffers = dict(model.named_buffers())
            for key, value in computed.items():  # the RoPE tables stay float32 here too
                buffers[key].data = value.to(device)
            fp32_kept, bf16_mode = [], "all-bf16"

    # ---- prompts
    gen = torch.Generator().manual_seed(args.seed)
    V = kw["vocab_size"]
    prompts = []
    for i, length in enumerate(args.lengths):
        ids = torch.randint(0, V, (length,), generator=gen, dtype=torch.int64)
        prompts.append((ids, chunk_schedule(i, length)))

    def forward_oneshot(ids):
        with torch.no_grad():
            out = model(input_ids=ids[None].to(device), use_cache=False)
        return out.logits[0].float().cpu()

    def forward_chunked(ids, chunks):
        past, pieces, pos = None, [], 0
        with torch.no_grad():
            for size in chunks:
                piece = ids[pos: pos + size][None].to(device)
                position_ids = torch.arange(pos, pos + size, device=device)[None]
                out = model(input_ids=piece, position_ids=position_ids, past_key_values=past, use_cache=True)
                past = out.past_key_values
                pieces.append(out.logits[0].float().cpu())
                pos += size
        return torch.cat(pieces, dim=0)

    # transformers 5.17 defaults its routed experts to grouped_mm (a CUTLASS grouped GEMM); the
    # reference is the eager loop (one F.linear per expert, the modeling file's own forward).
    if args.experts_implementation != "default":
        set_experts_implementation(model, args.experts_implementation)
    log(f"experts implementation: {getattr(model.config, '_experts_implementation', None)}")
    if args.taps_out:
        if not 0 <= args.taps_prompt < len(prompts):
            fail(f"--taps-prompt {args.taps_prompt}: there are {len(prompts)} prompts")
        ids = prompts[args.taps_prompt][0]
        taps = record_taps(torch, model, ids.to(device))
        write_safetensors(args.taps_out, taps, {"dtype": args.dtype, "prompt": str(args.taps_prompt), "tokens": str(len(ids))})
        log(f"wrote {args.taps_out}: {len(taps)} intermediate tensors of prompt {args.taps_prompt} (one-shot)")

    tensors, internal = {}, []
    for i, (ids, chunks) in enumerate(prompts):
        t0 = time.time()
        one = forward_oneshot(ids)
        t1 = time.time()
        chunked = forward_chunked(ids, chunks)
        t2 = time.time()
        if not torch.isfinite(one).all() or not torch.isfinite(chunked).all():
            fail(f"prompt {i}: non-finite logits")
        diff = (one - chunked).abs().max().item()
        internal.append(diff)
        log(f"prompt {i}: {len(ids)} tokens, {len(chunks)} chunks; one-shot {t1 - t0:.2f}s, chunked {t2 - t1:.2f}s; "
            f"max|logit| {one.abs().max().item():.3f}; HF one-shot vs chunked max|diff| {diff:.3e}")
        tensors[f"prompt.{i}.ids"] = ids
        tensors[f"prompt.{i}.chunks"] = torch.tensor(chunks, dtype=torch.int64)
        tensors[f"prompt.{i}.logits_oneshot"] = one.contiguous()
        tensors[f"prompt.{i}.logits_chunked"] = chunked.contiguous()
    limit = 1e-4 if args.dtype == "float32" else 0.05
    if max(internal) > limit:
        log(f"WARNING: HF's own one-shot and chunked logits differ by {max(internal):.3e} > {limit} "
            "(indexer top-k ties? deepseek-v4.md 7 Q9)")
    metadata = {
        "num_prompts": str(len(prompts)), "dtype": args.dtype, "device": str(device), "seed": str(args.seed),
        "checkpoint": os.path.abspath(args.checkpoint), "torch": torch.__version__,
        "transformers": transformers.__version__, "hf_internal_max_diff": f"{max(internal):.6e}",
        "fp32_params_in_bf16": str(len(fp32_kept)), "bf16_mode": bf16_mode,
    }
    write_safetensors(args.out, tensors, metadata)
    log(f"wrote {args.out}: {len(tensors)} tensors, metadata {metadata}")


def record_taps(torch, model, ids):
    """Prompt `ids`' one-shot intermediate tensors, float32 on the CPU with the batch dim
    dropped, under the names our DeepseekV4Model::Options::observer uses (model/deepseek_v4_model.h)."""
    taps, handles = {}, []

    def put(name, value):
        if value.dim() < 2 or value.shape[0] != 1:
            fail(f"tap {name}: expected a leading batch dim of 1, got shape {list(value.shape)}")
        taps[name] = value.detach()[0].float().cpu().contiguous()

    def output_hook(name, pick=lambda out: out):
        return lambda module, args, out: put(name, pick(out))

    def input_hook(name):
        return lambda module, args: put(name, args[0])

    first = lambda out: out[0] if isinstance(out, (tuple, list)) else out
    for l, layer in enumerate(model.model.layers):
        p = f"layers.{l}."
        attn = layer.self_attn
        handles += [
            layer.input_layernorm.register_forward_hook(output_hook(p + "attn_norm_out")),
            attn.q_a_norm.register_forward_hook(output_hook(p + "attn.q_residual")),
            attn.q_b_proj.register_forward_hook(output_hook(p + "attn.q_proj")),
            attn.kv_norm.register_forward_hook(output_hook(p + "attn.kv_normed")),
            attn.o_a_proj.register_forward_pre_hook(input_hook(p + "attn.o")),
            attn.o_b_proj.register_forward_pre_hook(input_hook(p + "attn.z")),
            attn.register_forward_hook(output_hook(p + "attn_out", first)),
            layer.ffn_hc.register_forward_pre_hook(input_hook(p + "attn_streams")),
            layer.post_attention_layernorm.register_forward_hook(output_hook(p + "ffn_norm_out")),
            layer.mlp.experts.register_forward_hook(output_hook(p + "ffn.routed", lambda out: out[None])),
            layer.mlp.shared_experts.register_forward_hook(output_hook(p + "ffn.shared")),
            layer.mlp.register_forward_hook(output_hook(p + "ffn_out")),
            layer.register_forward_hook(output_hook(p + "streams", lambda out: out[0] if isinstance(out, tuple) else out)),
        ]
        if attn.compressor is not None:  # [B, 1, E, d] -> [E, d] after the batch dim goes
            handles.append(attn.compressor.register_forward_hook(output_hook(p + "attn.compressor.entries", lambda out: first(out)[:, 0])))
    handles.append(model.model.norm.register_forward_hook(output_hook("hidden")))
    try:
        with torch.no_grad():
            model(input_ids=ids[None], use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return taps


def chunk_schedule(index, length):
    """Chunk sizes for the cached run; they straddle the compress windows (4, 128) and the
    128-token sliding window, then finish token by token."""
    patterns = [
        [137, 100],                       # the probe of deepseek-v4.md 8, then decode
        [3, 5, 120, 1, 130, 2, 64],       # odd sizes across 4- and 128-token windows
        [3] * 100,                        # 3-token steps
    ]
    chunks, total = [], 0
    for size in patterns[index % len(patterns)]:
        if total + size > length:
            break
        chunks.append(size)
        total += size
    chunks += [1] * (length - total)      # token-by-token decode for the rest
    return chunks


def tensor_bytes(t):
    import torch
    t = t.detach().cpu().contiguous()
    try:
        return t.numpy().tobytes()
    except Exception:  # no numpy: go through uint8
        return bytes(t.view(torch.uint8).reshape(-1).tolist())


def write_safetensors(path, tensors, metadata):
    import torch
    names = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in names:
            fail(f"cannot write {name} of dtype {t.dtype}")
        data = tensor_bytes(t)
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="folder with config.json + safetensors (init-model output)")
    parser.add_argument("--out", help="output safetensors with ids, chunk sizes and logits")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the random prompt ids")
    parser.add_argument("--lengths", default="300,333,389", help="prompt lengths, comma separated (each >= 1)")
    parser.add_argument("--check-names", action="store_true", help="only check the rename table (no torch needed)")
    parser.add_argument("--experts-implementation", default="eager",
                        help="transformers' routed-experts backend: eager (default, the reference loop), grouped_mm, "
                             "batched_mm, or 'default' for whatever this transformers picks")
    parser.add_argument("--taps-prompt", type=int, default=0, help="which prompt --taps-out records (default 0)")
    parser.add_argument("--taps-out", help="also write one prompt's one-shot intermediate tensors here (compare_taps.py)")
    args = parser.parse_args()
    args.lengths = [int(x) for x in args.lengths.split(",") if x]
    if args.check_names:
        check_names(args.checkpoint)
        return
    if not args.out:
        fail("--out is required unless --check-names")
    torch_part(args)


if __name__ == "__main__":
    main()
