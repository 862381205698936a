#!/usr/bin/env python3
"""Checks an imatrix written by `lowbit imatrix --covariance` with gguf-py (an independent GGUF
reader): the file parses, llama.cpp's part (`W.in_sum2`, `W.counts`) is present for every
weight, and each lowbit `W.in_cov` is a symmetric k x k (x n_mat) matrix whose diagonal equals
`W.in_sum2` to f32 rounding (both are f64 sums of the same squares, rounded to f32).

    python3 tools/check_imatrix_cov.py IMATRIX.gguf
"""
import sys

import numpy as np
from gguf import GGUFReader


def main(path):
    r = GGUFReader(path)
    t = {x.name: x for x in r.tensors}
    weights = {n[: -len(".in_sum2")] for n in t if n.endswith(".in_sum2")}
    bad = 0
    for w in sorted(weights):
        if w + ".counts" not in t:
            print(f"{w}: no .counts")
            bad += 1
    covs = [n for n in t if n.endswith(".in_cov")]
    for n in covs:
        w = n[: -len(".in_cov")]
        s = np.asarray(t[w + ".in_sum2"].data, dtype=np.float64).reshape(-1)
        c = np.asarray(t[n].data, dtype=np.float64)
        k = int(t[n].shape[0])
        mats = c.reshape(-1, k, k)
        diag = np.concatenate([np.diag(m) for m in mats])
        asym = max(float(np.abs(m - m.T).max()) for m in mats)
        rel = float(np.abs(diag - s).max() / max(float(np.abs(s).max()), 1e-30))
        if asym != 0.0 or rel > 1e-6 or diag.size != s.size:
            print(f"{n}: asymmetry {asym}, diagonal vs in_sum2 {rel}")
            bad += 1
    print(f"{path}: {len(weights)} weights, {len(covs)} covariances, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
