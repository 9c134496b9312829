#!/usr/bin/env python3
"""servecast's DSA module rows (dsa_context_module_perf, dsa_generation_module_perf)
beside AIC's H200 tables of the same name, per engine and phase.

    benchmarks/dsa_vs_aic.py OURS_DIR AIC_SPARSE_ATTENTION_DIR

OURS_DIR holds our two tables (.parquet); AIC_SPARSE_ATTENTION_DIR is AIC's
h200_sxm/sparse_attention folder (one sub-folder per engine and version). A key is
(architecture, kv_cache_dtype, gemm_type, num_heads, batch_size, isl, step) with
num_heads the local head count; tp_size is left out (the module's work depends on the
local heads only: q_a, kv_a and the indexer are replicated). Our decode rows cache
`step` tokens and decode one more; AIC's engines differ by one in how they count it
(TRT-LLM's steps are powers of two, ours one less), so a decode row of ours is matched
with AIC's step s or s + 1. Prints, per engine and phase: the rows matched, the median,
p10 and p90 of ours / AIC, and the ratio at the largest matched work (batch x keys).
Needs pyarrow (test tooling, not a servecast dependency).
"""
import glob
import os
import sys

import pyarrow.parquet as pq

from gdn_vs_aic import summary  # median, p10, p90 of a list of ratios


def rows(path):
    by = {}
    t = pq.read_table(path).to_pydict()
    for i in range(len(t["latency"])):
        k = (t["architecture"][i], t["kv_cache_dtype"][i], t["gemm_type"][i], int(t["num_heads"][i]),
             int(t["batch_size"][i]), int(t["isl"][i]), int(t["step"][i]))
        by.setdefault(k, []).append(float(t["latency"][i]))
    return {k: min(v) for k, v in by.items()}  # AIC's sglang table repeats keys across models of one geometry


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    for phase in ("context", "generation"):
        name = f"dsa_{phase}_module_perf.parquet"
        ours = rows(os.path.join(argv[1], name))
        for path in sorted(glob.glob(os.path.join(argv[2], "*", "*", name))):
            theirs = rows(path)
            pairs = []
            for k, ms in ours.items():
                for step in ((k[6],) if phase == "context" else (k[6], k[6] + 1)):
                    other = k[:6] + (step,)
                    if other in theirs:
                        pairs.append((k, ms / theirs[other]))
                        break
            engine = os.path.relpath(os.path.dirname(path), argv[2])
            if not pairs:
                print(f"{phase} vs {engine}: no matching keys")
                continue
            top = max(pairs, key=lambda p: (p[0][4] * (p[0][5] + p[0][6]), p[0][3]))
            print(f"{phase} vs {engine}: ours / AIC {summary([r for _, r in pairs])}; "
                  f"largest {top[0]}: {top[1]:.2f}")


if __name__ == "__main__":
    main(sys.argv)
