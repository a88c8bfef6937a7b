#!/usr/bin/env python3
"""Throughput peer for `deepinfer bench`: transformers' DeepseekV4ForCausalLM.generate over the
same checkpoint and the same prompts.

Loads a mini-DeepInfer checkpoint (config.json + safetensors with official DeepSeek-V4 names, as
`deepinfer init-model` writes it) into transformers' DeepseekV4ForCausalLM through the config
mapping and rename table of hf_checkpoint.py (the same ones hf_reference.py uses), then runs
greedy `generate` (min_new_tokens = max_new_tokens, so EOS is ignored like our ignore_eos;
use_cache=True) over a JSONL prompts file (one object per line with "id",
"prompt_token_ids", "max_tokens", "ignore_eos", e.g. what `deepinfer bench --prompts-out` writes),
and prints the figures in vLLM's / `deepinfer bench`'s form:

  Throughput: X requests/s, Y total tokens/s, Z output tokens/s

One warm-up generate (the first prompt, 8 new tokens) runs before the timed loop and is
excluded. --batch-size N > 1 left-pads N consecutive prompts into one generate call with an
attention mask, generating the largest max_tokens of the group for every row (static batching);
only each prompt's own max_tokens count as output tokens. If transformers raises on that, the run
falls back to prompt by prompt and says so. Needs torch and transformers >= 5.8 with deepseek_v4 (the GPU machine: torch 2.11,
transformers 5.17).

The config comes from hf_checkpoint.build_hf_config, as in hf_reference.py. Unlike there, weights
are streamed tensor by tensor (experts one by one) into a model built directly in the target dtype
on the target device, instead of a float32 CPU model plus a full float32 state dict, so large
checkpoints fit in host memory. Checkpoint-F32 tensors stay float32 in a bfloat16 model, as there.

Usage:
  hf_generate_peer.py --checkpoint DIR --prompts FILE [--dtype bfloat16|float32] [--device cuda]
                      [--batch-size N] [--max-prompts N] [--json OUT]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_checkpoint import (CheckpointReader, build_hf_config, checkpoint_headers,  # noqa: E402
                           hf_config_kwargs, load_our_config, plan_rename, set_experts_implementation)

WARMUP_TOKENS = 8


def log(*parts):
    print("[hf_generate_peer]", *parts, flush=True)


def fail(message):
    print("[hf_generate_peer] ERROR:", message, file=sys.stderr, flush=True)
    sys.exit(1)


# ----------------------------------------------------------------------------- arguments, prompts (no torch)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="folder with config.json + safetensors (init-model output)")
    parser.add_argument("--prompts", required=True, help="JSONL: id, prompt_token_ids, max_tokens, ignore_eos")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--batch-size", type=int, default=1, help="prompts per generate call (default 1)")
    parser.add_argument("--max-prompts", type=int, default=None, help="use only the first N prompts")
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    parser.add_argument("--experts-implementation", default=None,
                        help="optional: transformers experts backend (eager, grouped_mm, batched_mm); "
                             "default: what transformers picks")
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    if args.max_prompts is not None and args.max_prompts < 1:
        parser.error("--max-prompts must be >= 1")
    if not os.path.isfile(os.path.join(args.checkpoint, "config.json")):
        parser.error(f"--checkpoint {args.checkpoint}: no config.json there")
    if not os.path.isfile(args.prompts):
        parser.error(f"--prompts {args.prompts}: no such file")
    return args


def load_prompts(path, max_prompts=None, vocab_size=None):
    """[(id, [token ids], max_tokens)] from the JSONL file; blank lines skipped, anything else
    malformed is an error (naming FILE:LINE)."""
    prompts, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as error:
                fail(f"{where}: invalid JSON: {error}")
            if not isinstance(obj, dict):
                fail(f"{where}: must be a JSON object")
            ids = obj.get("prompt_token_ids")
            if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and not isinstance(t, bool)
                                                                for t in ids):
                fail(f"{where}: prompt_token_ids must be a non-empty list of ints")
            if vocab_size is not None and not all(0 <= t < vocab_size for t in ids):
                bad = next(t for t in ids if not 0 <= t < vocab_size)
                fail(f"{where}: token id {bad} outside [0, {vocab_size})")
            max_tokens = obj.get("max_tokens", 16)
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                fail(f"{where}: max_tokens must be an int >= 1, got {max_tokens!r}")
            if obj.get("ignore_eos") is not True:
                log(f"note: {where} does not say ignore_eos: true; EOS is ignored here anyway")
            rid = str(obj.get("id", where))
            if rid in seen:
                fail(f"{where}: duplicate id {rid!r}")
            seen.add(rid)
            prompts.append((rid, ids, max_tokens))
            if max_prompts is not None and len(prompts) >= max_prompts:
                break
    if not prompts:
        fail(f"{path}: no prompts")
    return prompts


def make_batches(prompts, batch_size):
    """Consecutive groups of at most batch_size prompts in file order. A group generates
    max(max_tokens) tokens per row (generate has one length per call); only the tokens each
    prompt asked for count as output, the rest is the cost of static batching."""
    return [prompts[i: i + batch_size] for i in range(0, len(prompts), batch_size)]


# ----------------------------------------------------------------------------- model (torch)


def build_model(args, torch, DeepseekV4Config, DeepseekV4ForCausalLM, device):
    """DeepseekV4ForCausalLM in the target dtype on the target device, weights from the checkpoint
    through hf_checkpoint's rename plan (FP8 / FP4 dequantized by CheckpointReader.dense)."""
    cj = load_our_config(args.checkpoint)
    kw, yarn, rope_dim = hf_config_kwargs(cj)
    headers = checkpoint_headers(args.checkpoint)
    plan, ignored, by_official = plan_rename(headers, kw)
    reader = CheckpointReader(headers, by_official)
    cfg = build_hf_config(DeepseekV4Config, kw, yarn, rope_dim)
    try:
        cfg._attn_implementation = "eager"  # V4 ships eager-only attention
    except Exception as error:
        log(f"note: could not set _attn_implementation: {error}")

    dtype = torch.bfloat16 if args.dtype == "bfloat16" else torch.float32
    t0 = time.time()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = DeepseekV4ForCausalLM(cfg)
    finally:
        torch.set_default_dtype(previous)
    model.eval()
    log(f"model built on {device} in {time.time() - t0:.1f}s; attention implementation "
        f"{getattr(model.config, '_attn_implementation', '?')}")

    sd_keys = set(model.state_dict().keys())
    missing, extra = sorted(sd_keys - set(plan)), sorted(set(plan) - sd_keys)
    if missing or extra:
        fail("rename table does not cover the model:\n  missing: " + ", ".join(missing[:40]) +
             "\n  unexpected: " + ", ".join(extra[:40]))
    holders = dict(model.named_buffers())
    holders.update(dict(model.named_parameters()))
    if model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr():
        fail("lm_head is tied to embed_tokens; V4 has an untied head")

    t0 = time.time()
    dense = reader.dense
    problems, fp32_kept = [], []
    I = kw["moe_intermediate_size"]
    with torch.no_grad():
        for key, (kind, arg) in plan.items():
            holder = holders.get(key)
            if holder is None:
                problems.append(f"{key}: neither a parameter nor a buffer of the model")
                continue
            if kind == "copy":
                value = dense(arg)
                if list(value.shape) != list(holder.shape):
                    problems.append(f"{key}: checkpoint {arg} is {list(value.shape)}, model has {list(holder.shape)}")
                    continue
                if (dtype == torch.bfloat16 and headers[by_official[arg]][1] == "F32"
                        and holder.is_floating_point()):
                    holder.data = value.to(device=device, dtype=torch.float32)  # hc, sinks, ape, gate bias
                    fp32_kept.append(key)
                else:
                    holder.data.copy_(value)
                continue
            E = holder.shape[0]
            for e in range(E):
                if kind == "experts_gate_up":
                    pieces = ((holder.data[e, :I], f"layers.{arg}.ffn.experts.{e}.w1.weight"),
                              (holder.data[e, I:], f"layers.{arg}.ffn.experts.{e}.w3.weight"))
                else:
                    pieces = ((holder.data[e], f"layers.{arg}.ffn.experts.{e}.w2.weight"),)
                for target, name in pieces:
                    value = dense(name)
                    if list(value.shape) != list(target.shape):
                        problems.append(f"{key}[{e}]: {name} is {list(value.shape)}, model has {list(target.shape)}")
                        break
                    target.copy_(value)
    if problems:
        fail("shape mismatches:\n  " + "\n  ".join(problems[:40]))
    del reader, dense
    log(f"loaded {len(plan)} HF tensors in {time.time() - t0:.1f}s; ignored checkpoint tensors: {len(ignored)}; "
        f"{len(fp32_kept)} checkpoint-F32 tensors kept in float32")

    if fp32_kept:
        try:  # does this transformers accept float32 sinks / hc / biases in a bf16 model? (as hf_reference.py)
            with torch.no_grad():
                model(input_ids=torch.zeros(1, 8, dtype=torch.int64, device=device), use_cache=False)
        except Exception as error:
            log(f"WARNING: bf16 forward with float32 parameters failed ({type(error).__name__}: {error}); "
                "casting them to bfloat16")
            for key in fp32_kept:
                holders[key].data = holders[key].data.to(torch.bfloat16)
            fp32_kept = []

    if args.experts_implementation:
        set_experts_implementation(model, args.experts_implementation)
    experts_impl = getattr(model.config, "_experts_implementation", None)
    log(f"experts implementation: {experts_impl}")
    return model, kw, len(fp32_kept), experts_impl


# ----------------------------------------------------------------------------- generate + timing


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError as error:
        fail(f"torch is not importable ({error}); this script needs torch + transformers >= 5.8 with deepseek_v4")
    try:
        import transformers
    except ImportError as error:
        fail(f"transformers is not importable ({error}); needs transformers >= 5.8 with deepseek_v4")
    try:
        from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    except ImportError as error:
        fail(f"transformers {transformers.__version__} lacks DeepseekV4ForCausalLM ({error}); "
             "needs transformers >= 5.8 with deepseek_v4")

    device = torch.device(args.device)
    is_cuda = device.type == "cuda"
    if is_cuda and not torch.cuda.is_available():
        fail(f"--device {args.device} but torch.cuda.is_available() is False")
    if is_cuda and device.index is not None:
        torch.cuda.set_device(device)
    gpu = torch.cuda.get_device_name(device) if is_cuda else "cpu"
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, python {sys.version.split()[0]}")
    log(f"device {device} ({gpu}), dtype {args.dtype}")

    def sync():
        if is_cuda:
            torch.cuda.synchronize(device)

    prompts = load_prompts(args.prompts, args.max_prompts, int(load_our_config(args.checkpoint)["vocab_size"]))
    model, kw, fp32_params, experts_impl = build_model(args, torch, DeepseekV4Config, DeepseekV4ForCausalLM, device)
    eos_id = kw["eos_token_id"]
    pad_id = eos_id  # left padding, masked out by attention_mask
    input_tokens = sum(len(p[1]) for p in prompts)
    requested_tokens = sum(p[2] for p in prompts)
    log(f"{len(prompts)} prompts from {args.prompts}: {input_tokens} input tokens, {requested_tokens} output tokens "
        f"requested (prompt lengths {min(len(p[1]) for p in prompts)}..{max(len(p[1]) for p in prompts)}, "
        f"max_tokens {min(p[2] for p in prompts)}..{max(p[2] for p in prompts)})")

    def generate(batch, new_tokens):
        """One generate call over `batch` (left-padded); returns the number of generated tokens."""
        width = max(len(p[1]) for p in batch)
        ids = [[pad_id] * (width - len(p[1])) + list(p[1]) for p in batch]
        mask = [[0] * (width - len(p[1])) + [1] * len(p[1]) for p in batch]
        input_ids = torch.tensor(ids, dtype=torch.long, device=device)
        attention_mask = torch.tensor(mask, dtype=torch.long, device=device)
        out = model.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens, use_cache=True,
                             pad_token_id=pad_id, eos_token_id=eos_id)
        sequences = out.sequences if hasattr(out, "sequences") else out
        made = sequences.shape[1] - width
        if made != new_tokens:
            log(f"WARNING: generate made {made} tokens per row, asked for {new_tokens}")
        return made * len(batch)

    # ---- warm-up (excluded)
    t0 = time.time()
    generate([prompts[0]], WARMUP_TOKENS)
    sync()
    log(f"warm-up: first prompt, {WARMUP_TOKENS} new tokens, {time.time() - t0:.2f}s (excluded)")

    batch_size, fallback = args.batch_size, None
    if batch_size > 1:  # probe padding + attention mask before timing (excluded)
        first = prompts[0]
        other = prompts[1] if len(prompts) > 1 and len(prompts[1][1]) != len(first[1]) else None
        if other is None:  # make sure the probe really pads
            other = (first[0] + "-probe", first[1][1:] if len(first[1]) > 1 else first[1] + first[1], first[2])
        try:
            generate([first, other], 2)
            sync()
            log(f"batched probe (left padding {len(first[1])} vs {len(other[1])} tokens, attention_mask) OK")
        except Exception as error:
            fallback = f"batched probe raised {type(error).__name__}: {error}"
            log(f"FALLBACK: {fallback}; running prompt by prompt (batch size 1)")
            batch_size = 1
            if is_cuda:
                torch.cuda.empty_cache()

    def timed(size):
        batches = make_batches(prompts, size)
        log(f"timed run: {len(prompts)} prompts in {len(batches)} generate calls "
            f"({'batched ' + str(size) if size > 1 else 'prompt by prompt'})")
        produced = 0
        sync()
        start = time.perf_counter()
        for i, batch in enumerate(batches):
            made = generate(batch, max(p[2] for p in batch)) // len(batch)
            produced += sum(min(made, p[2]) for p in batch)
            if len(batches) >= 10 and (i + 1) % max(1, len(batches) // 10) == 0:
                log(f"  {i + 1}/{len(batches)} calls, {time.perf_counter() - start:.1f}s")
        sync()
        return time.perf_counter() - start, produced, len(batches)

    try:
        elapsed, output_tokens, calls = timed(batch_size)
    except Exception as error:
        if batch_size == 1:
            raise
        fallback = f"batched run raised {type(error).__name__}: {error}"
        log(f"FALLBACK: {fallback}; rerunning the timed loop prompt by prompt (batch size 1)")
        batch_size = 1
        if is_cuda:
            torch.cuda.empty_cache()
        elapsed, output_tokens, calls = timed(batch_size)

    mode = f"batched {batch_size}" if batch_size > 1 else "prompt by prompt"
    if fallback:
        mode += f" (fallback from --batch-size {args.batch_size})"
    s = max(elapsed, 1e-9)
    n = len(prompts)
    total_tps = (input_tokens + output_tokens) / s
    print(f"torch {torch.__version__} | transformers {transformers.__version__} | hardware: {gpu} | "
          f"dtype: {args.dtype} | experts: {experts_impl}", flush=True)
    print(f"mode: {mode}; {calls} generate calls", flush=True)
    print(f"prompts: {n}, input tokens: {input_tokens}, generated tokens: {output_tokens}, "
          f"elapsed: {elapsed:.2f} s", flush=True)
    print(f"Throughput: {n / s:.2f} requests/s, {total_tps:.2f} total tokens/s, {output_tokens / s:.2f} output tokens/s",
          flush=True)
    print(f"Mean time per request: {1000.0 * elapsed / n:.1f} ms"
          + (f" (mean time per generate call {1000.0 * elapsed / calls:.1f} ms)" if batch_size > 1 else ""),
          flush=True)
    if output_tokens != requested_tokens:
        log(f"WARNING: generated {output_tokens} tokens, the prompts asked for {requested_tokens}")

    if args.json:
        result = {
            "engine": "transformers", "torch": torch.__version__, "transformers": transformers.__version__,
            "hardware": gpu, "device": str(device), "dtype": args.dtype, "fp32_params_in_bf16": fp32_params,
            "experts_implementation": experts_impl, "checkpoint": os.path.abspath(args.checkpoint),
            "prompts_file": os.path.abspath(args.prompts), "mode": mode, "batch_size": batch_size,
            "requested_batch_size": args.batch_size, "fallback": fallback, "generate_calls": calls,
            "num_prompts": n, "input_tokens": input_tokens, "output_tokens": output_tokens,
            "warmup": {"prompts": 1, "new_tokens": WARMUP_TOKENS}, "elapsed_s": elapsed,
            "requests_per_s": n / s, "total_tokens_per_s": total_tps, "output_tokens_per_s": output_tokens / s,
            "mean_time_per_request_ms": 1000.0 * elapsed / n,
        }
        tmp = args.json + ".partial"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.json)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
