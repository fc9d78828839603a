#!/usr/bin/env python3
"""Throughput of the main job (LeNet-5 on Fashion-MNIST, conf/lenet5_fashion_mnist.toml) on 1 and
2 ranks with 1 compute thread each, with overlap of backward and allreduce on and off, and each
step's time split into compute, exposed communication and hidden communication, from the
--timeline spans that tnt-train records on every rank.

  bench/trainer/bench_trainer.py [--build build] [--steps 300] [--repeats 3] [--json]

Per step and rank: compute = forward + backward + optimizer; exposed = the wait from the end of
backward until every bucket is reduced; hidden = the part of the step's allreduce spans (their
union) that ran while backward was still computing. Figures are medians over steps (the first
10 are skipped as warm-up), then the median over repeats; samples/s = global batch / median
time between the starts of consecutive steps on rank 0.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WARMUP = 10


def union_length(spans):
    total, end = 0, None
    for b, e in sorted(spans):
        if end is None or b > end:
            total += e - b
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def overlap_length(spans, lo, hi):
    return union_length([(max(b, lo), min(e, hi)) for b, e in spans if min(e, hi) > max(b, lo)])


def analyse(trace, global_batch):
    by_rank = {}
    for ev in trace["traceEvents"]:
        if ev.get("ph") != "X":
            continue
        rank, step = ev["pid"], ev["args"]["step"]
        by_rank.setdefault(rank, {}).setdefault(step, []).append(ev)
    per_rank = {}
    for rank, steps in by_rank.items():
        rows = []
        for step in sorted(steps):
            evs = steps[step]
            get = lambda name: [e for e in evs if e["name"] == name]
            fw, bw, opt, st = get("forward"), get("backward"), get("optimizer"), get("step")
            if not (fw and bw and opt and st):
                continue
            wait = sum(e["dur"] for e in get("wait for allreduce"))
            ar = [(e["ts"], e["ts"] + e["dur"]) for e in evs if e["cat"] == "allreduce"]
            bw_lo, bw_hi = bw[0]["ts"], bw[0]["ts"] + bw[0]["dur"]
            rows.append({"step": step, "begin": st[0]["ts"],
                         "compute": fw[0]["dur"] + bw[0]["dur"] + opt[0]["dur"],
                         "exposed": wait, "hidden": overlap_length(ar, bw_lo, bw_hi),
                         "allreduce": union_length(ar)})
        per_rank[rank] = rows
    rows0 = per_rank[0][WARMUP:]
    intervals = [b["begin"] - a["begin"] for a, b in zip(rows0, rows0[1:])]
    med = lambda key: statistics.median(r[key] for rank in per_rank.values() for r in rank[WARMUP:])
    step_us = statistics.median(intervals)
    return {"step_ms": step_us / 1e3, "samples_per_s": global_batch / (step_us / 1e6),
            "compute_ms": med("compute") / 1e3, "exposed_comm_ms": med("exposed") / 1e3,
            "hidden_comm_ms": med("hidden") / 1e3, "allreduce_ms": med("allreduce") / 1e3}


def run_case(args, ranks, overlap, workdir):
    timeline = os.path.join(workdir, f"t_{ranks}_{overlap}.json")
    cmd = [os.path.join(args.build, "bin", "tnt-launch"), "-n", str(ranks), "--",
           os.path.join(args.build, "bin", "tnt-train"), os.path.join(ROOT, "conf", "lenet5_fashion_mnist.toml"),
           "--max-steps", str(args.steps), "--threads", "1", "--no-progress", "--validation-frequency", "0",
           "--test-size", "1", "--checkpoint-every-epochs", "0", "--checkpoint", "",
           "--csv", "", "--timeline", timeline] + ([] if overlap else ["--no-overlap"])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=workdir)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{p.stdout}")
    with open(timeline) as f:
        return analyse(json.load(f), args.global_batch)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--global-batch", type=int, default=64, help="the run file's global batch")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cases = [(1, True), (2, True), (2, False)]
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        for ranks, overlap in cases:
            runs = [run_case(args, ranks, overlap, workdir) for _ in range(args.repeats)]
            row = {"ranks": ranks, "threads": 1, "overlap": overlap, "repeats": args.repeats}
            for key in runs[0]:
                row[key] = statistics.median(r[key] for r in runs)
            row["samples_per_s_all"] = [round(r["samples_per_s"], 1) for r in runs]
            results.append(row)
    if args.json:
        print(json.dumps({"job": "lenet5_fashion_mnist", "global_batch": args.global_batch,
                          "steps": args.steps, "results": results}, indent=2))
        return
    print(f"LeNet-5 / Fashion-MNIST, global batch {args.global_batch}, {args.steps} steps, "
          f"median of {args.repeats} runs (per run: median over steps {WARMUP}+ and ranks)")
    head = f"{'ranks':>5} {'overlap':>7} {'samples/s':>10} {'step ms':>8} {'compute':>8} " \
           f"{'exposed':>8} {'hidden':>8} {'allreduce':>9}   runs (samples/s)"
    print(head)
    print("-" * len(head))
    for r in results:
        print(f"{r['ranks']:>5} {('on' if r['overlap'] else 'off'):>7} {r['samples_per_s']:>10.0f} "
              f"{r['step_ms']:>8.2f} {r['compute_ms']:>8.2f} {r['exposed_comm_ms']:>8.2f} "
              f"{r['hidden_comm_ms']:>8.2f} {r['allreduce_ms']:>9.2f}   {r['samples_per_s_all']}")
    print("(times in ms per step; exposed = waiting for allreduce after backward, hidden = "
          "allreduce time under backward)")


if __name__ == "__main__":
    main()
