#!/usr/bin/env python3
"""Independent numpy reference forward pass of a llama-family GGUF (the oracle for lowbit's
model tests). Written from PyPI `gguf` (GGUFReader + gguf.quants.dequantize) and numpy only.

Usage:
  ref_forward.py MODEL.gguf --tokens 504,3575,282 [--tokens ...] [--out PREFIX] [--act-quant]
                 [--top K]

For every --tokens sequence (token ids, comma-separated) it runs the whole sequence from
position 0 and computes the logits of every position in float64. It prints the greedy next
token of the last position (and its text from the GGUF vocabulary); with --out it writes
PREFIX.<i>.npy, an array (n_tokens, n_vocab) of float64 logits per sequence.

--act-quant emulates what ggml's CPU backend (and lowbit's backend trait) does to the
activations before each matrix product: a column multiplied with a Q4_0/Q5_0/Q8_0 matrix is
first quantized to Q8_0, one multiplied with Q4_1/Q5_1 to Q8_1 (including the f16 block sum `s`
that the Q4_1/Q5_1 dot product uses in place of d * sum(q)); F32/F16/BF16 matrices take the
activations as they are. The quantization is done in float32 arithmetic as ggml's reference
encoder does it (facts: ggml `ggml/src/ggml-quants.c` quantize_row_q8_0_ref /
quantize_row_q8_1_ref: d = amax / 127, id = 1/d, q = roundf(x * id), s = f16(sum(q) * d));
everything else stays float64. Without --act-quant the products are exact float64 products
with the dequantized weights.

The model, as llama.cpp builds it for LLM_ARCH_LLAMA (facts from llama.cpp
`src/llama-model.cpp` build_llama, `ggml/src/ggml-cpu/ops.cpp` rms_norm and rope, and
`convert_hf_to_gguf.py` LlamaModel.permute):
  x = token_embd[tokens]
  per layer: h = rmsnorm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h;
             RoPE "normal" mode (the converter permuted Wq/Wk so that adjacent pairs
             (2i, 2i+1) rotate): theta_i = pos * freq_base^(-2i / n_rot), for 2i < n_rot;
             causal grouped-query attention (q head j reads kv head j // (n_head / n_head_kv)),
             softmax(q.k / sqrt(head_dim)); x += Wo attn;
             h = rmsnorm(x) * ffn_norm; x += Wdown (silu(Wgate h) * Wup h)
  logits = Woutput (rmsnorm(x) * output_norm), Woutput = token_embd when output.weight is absent.
  rmsnorm(x) = x / sqrt(mean(x^2) + eps), eps = llama.attention.layer_norm_rms_epsilon.
"""
import argparse
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.quants import dequantize

Q8_0_WEIGHTS = {T.Q4_0, T.Q5_0, T.Q8_0}
Q8_1_WEIGHTS = {T.Q4_1, T.Q5_1}
FLOAT_WEIGHTS = {T.F32, T.F16, T.BF16}


# When a list, q8_activations appends to it the number of quantized values that a relative
# perturbation of FRAGILE_EPS (of the block's largest |x|) could round differently: a q within
# reach of a rounding tie, or an f16 scale d (or block sum s) within reach of an f16 tie.
# gen_model_fixture.py keeps only sequences where this count is 0, so that an f32 pass that
# differs from this one by float rounding quantizes every activation identically.
FRAGILE = None
FRAGILE_EPS = 3e-7


def _f16_unstable(v32, eps):
    v = v32.astype(np.float64)
    lo = (v * (1 - eps)).astype(np.float16)
    hi = (v * (1 + eps)).astype(np.float16)
    return int(np.count_nonzero(lo != hi))


def q8_activations(x, want_s):
    """ggml's Q8_0 / Q8_1 reference quantization of the rows of x (n, k), in float32.

    Returns (dequantized activations as float64 (n, k), q (n, nb, 32), d16 (n, nb), s (n, nb) or None).
    """
    n, k = x.shape
    if k % 32:
        raise SystemExit(f"activation length {k} is not a multiple of 32")
    xb = x.astype(np.float32).reshape(n, k // 32, 32)
    amax = np.max(np.abs(xb), axis=-1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    v = (xb * inv[..., None]).astype(np.float32).astype(np.float64)
    q = np.trunc(v + np.copysign(0.5, v))  # roundf: ties away from zero (exact in f64)
    d16 = d.astype(np.float16).astype(np.float64)
    s = None
    if want_s:
        sumq = q.sum(axis=-1).astype(np.float32)
        s = (sumq * d).astype(np.float32).astype(np.float16).astype(np.float64)
    if FRAGILE is not None:
        reach = FRAGILE_EPS * 127.0
        frac = np.abs(np.abs(v) - np.floor(np.abs(v)) - 0.5)
        bad = int(np.count_nonzero((frac < reach) & (amax[..., None] > 0)))
        bad += _f16_unstable(d, FRAGILE_EPS)
        if want_s:
            bad += _f16_unstable((q.sum(axis=-1).astype(np.float32) * d).astype(np.float32), FRAGILE_EPS)
        FRAGILE.append(bad)
    deq = (q * d16[..., None]).reshape(n, k)
    return deq, q, d16, s


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        if default is None:
            raise SystemExit(f"missing metadata key {key}")
        return default
    return f.contents()


class Matrix:
    def __init__(self, t):
        self.name = t.name
        self.type = t.tensor_type
        self.w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
        if self.w.ndim != 2:
            raise SystemExit(f"{t.name}: expected a matrix, got shape {self.w.shape}")
        self.m = None
        if self.type in Q8_1_WEIGHTS:
            # Q4_1 / Q5_1 blocks start with f16 d, f16 m (ggml-common.h block_q4_1 / block_q5_1).
            raw = np.asarray(t.data, dtype=np.uint8)
            rows = self.w.shape[0]
            nb = self.w.shape[1] // 32
            blocks = raw.reshape(rows, nb, -1)
            self.m = blocks[:, :, 2:4].copy().view(np.float16)[..., 0].astype(np.float64)

    def apply(self, x, act_quant):
        """x: (n, cols) -> (n, rows) = x W^T."""
        if not act_quant or self.type in FLOAT_WEIGHTS:
            return x @ self.w.T
        if self.type in Q8_0_WEIGHTS:
            xq, _, _, _ = q8_activations(x, False)
            return xq @ self.w.T
        if self.type in Q8_1_WEIGHTS:
            xq, q, d16, s = q8_activations(x, True)
            # ggml's dot: sum_b d_w d_a sum(qw qa) + m_w * s_a; the dequantized product gives
            # m_w * d_a * sum(qa) for the second term, so add m_w * (s_a - d_a * sum(qa)).
            corr = s - d16 * q.sum(axis=-1)  # (n, nb)
            return xq @ self.w.T + corr @ self.m.T
        raise SystemExit(f"{self.name}: --act-quant does not emulate {self.type.name} yet")


class Slice(Matrix):
    """One expert's matrix: a slice of a stacked (n_expert, rows, cols) tensor."""

    def __init__(self, name, qtype, w):
        if qtype in Q8_1_WEIGHTS:
            raise SystemExit(f"{name}: experts in {qtype.name} are not emulated")
        self.name, self.type, self.w, self.m = name, qtype, w, None


def experts(t):
    w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
    if w.ndim != 3:
        raise SystemExit(f"{t.name}: expected (n_expert, rows, cols), got {w.shape}")
    return [Slice(f"{t.name}#{e}", t.tensor_type, w[e]) for e in range(w.shape[0])]


# Routing decisions closer than this (k-th against (k+1)-th router logit) count as fragile.
ROUTE_EPS = 1e-4


class Llama:
    def __init__(self, path):
        r = GGUFReader(path)
        arch = field(r, "general.architecture")
        if arch != "llama":
            raise SystemExit(f"unsupported architecture {arch!r} (only llama)")
        p = "llama."
        self.n_layer = int(field(r, p + "block_count"))
        self.dim = int(field(r, p + "embedding_length"))
        self.n_head = int(field(r, p + "attention.head_count"))
        self.n_kv = int(field(r, p + "attention.head_count_kv", self.n_head))
        self.eps = float(field(r, p + "attention.layer_norm_rms_epsilon"))
        self.freq_base = float(field(r, p + "rope.freq_base", 10000.0))
        self.head_dim = int(field(r, p + "attention.key_length", self.dim // self.n_head))
        self.n_rot = int(field(r, p + "rope.dimension_count", self.head_dim))
        self.n_expert = int(field(r, p + "expert_count", 0))
        self.n_expert_used = int(field(r, p + "expert_used_count", 0))
        tensors = {t.name: t for t in r.tensors}
        self.vocab = [str(s) for s in field(r, "tokenizer.ggml.tokens", [])] if "tokenizer.ggml.tokens" in r.fields else []

        def vec(name):
            return np.asarray(dequantize(tensors[name].data, tensors[name].tensor_type), dtype=np.float64).reshape(-1)

        emb = tensors["token_embd.weight"]
        self.embd = Matrix(emb)
        self.output = Matrix(tensors["output.weight"]) if "output.weight" in tensors else self.embd
        self.output_norm = vec("output_norm.weight")
        self.layers = []
        for i in range(self.n_layer):
            b = f"blk.{i}."
            layer = {
                "attn_norm": vec(b + "attn_norm.weight"),
                "ffn_norm": vec(b + "ffn_norm.weight"),
                **{k: Matrix(tensors[b + k + ".weight"]) for k in
                   ("attn_q", "attn_k", "attn_v", "attn_output")},
            }
            if self.n_expert:
                layer["router"] = Matrix(tensors[b + "ffn_gate_inp.weight"])
                for k in ("gate", "up", "down"):
                    layer[k + "_exps"] = experts(tensors[b + f"ffn_{k}_exps.weight"])
            else:
                for k in ("ffn_gate", "ffn_up", "ffn_down"):
                    layer[k] = Matrix(tensors[b + k + ".weight"])
            self.layers.append(layer)

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        """x: (n, heads, head_dim); rotates pairs (2i, 2i+1) for 2i < n_rot."""
        half = self.n_rot // 2
        inv = self.freq_base ** (-2.0 * np.arange(half) / self.n_rot)
        theta = pos[:, None] * inv[None, :]  # (n, half)
        c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        out = x.copy()
        x0 = x[:, :, 0:2 * half:2]
        x1 = x[:, :, 1:2 * half:2]
        out[:, :, 0:2 * half:2] = x0 * c - x1 * s
        out[:, :, 1:2 * half:2] = x0 * s + x1 * c
        return out

    def moe(self, L, h, act_quant):
        """llama.cpp's build_moe_ffn for llama: softmax over the router logits, the top k
        experts (ties to the lower id), their probabilities renormalised, SwiGLU experts."""
        logits = L["router"].apply(h, act_quant)
        k = self.n_expert_used
        out = np.zeros_like(h)
        for j in range(h.shape[0]):
            lj = logits[j]
            order = sorted(range(len(lj)), key=lambda e: (-lj[e], e))
            if FRAGILE is not None and len(order) > k:
                FRAGILE.append(int(lj[order[k - 1]] - lj[order[k]] < ROUTE_EPS))
            p = np.exp(lj - lj.max())
            p /= p.sum()
            sel = order[:k]
            w = p[sel] / p[sel].sum()
            hj = h[j:j + 1]
            for e, we in zip(sel, w):
                g = L["gate_exps"][e].apply(hj, act_quant)
                u = L["up_exps"][e].apply(hj, act_quant)
                out[j] += we * L["down_exps"][e].apply(g / (1.0 + np.exp(-g)) * u, act_quant)[0]
        return out

    def forward(self, tokens, act_quant=False):
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        hd = self.head_dim
        x = self.embd.w[tokens].copy()
        pos = np.arange(n, dtype=np.float64)
        group = self.n_head // self.n_kv
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for L in self.layers:
            h = self.rmsnorm(x, L["attn_norm"])
            q = L["attn_q"].apply(h, act_quant).reshape(n, self.n_head, hd)
            k = L["attn_k"].apply(h, act_quant).reshape(n, self.n_kv, hd)
            v = L["attn_v"].apply(h, act_quant).reshape(n, self.n_kv, hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            att = np.empty((n, self.n_head, hd))
            for j in range(self.n_head):
                kv = j // group
                sc = q[:, j, :] @ k[:, kv, :].T / np.sqrt(hd) + mask
                sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
                sc /= sc.sum(axis=-1, keepdims=True)
                att[:, j, :] = sc @ v[:, kv, :]
            x = x + L["attn_output"].apply(att.reshape(n, self.n_head * hd), act_quant)
            h = self.rmsnorm(x, L["ffn_norm"])
            if "router" in L:
                x = x + self.moe(L, h, act_quant)
                continue
            g = L["ffn_gate"].apply(h, act_quant)
            u = L["ffn_up"].apply(h, act_quant)
            x = x + L["ffn_down"].apply(g / (1.0 + np.exp(-g)) * u, act_quant)
        x = self.rmsnorm(x, self.output_norm)
        return self.output.apply(x, act_quant)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tokens", action="append", required=True, help="comma-separated token ids")
    ap.add_argument("--out", help="write PREFIX.<i>.npy (n_tokens, n_vocab) float64 per sequence")
    ap.add_argument("--act-quant", action="store_true", help="emulate ggml's activation quantization")
    ap.add_argument("--top", type=int, default=5, help="print the top K next tokens")
    a = ap.parse_args()
    m = Llama(a.model)
    for i, seq in enumerate(a.tokens):
        toks = [int(t) for t in seq.split(",") if t.strip()]
        logits = m.forward(toks, a.act_quant)
        if a.out:
            np.save(f"{a.out}.{i}.npy", logits)
        last = logits[-1]
        top = np.argsort(-last)[: a.top]
        names = [m.vocab[t] if t < len(m.vocab) else "?" for t in top]
        print(f"seq {i}: {len(toks)} tokens; top next: " +
              ", ".join(f"{t} {nm!r} {last[t]:.4f}" for t, nm in zip(top, names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
