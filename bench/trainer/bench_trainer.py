#!/usr/bin/env python3
"""Throughput of the main job (LeNet-5 on Fashion-MNIST, conf/lenet5_fashion_mnist.toml) and
where each step's time goes, from the --timeline spans that tnt-train records on every rank.

  bench/trainer/bench_trainer.py [--build build] [--batches 64,256] [--steps 300] [--repeats 3]
                                 [--no-overlap-case] [--launch ARGS] [--json]

Cases, per global batch (the run file's global batch is replaced):
  1 rank x 2 threads   the whole machine (2 cores here) as one rank: the strong-scaling baseline
  1 rank x 1 thread    one rank's compute alone
  2 ranks x 1 thread   data parallelism: gradient allreduce every step
  2 ranks x 1 thread, allreduce off: the same, with TNT_BENCH_SKIP_GRADIENT_ALLREDUCE=1 (benchmark
                       only: each rank steps with its own gradients, so both runs share the same
                       compute contention and differ only by the gradient allreduce)
  (--no-overlap-case adds 2 ranks x 1 thread with --no-overlap)
Every round runs each case once, in this order, so that the cases alternate; figures are the
median over rounds. tnt-launch runs with its defaults (2 ranks: each bound to a core of its own)
unless --launch adds arguments, e.g. --launch='--bind-to none'.

Per step and rank: compute = forward + backward + optimizer; exposed = the wait from the end of
backward until every bucket is reduced; hidden = the part of the step's allreduce spans (their
union) that ran while backward was still computing; other = step interval - compute - exposed
(data hand-off, actor messages, the step's metrics). Figures are medians over steps (the first
10 are skipped as warm-up) and ranks; samples/s = global batch / median time between the starts
of consecutive steps on rank 0.

Strong-scaling efficiency of 2 ranks = samples/s(2 ranks x 1 thread) / samples/s(1 rank x 2
threads): the same cores, used as two ranks instead of one. Per rank it is also given against
twice 1 rank x 1 thread.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WARMUP = 10
SKIP_VARIABLE = "TNT_BENCH_SKIP_GRADIENT_ALLREDUCE"


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


def analyse(trace, global_batch, warmup=WARMUP):
    """Step figures of a --timeline file (every rank's spans), as described in the module doc."""
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
            # With --accumulate N a step has N forward and N backward spans; its allreduces
            # overlap only the last backward.
            last = max(bw, key=lambda e: e["ts"])
            bw_lo, bw_hi = last["ts"], last["ts"] + last["dur"]
            forward, backward = sum(e["dur"] for e in fw), sum(e["dur"] for e in bw)
            rows.append({"step": step, "begin": st[0]["ts"],
                         "forward": forward, "backward": backward, "optimizer": opt[0]["dur"],
                         "compute": forward + backward + opt[0]["dur"],
                         "exposed": wait, "hidden": overlap_length(ar, bw_lo, bw_hi),
                         "allreduce": union_length(ar)})
        per_rank[rank] = rows
    rows0 = per_rank[0][warmup:]
    if len(rows0) < 3:
        sys.exit(f"bench: only {len(rows0)} steps after the {warmup} warm-up steps; use more --steps")
    intervals = [b["begin"] - a["begin"] for a, b in zip(rows0, rows0[1:])]
    med = lambda key: statistics.median(r[key] for rank in per_rank.values() for r in rank[warmup:])
    step_us = statistics.median(intervals)
    out = {"step_ms": step_us / 1e3, "samples_per_s": global_batch / (step_us / 1e6)}
    for key in ("forward", "backward", "optimizer", "compute", "exposed", "hidden", "allreduce"):
        out[f"{key}_ms"] = med(key) / 1e3
    out["other_ms"] = max(0.0, out["step_ms"] - out["compute_ms"] - out["exposed_ms"])
    return out


MAIN_JOB = os.path.join(ROOT, "conf", "lenet5_fashion_mnist.toml")


def train_command(build, launch, threads, steps, global_batch, timeline, extra=(), run_file=MAIN_JOB):
    """tnt-launch LAUNCH... -- tnt-train: the main job (or run_file) for `steps` steps, with no
    validation, checkpoint or CSV; launch is e.g. ["-n", "2"]."""
    return [os.path.join(build, "bin", "tnt-launch")] + list(launch) + ["--",
            os.path.join(build, "bin", "tnt-train"), run_file,
            "--max-steps", str(steps), "--threads", str(threads), "--global-batch", str(global_batch),
            "--no-progress", "--validation-frequency", "0", "--test-size", "1", "--checkpoint-every-epochs", "0",
            "--checkpoint", "", "--csv", "", "--timeline", timeline] + list(extra)


def run_case(args, case, global_batch, workdir):
    timeline = os.path.join(workdir, f"t_{case['name']}_{global_batch}.json")
    launch = ["-n", str(case["ranks"])] + args.launch.split()
    cmd = train_command(args.build, launch, case["threads"], args.steps, global_batch, timeline,
                        case.get("extra", ()))
    env = dict(os.environ)
    env.pop(SKIP_VARIABLE, None)
    env.update(case.get("env", {}))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=workdir, env=env)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{p.stdout}")
    if case.get("env") and SKIP_VARIABLE not in p.stdout:
        sys.exit(f"bench: the run with {SKIP_VARIABLE}=1 did not warn that it skips the allreduce:\n{p.stdout}")
    with open(timeline) as f:
        return analyse(json.load(f), global_batch)


CASES = [
    {"name": "1x2", "label": "1 rank x 2 threads", "ranks": 1, "threads": 2},
    {"name": "1x1", "label": "1 rank x 1 thread", "ranks": 1, "threads": 1},
    {"name": "2x1", "label": "2 ranks x 1 thread", "ranks": 2, "threads": 1},
    {"name": "2x1skip", "label": "2 ranks x 1 thread, allreduce off", "ranks": 2, "threads": 1,
     "env": {SKIP_VARIABLE: "1"}},
]
NO_OVERLAP = {"name": "2x1nooverlap", "label": "2 ranks x 1 thread, --no-overlap", "ranks": 2, "threads": 1,
              "extra": ["--no-overlap"]}


def summarise(batch, results):
    sps = {name: r["samples_per_s"] for name, r in results.items()}
    return {"global_batch": batch,
            "allreduce_on_over_off": sps["2x1"] / sps["2x1skip"],
            "efficiency_vs_1x2": sps["2x1"] / sps["1x2"],
            "efficiency_vs_2_times_1x1": sps["2x1"] / (2 * sps["1x1"]),
            "efficiency_vs_1x2_allreduce_off": sps["2x1skip"] / sps["1x2"]}


def print_tables(args, cases, table, summaries):
    for batch in args.batches:
        print(f"\nLeNet-5 / Fashion-MNIST, global batch {batch}, {args.steps} steps, median of {args.repeats} "
              f"alternating rounds (per run: median over steps {WARMUP}+ and ranks); times in ms per step")
        head = (f"{'case':<36} {'samples/s':>9} {'step':>6} {'fwd':>6} {'bwd':>6} {'opt':>6} {'exposed':>7} "
                f"{'other':>6} {'hidden':>6} {'allred':>6}   rounds (samples/s)")
        print(head)
        print("-" * len(head))
        for case in cases:
            r = table[batch][case["name"]]
            print(f"{case['label']:<36} {r['samples_per_s']:>9.0f} {r['step_ms']:>6.2f} {r['forward_ms']:>6.2f} "
                  f"{r['backward_ms']:>6.2f} {r['optimizer_ms']:>6.2f} {r['exposed_ms']:>7.2f} {r['other_ms']:>6.2f} "
                  f"{r['hidden_ms']:>6.2f} {r['allreduce_ms']:>6.2f}   {r['samples_per_s_rounds']}")
        s = summaries[batch]
        print(f"2 ranks: allreduce on / off = {s['allreduce_on_over_off']:.3f}; strong-scaling efficiency vs 1 rank x "
              f"2 threads = {s['efficiency_vs_1x2']:.3f} (allreduce off: {s['efficiency_vs_1x2_allreduce_off']:.3f}),"
              f" vs 2 x (1 rank x 1 thread) = {s['efficiency_vs_2_times_1x1']:.3f}")
    print("\nexposed = waiting for the allreduce after backward; other = step - compute - exposed; hidden = allreduce "
          "time under backward; allred = union of the step's allreduce spans")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--batches", default="64,256", help="global batch sizes, comma-separated")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3, help="alternating rounds")
    ap.add_argument("--no-overlap-case", action="store_true")
    ap.add_argument("--launch", default="", metavar="ARGS",
                    help="more tnt-launch arguments for every run, e.g. '--bind-to none'")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        args.batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        ap.error(f"--batches: '{args.batches}' is not a comma-separated list of whole numbers")
    if args.steps <= WARMUP + 3 or args.repeats < 1 or min(args.batches) < 2:
        ap.error(f"need --steps > {WARMUP + 3}, --repeats >= 1 and global batches >= 2")
    cases = CASES + ([NO_OVERLAP] if args.no_overlap_case else [])
    runs = {b: {c["name"]: [] for c in cases} for b in args.batches}
    with tempfile.TemporaryDirectory() as workdir:
        for round_ in range(args.repeats):
            for batch in args.batches:
                for case in cases:
                    if not args.json:
                        print(f"round {round_ + 1}/{args.repeats}: batch {batch}, {case['label']}", file=sys.stderr)
                    runs[batch][case["name"]].append(run_case(args, case, batch, workdir))
    table, summaries = {}, {}
    for batch in args.batches:
        table[batch] = {}
        for case in cases:
            rs = runs[batch][case["name"]]
            row = {key: statistics.median(r[key] for r in rs) for key in rs[0]}
            row["samples_per_s_rounds"] = [round(r["samples_per_s"]) for r in rs]
            table[batch][case["name"]] = row
        summaries[batch] = summarise(batch, table[batch])
    if args.json:
        print(json.dumps({"job": "lenet5_fashion_mnist", "steps": args.steps, "repeats": args.repeats,
                          "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
                          "results": [{"global_batch": b, "case": c["label"], **table[b][c["name"]]}
                                      for b in args.batches for c in cases],
                          "summary": [summaries[b] for b in args.batches]}, indent=2))
        return
    print_tables(args, cases, table, summaries)


if __name__ == "__main__":
    main()
