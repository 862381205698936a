#!/usr/bin/env python3
"""Generates the model fixtures under tests/fixtures/model/ (deterministic; needs only the venv
with gguf and numpy): two tiny synthetic llama GGUFs written with gguf-py's GGUFWriter, and
their reference logits from tools/ref_forward.py.

  tiny_llama.gguf       2 layers, dim 64, 4 heads / 2 kv heads (head 16), ffn 128, vocab 256,
                        output.weight present; matrices Q8_0, Q4_0 and one F32 (attn_v);
                        F32 norms; token_embd Q8_0.
  tiny_llama_tied.gguf  same shape, no output.weight (tied to token_embd, Q4_0); F16 norms;
                        ffn_up in Q4_1 (the Q8_1 activation path SmolLM2 uses); rope base 500.
  tiny_llama*.logits.f32  little-endian f32 logits: for each sequence in model.json, first the
                        --act-quant reference (all positions x vocab), then the exact float64
                        reference (same shape), rounded to f32.
  model.json            per model: the token sequences (seeded random ids, each redrawn until its
                        quantized activations are clear of rounding ties, see stable_sequences)
                        and the file names.

  tiny_llama_moe.gguf   same shape, every block's FFN a mixture of 4 experts, top 2 (F32 router
                        ffn_gate_inp, stacked ffn_{gate,up,down}_exps in Q8_0/Q4_0/Q8_0);
                        sequences also redrawn until no routing decision is within 1e-4.
  smollm2_ref.json      (only with --smollm2 PATH) reference logits of SmolLM2-135M-Instruct
                        for the sequences listed in it: the last 4 positions' top-32 ids and
                        values (exact and act-quant), and their log-sum-exp over the whole vocab.

Usage: /work/venv/bin/python tools/gen_model_fixture.py [--smollm2 PATH]
"""
import argparse
import json
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from gguf.quants import quantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_forward  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "model")

DIM, N_HEAD, N_KV, FFN, VOCAB, N_LAYER = 64, 4, 2, 128, 256, 2
HD = DIM // N_HEAD

SEQ_LENGTHS = [7, 12, 24]
MOE_EXPERTS, MOE_K = 4, 2


def stable_sequences(m, seed):
    """Random token sequences (seeded) of SEQ_LENGTHS, each redrawn until no quantized
    activation of its --act-quant reference pass sits within float rounding of a rounding tie
    (ref_forward.FRAGILE): there lowbit's f32 pass and the reference must agree to f32 noise.
    Returns the sequences and the number of draws each took."""
    rng = np.random.default_rng(seed)
    out, draws = [], []
    for n in SEQ_LENGTHS:
        for attempt in range(1, 1000):
            seq = [int(t) for t in rng.integers(0, VOCAB, n)]
            ref_forward.FRAGILE = []
            m.forward(seq, act_quant=True)
            fragile = sum(ref_forward.FRAGILE)
            ref_forward.FRAGILE = None
            if fragile == 0:
                out.append(seq)
                draws.append(attempt)
                break
        else:
            raise SystemExit(f"no stable sequence of {n} tokens")
    return out, draws


def add_matrix(w, name, data, qtype):
    if qtype in (T.F32, T.F16):
        w.add_tensor(name, data.astype(np.float32 if qtype == T.F32 else np.float16))
    else:
        w.add_tensor(name, quantize(data.astype(np.float32), qtype), raw_dtype=qtype)


def write_model(path, seed, tied, types, norm_type, rope_base, moe=0):
    rng = np.random.default_rng(seed)
    w = GGUFWriter(path, "llama")
    w.add_name("lowbit tiny llama fixture")
    w.add_block_count(N_LAYER)
    w.add_context_length(128)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(rope_base)
    w.add_rope_dimension_count(HD)
    w.add_vocab_size(VOCAB)
    if moe:
        w.add_expert_count(moe)
        w.add_expert_used_count(MOE_K)

    def mat(rows, cols, gain=1.0):
        return rng.standard_normal((rows, cols)) * gain / np.sqrt(cols)

    def norm():
        return 1.0 + 0.2 * rng.standard_normal(DIM)

    add_matrix(w, "token_embd.weight", rng.standard_normal((VOCAB, DIM)), types["token_embd"])
    add_matrix(w, "output_norm.weight", norm(), norm_type)
    if not tied:
        add_matrix(w, "output.weight", mat(VOCAB, DIM, 3.0), types["output"])
    for i in range(N_LAYER):
        b = f"blk.{i}."
        add_matrix(w, b + "attn_norm.weight", norm(), norm_type)
        add_matrix(w, b + "attn_q.weight", mat(N_HEAD * HD, DIM, 2.0), types["attn_q"])
        add_matrix(w, b + "attn_k.weight", mat(N_KV * HD, DIM, 2.0), types["attn_k"])
        add_matrix(w, b + "attn_v.weight", mat(N_KV * HD, DIM), types["attn_v"])
        add_matrix(w, b + "attn_output.weight", mat(DIM, N_HEAD * HD), types["attn_output"])
        add_matrix(w, b + "ffn_norm.weight", norm(), norm_type)
        if moe:
            add_matrix(w, b + "ffn_gate_inp.weight", mat(moe, DIM, 4.0), types["ffn_gate_inp"])
            stack = lambda rows, cols, gain=1.0: np.stack([mat(rows, cols, gain) for _ in range(moe)])  # noqa: E731
            add_matrix(w, b + "ffn_gate_exps.weight", stack(FFN, DIM, 2.0), types["ffn_gate"])
            add_matrix(w, b + "ffn_up_exps.weight", stack(FFN, DIM), types["ffn_up"])
            add_matrix(w, b + "ffn_down_exps.weight", stack(DIM, FFN), types["ffn_down"])
            continue
        add_matrix(w, b + "ffn_gate.weight", mat(FFN, DIM, 2.0), types["ffn_gate"])
        add_matrix(w, b + "ffn_up.weight", mat(FFN, DIM), types["ffn_up"])
        add_matrix(w, b + "ffn_down.weight", mat(DIM, FFN), types["ffn_down"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference_logits(m, sequences):
    parts = []
    for seq in sequences:
        parts.append(m.forward(seq, act_quant=True).astype("<f4"))
        parts.append(m.forward(seq, act_quant=False).astype("<f4"))
    return np.concatenate([p.reshape(-1) for p in parts])


def smollm2(path):
    # "The capital of France is" in SmolLM2's vocabulary: The, Ġcapital, Ġof, ĠFrance, Ġis.
    m = ref_forward.Llama(path)
    # A longer sequence: whole-word tokens of the vocabulary (words that are not one token are
    # left out), so that attention runs over 40-odd real positions.
    text = ("Once upon a time , there was a little girl who lived in a village near the forest . "
            "Whenever she went out , the little girl wore a red riding cloak , so everyone in the "
            "village called her Little Red Riding Hood .")
    index = {t: i for i, t in enumerate(m.vocab)}
    story = []
    for i, word in enumerate(text.split()):
        tok = word if i == 0 or word in ",." else "\u0120" + word
        if tok in index:
            story.append(index[tok])
    seqs = [[504, 3575, 282, 4649, 314], story]
    out = {"model": os.path.basename(path), "top_k": 32, "last_positions": 4, "sequences": []}
    for seq in seqs:
        entry = {"tokens": seq}
        for variant, aq in (("act_quant", True), ("exact", False)):
            lg = m.forward(seq, act_quant=aq)
            rows = []
            for p in range(max(0, len(seq) - 4), len(seq)):
                row = lg[p]
                top = np.argsort(-row, kind="stable")[:32]
                mx = row.max()
                lse = float(mx + np.log(np.exp(row - mx).sum()))
                rows.append({"position": p, "ids": [int(t) for t in top],
                             "values": [float(row[t]) for t in top], "logsumexp": lse})
            entry[variant] = rows
        out["sequences"].append(entry)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2", help="path of SmolLM2-135M-Instruct.Q4_1.gguf")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    models = []
    specs = [
        ("tiny_llama", 1234, False, {
            "token_embd": T.Q8_0, "output": T.Q8_0, "attn_q": T.Q8_0, "attn_k": T.Q4_0,
            "attn_v": T.F32, "attn_output": T.Q4_0, "ffn_gate": T.Q8_0, "ffn_up": T.Q4_0,
            "ffn_down": T.Q8_0}, T.F32, 10000.0, 0),
        ("tiny_llama_tied", 5678, True, {
            "token_embd": T.Q4_0, "attn_q": T.Q4_0, "attn_k": T.Q8_0, "attn_v": T.Q4_0,
            "attn_output": T.Q8_0, "ffn_gate": T.Q4_0, "ffn_up": T.Q4_1, "ffn_down": T.Q4_0},
         T.F16, 500.0, 0),
        ("tiny_llama_moe", 4321, False, {
            "token_embd": T.Q8_0, "output": T.Q8_0, "attn_q": T.Q8_0, "attn_k": T.Q8_0,
            "attn_v": T.Q4_0, "attn_output": T.Q8_0, "ffn_gate_inp": T.F32, "ffn_gate": T.Q8_0,
            "ffn_up": T.Q4_0, "ffn_down": T.Q8_0}, T.F32, 10000.0, MOE_EXPERTS),
    ]
    for name, seed, tied, types, norm_type, base, moe in specs:
        path = os.path.join(OUT, name + ".gguf")
        write_model(path, seed, tied, types, norm_type, base, moe)
        m = ref_forward.Llama(path)
        seqs, draws = stable_sequences(m, seed)
        logits = reference_logits(m, seqs)
        logits.tofile(os.path.join(OUT, name + ".logits.f32"))
        models.append({"gguf": name + ".gguf", "logits": name + ".logits.f32", "tied": tied,
                       "sequences": seqs, "draws": draws})
    manifest = {
        "generator": "tools/gen_model_fixture.py (reference: tools/ref_forward.py)",
        "vocab": VOCAB,
        "layout": "per sequence: act_quant logits [n_tokens][vocab], then exact logits [n_tokens][vocab]",
        "stability": f"no quantized activation within {ref_forward.FRAGILE_EPS} x block max of a rounding tie",
        "models": models,
    }
    with open(os.path.join(OUT, "model.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    if a.smollm2:
        with open(os.path.join(OUT, "smollm2_ref.json"), "w") as f:
            json.dump(smollm2(a.smollm2), f, indent=1)
            f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    sys.exit(main())
