#!/usr/bin/env python3
"""Ratios of servecast's gdn_perf rows to another gdn_perf table, per phase.

    benchmarks/gdn_vs_aic.py OURS.parquet THEIRS.parquet [THEIRS2 ...]

For each key (phase, batch_size, seq_len, num_k_heads, num_v_heads, d_model,
model_name: AIC's table repeats a shape once per checkpoint) present in both,
each side's latency is the sum of its kernels of that key (servecast writes the
convolution and the scan as two rows; AIC's tables name their kernels otherwise);
keys where a side lacks one of the two kernels are left out. Prints the median,
p10 and p90 of ours / theirs per phase, and the same for sequences of at least 8,192
tokens in prefill. Needs pyarrow (test tooling, not a servecast dependency).
"""
import statistics
import sys

import pyarrow.parquet as pq


def sums(path):
    acc, kernels = {}, {}
    for r in pq.read_table(path).to_pylist():
        k = (r["phase"], int(r["batch_size"]), int(r["seq_len"]), int(r["num_k_heads"]), int(r["num_v_heads"]),
             int(r["d_model"]), r["model_name"])
        acc[k] = acc.get(k, 0.0) + float(r["latency"])
        kernels.setdefault(k, set()).add(r["kernel_source"])
    return {k: v for k, v in acc.items() if len(kernels[k]) >= 2}


def summary(ratios):
    ratios = sorted(ratios)
    if not ratios:
        return "no shared keys"
    q = lambda f: ratios[min(len(ratios) - 1, int(f * len(ratios)))]
    return f"{len(ratios)} keys, median {statistics.median(ratios):.2f} (p10 {q(0.1):.2f}, p90 {q(0.9):.2f})"


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    ours = sums(argv[1])
    for theirs_path in argv[2:]:
        theirs = sums(theirs_path)
        print(theirs_path)
        for phase in ("context", "generation"):
            keys = [k for k in ours if k[0] == phase and k in theirs]
            print(f"  {phase}: {summary([ours[k] / theirs[k] for k in keys])}")
            if phase == "context":
                long = [k for k in keys if k[2] >= 8192]
                print(f"  context, seq_len >= 8192: {summary([ours[k] / theirs[k] for k in long])}")


if __name__ == "__main__":
    main(sys.argv)
