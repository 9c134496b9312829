#!/usr/bin/env python3
"""Side-by-side DeepSeek-V3 estimates: AIC 0.12 (`aiconfigurator cli estimate`) and
servecast (`servecast estimate`) on the same deployments and the same H200 tables.
Test tooling only: AIC is installed with `pip install aiconfigurator==0.12` and is
never a servecast dependency.

servecast reads the tables AIC itself reads (the `systems/data` tree inside the
installed aiconfigurator_core package, AIC's layout; read in place, never copied),
at the backend version AIC reports for the case; `--shared` reads
../shared/reference/aic-parquet + aic-h200-more at TRT-LLM 1.3.0rc20 instead.

Usage: scripts/aic_deepseek_compare.py BUILD/bin/servecast [--shared] [--out FILE.json]
Prints one line per case (AIC, servecast, ratio) and writes the figures as JSON.
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT.parent / "shared" / "reference"

# (name, backend, mode, isl, osl, batch, tp, dp, moe_tp, moe_ep)
CASES = [
    ("trtllm_tp8_ep8_b8_1k", "trtllm", "static", 1024, 128, 8, 8, 1, 1, 8),
    ("trtllm_tp8_ep8_b64_1k", "trtllm", "static", 1024, 128, 64, 8, 1, 1, 8),
    ("trtllm_dp8_ep8_b16_1k", "trtllm", "static", 1024, 128, 16, 1, 8, 1, 8),
    ("trtllm_tp8_etp8_b4_4k", "trtllm", "static", 4000, 256, 4, 8, 1, 8, 1),
    ("sglang_tp8_etp8_b8_1k", "sglang", "static", 1024, 128, 8, 8, 1, 8, 1),
]


def aic(case):
    name, backend, mode, isl, osl, b, tp, dp, mtp, mep = case
    cmd = ["aiconfigurator", "cli", "estimate", "--model-path", "deepseek-ai/DeepSeek-V3", "--system", "h200_sxm",
           "--backend", backend, "--estimate-mode", mode, "--isl", str(isl), "--osl", str(osl), "--batch-size", str(b),
           "--tp-size", str(tp), "--attention-dp-size", str(dp), "--moe-tp-size", str(mtp), "--moe-ep-size", str(mep)]
    if backend == "trtllm":
        cmd += ["--perf-db-version", "1.3.0rc20"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    ttft = re.search(r"TTFT:\s+([0-9.]+) ms", out)
    tpot = re.search(r"TPOT:\s+([0-9.]+) ms", out)
    version = re.search(r"Backend:\s+\S+ \(([^)]+)\)", out)
    if not ttft or not tpot:
        return None, None, out[-2000:]
    return (float(ttft.group(1)), float(tpot.group(1))), version.group(1) if version else None, ""


def aic_data_root():
    import aiconfigurator_core  # noqa: PLC0415 (test tooling, imported only here)
    return Path(aiconfigurator_core.__file__).resolve().parent / "systems" / "data"


def ours(binary, case, version, shared):
    name, backend, mode, isl, osl, b, tp, dp, mtp, mep = case
    if shared:
        data = ["--data-root", str(REF / "aic-parquet"), "--data-root", str(REF / "aic-h200-more"), "--data",
                "trtllm/1.3.0rc20"]
    else:
        data = ["--data-root", str(aic_data_root()), "--data", f"{backend}/{version}"]
    cmd = [binary, "estimate", "--model", "deepseek-ai/DeepSeek-V3", "--system", "h200_sxm", *data,
           "--backend", backend, "--mode", mode, "--isl", str(isl), "--osl", str(osl), "--batch", str(b), "--tp",
           str(tp), "--dp", str(dp), "--moe-tp", str(mtp), "--moe-ep", str(mep), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    if r.returncode != 0:
        return None, r.stderr[-2000:]
    d = json.loads(r.stdout)
    return (d["ttft_ms"], d["tpot_ms"]), ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("servecast")
    ap.add_argument("--out")
    ap.add_argument("--shared", action="store_true")
    a = ap.parse_args()
    rows = []
    for case in CASES:
        if a.shared and case[1] != "trtllm":
            continue  # the shared reference has AIC's TRT-LLM tables only for every op AIC reads
        x, version, why_a = aic(case)
        y, why_b = ours(a.servecast, case, version, a.shared) if x else (None, "")
        name, backend, mode, isl, osl, b, tp, dp, mtp, mep = case
        row = {"case": name, "backend": backend, "mode": mode, "isl": isl, "osl": osl, "batch": b, "tp": tp,
               "dp": dp, "moe_tp": mtp, "moe_ep": mep, "aic_version": version,
               "aic": {"ttft_ms": x[0], "tpot_ms": x[1]} if x else None,
               "servecast": {"ttft_ms": y[0], "tpot_ms": y[1]} if y else None}
        if x and y:
            print(f"{case[0]:26s} AIC TTFT {x[0]:9.3f} TPOT {x[1]:7.3f} | servecast TTFT {y[0]:9.3f} TPOT {y[1]:7.3f}"
                  f" | ratio {y[0] / x[0]:.3f} {y[1] / x[1]:.3f}")
        else:
            print(f"{case[0]:26s} no answer: AIC {why_a.strip()[-300:]} servecast {why_b.strip()[-300:]}")
        rows.append(row)
    if a.out:
        doc = {"what": "AIC 0.12 (aiconfigurator cli estimate) next to servecast on DeepSeek-V3, H200; written by "
                       "scripts/aic_deepseek_compare.py",
               "servecast_data": "shared reference (aic-parquet + aic-h200-more, trtllm/1.3.0rc20)" if a.shared
                                 else "the installed aiconfigurator_core systems/data",
               "cases": rows}
        Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
