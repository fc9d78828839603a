#!/usr/bin/env python3
"""Keras's callbacks on 1, 2 and 3 ranks (callbacks_probe.cpp): each run passes its own checks,
and EarlyStopping and ReduceLROnPlateau decide at the same epoch and step on every number of
ranks."""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launch", required=True)
    p.add_argument("--probe", required=True)
    p.add_argument("--workdir", required=True)
    args = p.parse_args()
    results = {}
    for ranks in (1, 2, 3):
        work = Path(args.workdir) / f"ranks{ranks}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        out = subprocess.run([args.launch, "-n", str(ranks), "--", args.probe, str(work)], capture_output=True,
                             text=True, timeout=60)
        text = out.stdout + out.stderr
        if out.returncode != 0 or f"callbacks across {ranks} ranks: PASS" not in out.stdout:
            sys.exit(f"{ranks} rank(s): exit status {out.returncode}\n{text}")
        results[ranks] = sorted(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
        print(f"{ranks} rank(s): " + "; ".join(results[ranks]))
        if len(results[ranks]) != 2:
            sys.exit(f"{ranks} rank(s): expected 2 RESULT lines\n{text}")
    if not results[1] == results[2] == results[3]:
        sys.exit(f"the decisions differ between 1, 2 and 3 ranks: {results}")
    print("the same decisions on 1, 2 and 3 ranks: PASS")


if __name__ == "__main__":
    main()
