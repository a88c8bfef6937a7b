#!/usr/bin/env python3
"""Makes the tokenizer parity data (issue 8) with Hugging Face `tokenizers` on the GPU machine.

Trains a byte-level BPE with DeepSeek-V3's pre-tokenizer (three Split regexes, then ByteLevel
without its own regex), adds DeepSeek's special tokens and a BOS template, then encodes a
corpus of at least 10,000 strings (ASCII, numbers, whitespace runs, CJK and kana, emoji with
ZWJ and modifiers, combining marks, mojibake and control characters, special tokens inside
text) and writes, per string, the ids without and with special tokens and the decoded text.

    python3 tests/reference/tokenizer_parity.py --out DIR [--strings 12000] [--vocab 4000]

DIR/tokenizer.json and DIR/corpus.jsonl are the test data of tokenizer_parity_test
(tests/data/tokenizer_parity/, the corpus zstd-compressed). Deterministic for a seed.
"""
import argparse
import json
import os
import random

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers, Regex

SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>"]
# DeepSeek-V3's tokenizer.json pre-tokenizer, pattern for pattern.
DIGITS = r"\p{N}{1,3}"
CJK = "[一-龥\u3040-ゟ゠-ヿ]+"
WORDS = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"
         r" ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS_EN = ("the of and to in is was for on that with as by at from it an be this which or are have not but had his "
            "they you were their one all we can her has there been if more when will would who so no model token "
            "batch expert layer cache rank prefill decode sample seed stream window").split()
CJK_TEXT = "我们在这个模型中使用了专家并行和数据并行的方法来生成文本深度求索大语言模型推理批量缓存注意力压缩稀疏"
KANA = "ひらがなカタカナのテストですトークナイザーはこんにちは世界アイウエオ"
EMOJI = ["😀", "🎉", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇯🇵", "🧪", "🚀", "🤖", "✅", "🔥"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "\u0915\u094d\u0937", "\u0e01\u0e34", "Z\u0351\u0352\u0353"]
ODD = ["Ã©", "Ã¼ber", "\ufffd", "\u00ad", "\u200b", "\u200d", "\ufeff", "\x00", "\x07", "\x1b[31m", "\u0080", "\u009f",
       "\ue000", "\uffff", "\U0010ffff", "\\xff\\xfe", "%C3%A9", "&#233;", "\u202e", "\u0378"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\t\t ", "\u3000", "\u00a0", "      "]
PUNCT = list(".,;:!?'\"()[]{}<>-_/\\@#$%^&*+=|~`") + ["...", "--", "—", "“", "”", "«", "»", "。", "，", "、", "！"]


def number(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.randrange(10 ** rng.randrange(1, 12)))
    if kind == 1:
        return f"{rng.uniform(-1e4, 1e4):.{rng.randrange(0, 6)}f}"
    if kind == 2:
        return f"{rng.randrange(10**6):,}"
    if kind == 3:
        return f"{rng.random():.3e}"
    if kind == 4:
        return "".join(rng.choice("٠١٢٣٤٥٦٧٨٩") for _ in range(rng.randrange(1, 6)))  # Arabic-Indic digits
    return rng.choice(["½", "²", "Ⅻ", "①②③", "0x1F", "v1.2.3", "3.14159", "1e-6", "2026-11-30"])


def piece(rng, kind):
    if kind == "ascii":
        w = rng.choice(WORDS_EN)
        return w.capitalize() if rng.random() < 0.2 else (w.upper() if rng.random() < 0.05 else w)
    if kind == "number":
        return number(rng)
    if kind == "space":
        return rng.choice(SPACES)
    if kind == "cjk":
        n = rng.randrange(1, 8)
        s = rng.randrange(len(CJK_TEXT) - n)
        return CJK_TEXT[s:s + n]
    if kind == "kana":
        n = rng.randrange(1, 6)
        s = rng.randrange(len(KANA) - n)
        return KANA[s:s + n]
    if kind == "emoji":
        return rng.choice(EMOJI)
    if kind == "combining":
        return rng.choice(COMBINING)
    if kind == "odd":
        return rng.choice(ODD)
    if kind == "punct":
        return rng.choice(PUNCT)
    if kind == "special":
        return rng.choice(SPECIAL)
    if kind == "code":
        return rng.choice(["def f(x):", "    return x", "if (a < b) {", "}", "x = [1, 2, 3]", "'s", "'ll", "don't",
                           "#include <vector>", "std::string", "a->b", "i++", "// comment", "<div class=\"x\">"])
    raise ValueError(kind)


KINDS = ["ascii", "number", "space", "cjk", "kana", "emoji", "combining", "odd", "punct", "special", "code"]
WEIGHTS = [30, 8, 14, 8, 4, 3, 3, 3, 8, 1, 3]


def make_string(rng, focus=None):
    n = rng.randrange(1, 24)
    parts = []
    for _ in range(n):
        kind = focus if focus and rng.random() < 0.6 else rng.choices(KINDS, WEIGHTS)[0]
        parts.append(piece(rng, kind))
        if kind == "ascii" and rng.random() < 0.7:
            parts.append(" ")
    return "".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--strings", type=int, default=12000)
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(DIGITS), behavior="isolated", invert=False),
        pre_tokenizers.Split(Regex(CJK), behavior="isolated", invert=False),
        pre_tokenizers.Split(Regex(WORDS), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    training = [make_string(rng) for _ in range(30000)] + [" ".join(rng.choices(WORDS_EN, k=40)) for _ in range(3000)]
    trainer = trainers.BpeTrainer(vocab_size=args.vocab, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training, trainer=trainer)
    bos = SPECIAL[0]
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                       special_tokens=[(bos, tok.token_to_id(bos))])
    tok.save(os.path.join(args.out, "tokenizer.json"))
    tok = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))  # what the C++ side reads

    corpus = ["", " ", "  ", "\n", "a", "hello world", "Hello, World!", "1234567", "  leading", "trailing  ",
              SPECIAL[0], SPECIAL[0] + SPECIAL[1], "x" + SPECIAL[3] + "y", "<｜User｜", "｜>", "<|not_special|>"]
    for i in range(args.strings - len(corpus)):
        focus = KINDS[i % len(KINDS)] if i % 3 == 0 else None
        corpus.append(make_string(rng, focus))
    counts = {"roundtrip_ok": 0}
    with open(os.path.join(args.out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for text in corpus:
            plain = tok.encode(text, add_special_tokens=False).ids
            with_bos = tok.encode(text, add_special_tokens=True).ids
            decoded = tok.decode(plain, skip_special_tokens=False)
            counts["roundtrip_ok"] += decoded == text
            f.write(json.dumps({"text": text, "ids": plain, "ids_with_special": with_bos, "decoded": decoded},
                               ensure_ascii=False) + "\n")
    print(f"tokenizer_parity: tokenizers {__import__('tokenizers').__version__}, vocab {tok.get_vocab_size()}, "
          f"{len(corpus)} strings, decode(encode(s)) == s for {counts['roundtrip_ok']}")


if __name__ == "__main__":
    main()
