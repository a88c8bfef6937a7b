"""mini-DeepInfer DeepSeek-V4 checkpoints seen from transformers: the config mapping, a
torch-free safetensors header reader, the official -> HF rename table (deepseek-v4.md section 3,
transformers 5.17 module names) and FP8 / FP4 dequantization. Used by hf_reference.py."""

import json
import os
import re
import struct
import sys

SLIDING, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"

# Official in-layer name -> HF module path (transformers 5.17 DeepseekV4DecoderLayer).
# Longest prefixes first: "attn.indexer.compressor.wkv" must win over "attn.compressor.wkv".
LAYER_RENAMES = (
    ("attn.indexer.compressor.wkv", "self_attn.compressor.indexer.kv_proj"),
    ("attn.indexer.compressor.wgate", "self_attn.compressor.indexer.gate_proj"),
    ("attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"),
    ("attn.indexer.compressor.norm", "self_attn.compressor.indexer.kv_norm"),
    ("attn.indexer.wq_b", "self_attn.compressor.indexer.q_b_proj"),
    ("attn.indexer.weights_proj", "self_attn.compressor.indexer.scorer.weights_proj"),
    ("attn.compressor.wkv", "self_attn.compressor.kv_proj"),
    ("attn.compressor.wgate", "self_attn.compressor.gate_proj"),
    ("attn.compressor.ape", "self_attn.compressor.position_bias"),
    ("attn.compressor.norm", "self_attn.compressor.kv_norm"),
    ("attn.attn_sink", "self_attn.sinks"),
    ("attn.wq_a", "self_attn.q_a_proj"),
    ("attn.q_norm", "self_attn.q_a_norm"),
    ("attn.wq_b", "self_attn.q_b_proj"),
    ("attn.wkv", "self_attn.kv_proj"),
    ("attn.kv_norm", "self_attn.kv_norm"),
    ("attn.wo_a", "self_attn.o_a_proj"),
    ("attn.wo_b", "self_attn.o_b_proj"),
    ("attn_norm", "input_layernorm"),
    ("ffn_norm", "post_attention_layernorm"),
    ("hc_attn_fn", "attn_hc.fn"),
    ("hc_attn_base", "attn_hc.base"),
    ("hc_attn_scale", "attn_hc.scale"),
    ("hc_ffn_fn", "ffn_hc.fn"),
    ("hc_ffn_base", "ffn_hc.base"),
    ("hc_ffn_scale", "ffn_hc.scale"),
    ("ffn.gate.bias", "mlp.gate.e_score_correction_bias"),
    ("ffn.gate.tid2eid", "mlp.gate.tid2eid"),
    ("ffn.gate.weight", "mlp.gate.weight"),
    ("ffn.shared_experts.w1", "mlp.shared_experts.gate_proj"),
    ("ffn.shared_experts.w3", "mlp.shared_experts.up_proj"),
    ("ffn.shared_experts.w2", "mlp.shared_experts.down_proj"),
)
TOP_RENAMES = {
    "embed.weight": "model.embed_tokens.weight",
    "head.weight": "lm_head.weight",
    "norm.weight": "model.norm.weight",
    "hc_head_fn": "model.hc_head.hc_fn",
    "hc_head_base": "model.hc_head.hc_base",
    "hc_head_scale": "model.hc_head.hc_scale",
}
EXPERT_RE = re.compile(r"^layers\.(\d+)\.ffn\.experts\.(\d+)\.(w[123])\.weight$")
LAYER_RE = re.compile(r"^layers\.(\d+)\.(.+)$")


def log(*parts):
    print("[hf_reference]", *parts, flush=True)


def set_experts_implementation(model, name):
    """Switches transformers' routed-experts backend (eager, grouped_mm, batched_mm) and returns
    the one in use; fails naming the backend when this transformers refuses it."""
    try:
        if hasattr(model, "set_experts_implementation"):
            model.set_experts_implementation(name)
        else:
            model.config._experts_implementation = name
    except Exception as error:
        fail(f"--experts-implementation {name}: {type(error).__name__}: {error}")
    return getattr(model.config, "_experts_implementation", None)


def fail(message):
    print("[hf_reference] ERROR:", message, file=sys.stderr, flush=True)
    sys.exit(1)


# ----------------------------------------------------------------------------- config


def load_our_config(checkpoint):
    path = os.path.join(checkpoint, "config.json")
    with open(path) as f:
        return json.load(f)


def layer_schedule(cj):
    """(layer_types, compress_rates, mlp_layer_types, rope_dim, yarn dict) from either spelling."""
    n = int(cj["num_hidden_layers"])
    if "layer_types" in cj:
        layer_types = list(cj["layer_types"])[:n]
        rates = dict(cj.get("compress_rates") or {CSA: 4, HCA: 128})
    else:
        ratios = [int(r) for r in cj["compress_ratios"]][:n]
        layer_types = [SLIDING if r == 0 else CSA if r == 4 else HCA for r in ratios]
        hca_rates = sorted({r for r, t in zip(ratios, layer_types) if t == HCA})
        if len(hca_rates) > 1:
            fail(f"compress_ratios {ratios}: HF has one HCA rate, found {hca_rates}")
        rates = {CSA: 4, HCA: hca_rates[0] if hca_rates else 128}
    if len(layer_types) != n:
        fail(f"{len(layer_types)} layer types for {n} layers")
    if "mlp_layer_types" in cj:
        mlp_types = list(cj["mlp_layer_types"])[:n]
    else:
        k = int(cj.get("num_hash_layers", 0))
        mlp_types = ["hash_moe"] * min(k, n) + ["moe"] * max(0, n - k)
    head_dim = int(cj["head_dim"])
    if "qk_rope_head_dim" in cj:
        rope_dim = int(cj["qk_rope_head_dim"])
    else:
        rope_dim = int(round(float(cj["partial_rotary_factor"]) * head_dim))
    scaling = cj.get("rope_scaling")
    if scaling is None and isinstance(cj.get("rope_parameters"), dict):
        scaling = cj["rope_parameters"].get("compress")
    scaling = dict(scaling or {})
    kind = scaling.get("rope_type", scaling.get("type", "yarn"))
    if kind != "yarn":
        fail(f"compress rope must be yarn, config says {kind}")
    yarn = {
        "factor": float(scaling.get("factor", 16.0)),
        "beta_fast": float(scaling.get("beta_fast", 32.0)),
        "beta_slow": float(scaling.get("beta_slow", 1.0)),
        "original_max_position_embeddings": int(scaling.get("original_max_position_embeddings", 65536)),
    }
    return layer_types, rates, mlp_types, rope_dim, yarn


def hf_config_kwargs(cj):
    layer_types, rates, mlp_types, rope_dim, yarn = layer_schedule(cj)
    head_dim = int(cj["head_dim"])
    if int(cj.get("n_shared_experts", 1)) != 1:
        fail("HF's shared expert has width moe_intermediate_size: n_shared_experts must be 1")
    max_pos = int(cj.get("max_position_embeddings", 1048576))
    expected_max = int(yarn["factor"] * yarn["original_max_position_embeddings"])
    if max_pos != expected_max:
        log(f"WARNING: max_position_embeddings {max_pos} != factor*original {expected_max} (deepseek-v4.md 7 Q5);"
            " the inv_freq check below tells whether HF's yarn still matches")
    kwargs = dict(
        vocab_size=int(cj["vocab_size"]),
        hidden_size=int(cj["hidden_size"]),
        num_hidden_layers=int(cj["num_hidden_layers"]),
        num_attention_heads=int(cj["num_attention_heads"]),
        num_key_value_heads=int(cj.get("num_key_value_heads", 1)),
        head_dim=head_dim,
        q_lora_rank=int(cj["q_lora_rank"]),
        o_groups=int(cj["o_groups"]),
        o_lora_rank=int(cj["o_lora_rank"]),
        moe_intermediate_size=int(cj["moe_intermediate_size"]),
        n_routed_experts=int(cj["n_routed_experts"]),
        num_experts_per_tok=int(cj["num_experts_per_tok"]),
        n_shared_experts=1,
        scoring_func=str(cj.get("scoring_func", "sqrtsoftplus")),
        norm_topk_prob=bool(cj.get("norm_topk_prob", True)),
        routed_scaling_factor=float(cj.get("routed_scaling_factor", 1.0)),
        swiglu_limit=float(cj.get("swiglu_limit", 10.0)),
        sliding_window=int(cj.get("sliding_window", 128)),
        index_n_heads=int(cj.get("index_n_heads", 64)),
        index_head_dim=int(cj.get("index_head_dim", 128)),
        index_topk=int(cj.get("index_topk", 512)),
        rope_theta=float(cj.get("rope_theta", 10000.0)),
        compress_rope_theta=float(cj.get("compress_rope_theta", 160000.0)),
        hc_mult=int(cj.get("hc_mult", 4)),
        hc_sinkhorn_iters=int(cj.get("hc_sinkhorn_iters", 20)),
        hc_eps=float(cj.get("hc_eps", 1e-6)),
        rms_norm_eps=float(cj.get("rms_norm_eps", 1e-6)),
        max_position_embeddings=max_pos,
        layer_types=layer_types,
        compress_rates={CSA: int(rates.get(CSA, 4)), HCA: int(rates.get(HCA, 128))},
        mlp_layer_types=mlp_types,
        partial_rotary_factor=float(rope_dim) / float(head_dim),
        num_nextn_predict_layers=0,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        use_cache=True,
    )
    return kwargs, yarn, rope_dim


# ----------------------------------------------------------------------------- safetensors


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", {})
    return header, 8 + n, meta


def checkpoint_files(checkpoint):
    index = os.path.join(checkpoint, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = sorted(x for x in os.listdir(checkpoint) if x.endswith(".safetensors"))
    if not files:
        fail(f"no .safetensors in {checkpoint}")
    return [os.path.join(checkpoint, x) for x in files]


def checkpoint_headers(checkpoint):
    """name -> (file, dtype, shape, begin, end) with begin/end absolute file offsets."""
    out = {}
    for path in checkpoint_files(checkpoint):
        header, data_start, _ = read_header(path)
        for name, info in header.items():
            if name in out:
                fail(f"tensor {name} in both {out[name][0]} and {path}")
            b, e = info["data_offsets"]
            out[name] = (path, info["dtype"], list(info["shape"]), data_start + b, data_start + e)
    return out


def official_name(name):
    """Accepts the official spelling and the one transformers' save_pretrained writes."""
    special = {
        "model.embed_tokens.weight": "embed.weight",
        "lm_head.weight": "head.weight",
        "model.hc_head.hc_fn": "hc_head_fn",
        "model.hc_head.hc_base": "hc_head_base",
        "model.hc_head.hc_scale": "hc_head_scale",
    }
    if name in special:
        return special[name]
    if name.startswith("model."):
        name = name[len("model."):]
    m = re.match(r"^(layers\.\d+)\.attn\.norm\.weight$", name)
    if m:
        return m.group(1) + ".attn.kv_norm.weight"
    return name


def hf_name(official):
    """Official name -> HF state_dict key; None for routed experts (merged) and scales."""
    if official in TOP_RENAMES:
        return TOP_RENAMES[official]
    if EXPERT_RE.match(official) or official.endswith(".scale"):
        return None
    m = LAYER_RE.match(official)
    if not m:
        return None
    layer, rest = m.groups()
    for native, hf in LAYER_RENAMES:
        if rest == native or rest.startswith(native + "."):
            return f"model.layers.{layer}.{hf}{rest[len(native):]}"
    return None


def expected_hf_shapes(kw):
    """The HF key set this script expects, from the config (the module tree of transformers 5.17)."""
    V, D, H, d = kw["vocab_size"], kw["hidden_size"], kw["num_attention_heads"], kw["head_dim"]
    n, E, I, k = kw["hc_mult"], kw["n_routed_experts"], kw["moe_intermediate_size"], kw["num_experts_per_tok"]
    g, ol, ql = kw["o_groups"], kw["o_lora_rank"], kw["q_lora_rank"]
    Ih, Id = kw["index_n_heads"], kw["index_head_dim"]
    mix = (2 + n) * n
    s = {
        "model.embed_tokens.weight": [V, D], "lm_head.weight": [V, D], "model.norm.weight": [D],
        "model.hc_head.hc_fn": [n, n * D], "model.hc_head.hc_base": [n], "model.hc_head.hc_scale": [1],
    }
    for L, (lt, mt) in enumerate(zip(kw["layer_types"], kw["mlp_layer_types"])):
        p = f"model.layers.{L}."
        s.update({p + "input_layernorm.weight": [D], p + "post_attention_layernorm.weight": [D]})
        for site in ("attn_hc", "ffn_hc"):
            s.update({p + site + ".fn": [mix, n * D], p + site + ".base": [mix], p + site + ".scale": [3]})
        a = p + "self_attn."
        s.update({
            a + "q_a_proj.weight": [ql, D], a + "q_a_norm.weight": [ql], a + "q_b_proj.weight": [H * d, ql],
            a + "kv_proj.weight": [d, D], a + "kv_norm.weight": [d], a + "o_a_proj.weight": [g * ol, H * d // g],
            a + "o_b_proj.weight": [D, g * ol], a + "sinks": [H],
        })
        if lt != SLIDING:
            c, m = (2, kw["compress_rates"][CSA]) if lt == CSA else (1, kw["compress_rates"][HCA])
            cp = a + "compressor."
            s.update({cp + "kv_proj.weight": [c * d, D], cp + "gate_proj.weight": [c * d, D],
                      cp + "position_bias": [m, c * d], cp + "kv_norm.weight": [d]})
            if lt == CSA:
                ip = cp + "indexer."
                s.update({ip + "kv_proj.weight": [2 * Id, D], ip + "gate_proj.weight": [2 * Id, D],
                          ip + "position_bias": [m, 2 * Id], ip + "kv_norm.weight": [Id],
                          ip + "q_b_proj.weight": [Ih * Id, ql], ip + "scorer.weights_proj.weight": [Ih, D]})
        mp = p + "mlp."
        s[mp + "gate.weight"] = [E, D]
        if mt == "hash_moe":
            s[mp + "gate.tid2eid"] = [V, k]
        else:
            s[mp + "gate.e_score_correction_bias"] = [E]
        s.update({mp + "experts.gate_up_proj": [E, 2 * I, D], mp + "experts.down_proj": [E, D, I],
                  mp + "shared_experts.gate_proj.weight": [I, D], mp + "shared_experts.up_proj.weight": [I, D],
                  mp + "shared_experts.down_proj.weight": [D, I]})
    return s


def plan_rename(headers, kw):
    """Maps checkpoint tensors onto HF keys. Returns (plan, ignored) where plan maps an HF key to
    ("copy", official) or ("experts_gate_up"/"experts_down", layer); fails on anything unmapped."""
    by_official = {}
    for name in headers:
        off = official_name(name)
        if off in by_official:
            fail(f"tensor {off} stored twice: {by_official[off]} and {name}")
        by_official[off] = name
    plan, ignored, problems = {}, [], []
    experts = {}
    for off in sorted(by_official):
        if off.startswith("mtp."):
            ignored.append(off)
            continue
        m = EXPERT_RE.match(off)
        if m:
            experts.setdefault(int(m.group(1)), set()).add((int(m.group(2)), m.group(3)))
            continue
        if off.endswith(".scale"):
            if off[: -len(".scale")] + ".weight" not in by_official:
                problems.append(f"scale {off} has no weight")
            continue
        key = hf_name(off)
        if key is None:
            problems.append(f"no HF name for checkpoint tensor {off}")
            continue
        plan[key] = ("copy", off)
    E = kw["n_routed_experts"]
    for L in range(kw["num_hidden_layers"]):
        have = experts.get(L, set())
        missing = [(e, w) for e in range(E) for w in ("w1", "w2", "w3") if (e, w) not in have]
        if missing:
            problems.append(f"layer {L}: missing routed experts {missing[:6]}{'...' if len(missing) > 6 else ''}")
        plan[f"model.layers.{L}.mlp.experts.gate_up_proj"] = ("experts_gate_up", L)
        plan[f"model.layers.{L}.mlp.experts.down_proj"] = ("experts_down", L)
    if problems:
        fail("rename table problems:\n  " + "\n  ".join(problems))
    return plan, ignored, by_official


def logical_shape(headers, by_official, off):
    _, dtype, shape, _, _ = headers[by_official[off]]
    if dtype in ("I8", "U8") and off.endswith(".weight") and off[: -len(".weight")] + ".scale" in by_official:
        return [shape[0], shape[1] * 2]  # packed FP4: two codes per byte
    return shape


def check_names(checkpoint):
    """Torch-free: the rename plan covers exactly the expected HF keys with the right shapes."""
    cj = load_our_config(checkpoint)
    kw, _, _ = hf_config_kwargs(cj)
    headers = checkpoint_headers(checkpoint)
    plan, ignored, by_official = plan_rename(headers, kw)
    expected = expected_hf_shapes(kw)
    problems = [f"expected HF key not produced: {k}" for k in sorted(set(expected) - set(plan))]
    problems += [f"produced key not expected: {k}" for k in sorted(set(plan) - set(expected))]
    E, D, I = kw["n_routed_experts"], kw["hidden_size"], kw["moe_intermediate_size"]
    for key, (kind, arg) in sorted(plan.items()):
        if key not in expected:
            continue
        if kind == "copy":
            shape = logical_shape(headers, by_official, arg)
        elif kind == "experts_gate_up":
            shape = [E, 2 * I, D]
        else:
            shape = [E, D, I]
        if shape != expected[key]:
            problems.append(f"{key}: checkpoint gives {shape}, HF expects {expected[key]}")
    log(f"{len(headers)} checkpoint tensors -> {len(plan)} HF keys ({len(expected)} expected), {len(ignored)} ignored")
    if problems:
        fail("\n  ".join(["name check failed:"] + problems))
    log("name check OK")


# ----------------------------------------------------------------------------- dequantization (torch)

_TABLES = {}


def tables():
    """FP8 e4m3 [256], e8m0 [256] and FP4 e2m1 [16] decoded values (deepseek-v4.md section 3)."""
    import torch
    if not _TABLES:
        e4m3 = []
        for b in range(256):
            e, m = (b >> 3) & 0xF, b & 7
            if e == 15 and m == 7:
                v = float("nan")  # 0x7F / 0xFF; e4m3 has no infinities
            elif e == 0:
                v = m * 2.0 ** -9  # subnormal m/8 * 2^-6
            else:
                v = (8 + m) * 2.0 ** (e - 10)  # (1 + m/8) * 2^(e-7)
            e4m3.append(-v if b & 0x80 else v)
        _TABLES["e4m3"] = torch.tensor(e4m3, dtype=torch.float64).float()
        _TABLES["e8m0"] = torch.tensor([2.0 ** (b - 127) for b in range(255)] + [float("nan")], dtype=torch.float64).float()
        _TABLES["e2m1"] = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float32)
    return _TABLES


def dequant_fp8(codes, scale, block=128):
    """codes [out, in] uint8 e4m3, scale [ceil(out/B), ceil(in/B)] uint8 e8m0 -> float32."""
    t = tables()
    out, inn = codes.shape
    s = t["e8m0"][scale.long()]
    s = s.repeat_interleave(block, 0)[:out].repeat_interleave(block, 1)[:, :inn]
    return t["e4m3"][codes.long()] * s


def dequant_fp4(packed, scale, block=32):
    """packed [out, in/2] uint8 (low nibble = even column), scale [out, ceil(in/32)] e8m0 -> float32."""
    import torch
    t = tables()
    out, half = packed.shape
    p = packed.long()
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(out, 2 * half)
    s = t["e8m0"][scale.long()].repeat_interleave(block, 1)[:, : 2 * half]
    return t["e2m1"][codes] * s


class CheckpointReader:
    """Tensors of a checkpoint by official name, as stored (raw) or as logical values (dense)."""

    def __init__(self, headers, by_official):
        import torch
        self.headers, self.by_official, self.blobs = headers, by_official, {}
        self.dtypes = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64,
                       "I32": torch.int32, "I8": torch.uint8, "U8": torch.uint8, "F8_E4M3": torch.uint8,
                       "F8_E8M0": torch.uint8}

    def raw(self, off):
        import torch
        name = self.by_official[off]
        path, dtype, shape, b, e = self.headers[name]
        if dtype not in self.dtypes:
            fail(f"tensor {name}: unsupported dtype {dtype}")
        if path not in self.blobs:
            with open(path, "rb") as f:
                self.blobs[path] = f.read()
        if e == b:
            return torch.empty(shape, dtype=self.dtypes[dtype]), dtype
        # A fresh (aligned) copy of the tensor's bytes; safetensors offsets need not be aligned.
        return torch.frombuffer(bytearray(self.blobs[path][b:e]), dtype=self.dtypes[dtype]).reshape(shape), dtype

    def dense(self, off):
        """Logical float32 (or int64) value of an official tensor, dequantizing FP8 / FP4."""
        t, dtype = self.raw(off)
        scale_off = off[: -len(".weight")] + ".scale" if off.endswith(".weight") else None
        if dtype == "F8_E4M3":
            if scale_off not in self.by_official:
                fail(f"FP8 tensor {off} has no {scale_off}")
            return dequant_fp8(t, self.raw(scale_off)[0])
        if dtype in ("I8", "U8") and scale_off in self.by_official:
            return dequant_fp4(t, self.raw(scale_off)[0])
        if dtype in ("I64", "I32"):
            return t.long()
        return t.float()


def build_hf_config(DeepseekV4Config, kw, yarn, rope_dim):
    """DeepseekV4Config for our config.json (kw, yarn, rope_dim from hf_config_kwargs): tries the
    rope spellings transformers versions accept and keeps the first whose fields match."""
    def build_config(variant):
        k = dict(kw)
        if variant == "rope_scaling":
            k["rope_scaling"] = {"type": "yarn", **yarn}
        elif variant == "rope_parameters":
            k["rope_parameters"] = {"rope_type": "yarn", **yarn}
        else:
            common = {"partial_rotary_factor": kw["partial_rotary_factor"]}
            k["rope_parameters"] = {
                "main": {"rope_type": "default", "rope_theta": kw["rope_theta"], **common},
                "compress": {"rope_type": "yarn", "rope_theta": kw["compress_rope_theta"], "attention_factor": 1.0,
                             **yarn, **common},
            }
        return DeepseekV4Config(**k)

    def config_problems(cfg):
        p = []
        for key in ("layer_types", "mlp_layer_types"):
            if list(getattr(cfg, key)) != kw[key]:
                p.append(f"{key} = {getattr(cfg, key)}, wanted {kw[key]}")
        for lt, rate in kw["compress_rates"].items():
            if int(cfg.compress_rates.get(lt, -1)) != rate:
                p.append(f"compress_rates[{lt}] = {cfg.compress_rates.get(lt)}, wanted {rate}")
        if int(getattr(cfg, "qk_rope_head_dim", -1)) != rope_dim:
            p.append(f"qk_rope_head_dim = {getattr(cfg, 'qk_rope_head_dim', None)}, wanted {rope_dim}")
        rp = getattr(cfg, "rope_parameters", None) or {}
        main, comp = rp.get("main") or {}, rp.get("compress") or {}
        if main.get("rope_type", "default") != "default" or float(main.get("rope_theta", -1)) != kw["rope_theta"]:
            p.append(f"rope_parameters['main'] = {main}")
        if (comp.get("rope_type") != "yarn" or float(comp.get("rope_theta", -1)) != kw["compress_rope_theta"]
                or float(comp.get("factor", -1)) != yarn["factor"]
                or float(comp.get("attention_factor", 1.0)) != 1.0):
            p.append(f"rope_parameters['compress'] = {comp}")
        return p

    for variant in ("rope_scaling", "rope_parameters", "nested"):
        try:
            candidate = build_config(variant)
        except Exception as error:  # a variant this transformers version rejects
            log(f"config variant '{variant}' rejected: {type(error).__name__}: {error}")
            continue
        problems = config_problems(candidate)
        if not problems:
            log(f"config built with variant '{variant}'")
            return candidate
        log(f"config variant '{variant}' does not match:\n    " + "\n    ".join(problems))
    fail("could not build a DeepseekV4Config that matches config.json")
