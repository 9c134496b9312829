#!/usr/bin/env python3
"""servecast's mamba2_perf rows beside AIC's, per phase and kernel.

    benchmarks/mamba2_vs_aic.py OURS.parquet AIC.parquet

A key is (phase, batch_size, seq_len, nheads, n_groups, d_state, chunk_size,
d_model, model_name). AIC's H200 TensorRT-LLM table holds one row per key, its
convolution (kernel_source causal_conv1d_fn / causal_conv1d_update): its collector
times the scan too but the table it ships has no scan rows. So the ratio printed is
convolution to convolution (ours servecast_causal_conv1d*), plus, for the record, our
whole layer core (convolution + scan) over AIC's row. Also our scan's latency at the
largest prefills. Prints median, p10, p90. Needs pyarrow (test tooling, not a
servecast dependency).
"""
import sys

import pyarrow.parquet as pq

from gdn_vs_aic import summary  # median, p10, p90 of a list of ratios


def rows(path):
    by = {}
    for r in pq.read_table(path).to_pylist():
        k = (r["phase"], int(r["batch_size"]), int(r["seq_len"]), int(r["nheads"]), int(r["n_groups"]),
             int(r["d_state"]), int(r["chunk_size"]), int(r["d_model"]), r["model_name"])
        kind = "conv" if "causal_conv1d" in r["kernel_source"] else "scan"
        by.setdefault(k, {})[kind] = by.get(k, {}).get(kind, 0.0) + float(r["latency"])
    return by


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    ours, theirs = rows(argv[1]), rows(argv[2])
    print(f"AIC rows with a scan kernel: {sum(1 for v in theirs.values() if 'scan' in v)} of {len(theirs)}")
    for phase in ("context", "generation"):
        keys = [k for k in ours if k[0] == phase and k in theirs and "conv" in theirs[k]]
        print(f"{phase}: convolution, ours / AIC: {summary([ours[k]['conv'] / theirs[k]['conv'] for k in keys])}")
        print(f"{phase}: our conv + scan / AIC's row: "
              f"{summary([(ours[k]['conv'] + ours[k]['scan']) / theirs[k]['conv'] for k in keys])}")
    print("our scan at the largest prefill of each shape (ms, tokens, Mtokens/s per head):")
    for shape in sorted({k[3:] for k in ours if k[0] == "context"}):
        ks = [k for k in ours if k[0] == "context" and k[3:] == shape]
        top = max(ks, key=lambda k: (k[1] * k[2], k[2]))
        ms = ours[top]["scan"]
        tokens = top[1] * top[2]
        print(f"  {shape[-1]} nheads {shape[0]} groups {shape[1]} d_state {shape[2]} chunk {shape[3]}: "
              f"batch {top[1]} x {top[2]}: scan {ms:.3f} ms, conv {ours[top]['conv']:.3f} ms, "
              f"{tokens * shape[0] / ms / 1e3:.0f} M head-tokens/s")


if __name__ == "__main__":
    main(sys.argv)
