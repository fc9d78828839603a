#!/usr/bin/env python3
"""Runs metrics_probe on 1, 2 and 3 ranks and compares its figures with the single rank's.

Lines are "LOSS KIND KEY VALUE". Counting metrics of the evaluation before training ("exact
...") and the key label_zero (a metric of the data alone) must be equal to the last digit: every
figure is a sum over samples divided by a count, summed over ranks before dividing, so a mean
of per-rank means would fail here. That evaluation's loss differs only in float32 rounding
(oneDNN's kernels for other batch sizes, summation order): 1e-6 relative. The rest follow
training, where ranks sum gradients in another order: equal to 1e-4 relative.
"""
import argparse
import subprocess
import sys


def run(launch, probe, ranks):
    out = subprocess.run([launch, "-n", str(ranks), "--", probe], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"{ranks} ranks: exit {out.returncode}\n{out.stdout}\n{out.stderr}")
    figures = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        try:
            figures[" ".join(parts[:-1])] = float(parts[-1])
        except ValueError:
            continue
    return figures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launch", required=True)
    ap.add_argument("--probe", required=True)
    args = ap.parse_args()
    base = run(args.launch, args.probe, 1)
    keys = [k for k in base if k.endswith(" top_2_accuracy") or k.endswith(" top_k_accuracy")]
    if len(base) < 20 or not keys or not any(k.startswith("binary_crossentropy") for k in base):
        sys.exit(f"too few figures from one rank: {base}")
    failures = []
    for ranks in (2, 3):
        figures = run(args.launch, args.probe, ranks)
        if figures.keys() != base.keys():
            sys.exit(f"{ranks} ranks printed other figures: {sorted(figures)} vs {sorted(base)}")
        for key, want in base.items():
            got = figures[key]
            if key.endswith(" label_zero") or (" exact " in key and not key.endswith(" loss")):
                tolerance = 0.0
            elif " exact " in key:
                tolerance = 1e-6 * max(1.0, abs(want))
            else:
                tolerance = 1e-4 * max(1.0, abs(want))
            if abs(got - want) > tolerance:
                failures.append(f"{ranks} ranks: {key} = {got!r}, one rank: {want!r}")
    for f in failures:
        print(f)
    if failures:
        return 1
    print(f"{len(base)} figures equal on 1, 2 and 3 ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
