#!/usr/bin/env python3
"""bf16 gradients on the wire against fp32 (issue 26, item 6) across namespace hosts (2 by
default) x 1 rank whose links are shaped with tc tbf (cluster_bench.py's Cluster:
tests/launcher/netns_hosts.sh).

  sudo bench/cluster/compression_bench.py [--build build] [--hosts 2] [--rounds 3] [--rate 0.5] [--steps 300]
                                          [--model main|resnet20] [-x VAR=VALUE]... [--quick] [--json]

Each round runs the job once with fp32 gradients and once with --gradient-compression bf16, the
order swapped every round so that neither always runs first; the table gives medians over rounds.
  samples/s      from the --timeline (bench/trainer/bench_trainer.py: global batch / median step
                 interval on rank 0, warm-up steps skipped)
  exposed        the step's wait for its allreduces after backward (median over steps and ranks)
  counted B/step the bytes of gradients each rank hands to the allreduces per optimizer step, as
                 tnt-train counts them ("gradient allreduce: N bytes per optimizer step")
  wire B/step    what both hosts' eth0 sent during the job (/sys/class/net/eth0/statistics/
                 tx_bytes in each namespace), per optimizer step: gradients plus TCP/IP headers,
                 ssh, start-up, the metrics' allreduces and the timeline's gathering
--model main is the README's main job (LeNet-5 on Fashion-MNIST, global batch 64, 1 thread per
rank); resnet20 is conf/resnet20_synthetic.toml (global batch 128, 270 k parameters).
Namespaces, sshd and qdiscs are removed at the end, on failure and on Ctrl-C or SIGTERM.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "trainer"))
sys.path.insert(0, HERE)
import bench_trainer  # noqa: E402
import cluster_bench  # noqa: E402

MODELS = {
    "main": {"run_file": bench_trainer.MAIN_JOB, "global_batch": 64, "steps": 300, "warmup": 10},
    "resnet20": {"run_file": os.path.join(ROOT, "conf", "resnet20_synthetic.toml"), "global_batch": 128,
                 "steps": 16, "warmup": 3},
}
COMPRESSIONS = {"fp32": [], "bf16": ["--gradient-compression", "bf16"]}


def tx_bytes(cluster):
    total = 0
    for ns, _ in cluster.hosts:
        p = subprocess.run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/eth0/statistics/tx_bytes"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True)
        total += int(p.stdout)
    return total


def measure(args, cluster, compression, workdir):
    timeline = os.path.join(workdir, f"timeline_{compression}.json")
    launch = cluster.launch(1, "default") + [w for v in args.export for w in ("-x", v)]
    cmd = bench_trainer.train_command(args.build, launch, 1, args.steps, args.global_batch, timeline,
                                      COMPRESSIONS[compression], run_file=args.run_file)
    before = tx_bytes(cluster)
    out = cluster_bench.run_job(cmd)
    sent = tx_bytes(cluster) - before
    m = re.search(r"gradient allreduce: (\d+) bytes per optimizer step on each rank \((\w+)\)", out)
    if not m or m.group(2) != compression:
        raise RuntimeError(f"tnt-train did not count its {compression} gradient bytes:\n{out[-2000:]}")
    with open(timeline) as f:
        figures = bench_trainer.analyse(json.load(f), args.global_batch, warmup=args.warmup)
    return {"samples_per_s": figures["samples_per_s"], "step_ms": figures["step_ms"],
            "exposed_ms": figures["exposed_ms"], "counted_bytes_per_step": int(m.group(1)),
            "wire_bytes_per_step": sent / args.steps}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--hosts", type=int, default=2, help="namespace hosts, one rank each: the ring's length")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=0.5, help="tbf rate of every host's link in Gbit/s (0: unshaped)")
    ap.add_argument("--model", choices=sorted(MODELS), default="main")
    ap.add_argument("--steps", type=int, help="optimizer steps per job (default: the model's)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1 round, few steps")
    ap.add_argument("-x", dest="export", action="append", default=[], metavar="VAR=VALUE",
                    help="set this variable on every rank (tnt-launch -x), e.g. TNT_SMALL_ALLREDUCE_KB=1024")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    model = MODELS[args.model]
    args.run_file, args.global_batch, args.warmup = model["run_file"], model["global_batch"], model["warmup"]
    args.steps = args.steps or model["steps"]
    if args.quick:
        args.rounds, args.steps, args.warmup = 1, min(args.steps, 16), min(args.warmup, 4)
    if args.rounds < 1 or args.rate < 0 or args.steps < args.warmup + 4 or args.hosts < 2:
        ap.error(f"need --hosts >= 2, --rounds >= 1, --rate >= 0 and --steps >= {args.warmup + 4} (warm-up + 4)")
    return args


def summarise(args, runs):
    rows = {}
    for compression, rs in runs.items():
        row = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        row["samples_per_s_rounds"] = [round(r["samples_per_s"], 1) for r in rs]
        rows[compression] = row
    return {"model": args.model, "run_file": os.path.relpath(args.run_file, ROOT), "hosts": args.hosts, "ranks_per_host": 1,
            "rate_gbit_s": args.rate or None, "rounds": args.rounds, "steps": args.steps,
            "global_batch": args.global_batch, "environment": args.export, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average": os.getloadavg(), "results": rows,
            "bf16_speedup": rows["bf16"]["samples_per_s"] / rows["fp32"]["samples_per_s"]}


def print_text(doc):
    rate = f"tbf {doc['rate_gbit_s']} Gbit/s" if doc["rate_gbit_s"] else "unshaped"
    print(f"{doc['model']} ({doc['run_file']}), global batch {doc['global_batch']}, {doc['hosts']} hosts x 1 rank, {rate}, "
          f"{doc['steps']} steps, medians of {doc['rounds']} alternating rounds ({doc['date']}, "
          f"load {doc['load_average'][0]:.2f}){''.join(' ' + v for v in doc['environment'])}")
    print(f"{'gradients':<10}{'samples/s':>11}{'step ms':>9}{'exposed ms':>12}{'counted B/step':>16}"
          f"{'wire B/step':>13}  rounds (samples/s)")
    for name, r in doc["results"].items():
        print(f"{name:<10}{r['samples_per_s']:>11.1f}{r['step_ms']:>9.2f}{r['exposed_ms']:>12.2f}"
              f"{r['counted_bytes_per_step']:>16.0f}{r['wire_bytes_per_step']:>13.0f}  {r['samples_per_s_rounds']}")
    print(f"bf16 / fp32 samples/s: {doc['bf16_speedup']:.3f}")


def main():
    args = parse_args()
    args.build = os.path.abspath(args.build)
    cluster_bench.preflight(args, programs=("tnt-launch", "tnt-train"))
    signal.signal(signal.SIGINT, cluster_bench.on_signal)
    signal.signal(signal.SIGTERM, cluster_bench.on_signal)
    cluster = cluster_bench.Cluster(args.hosts)
    runs = {name: [] for name in COMPRESSIONS}
    try:
        cluster.up()
        cluster.shape(args.rate * cluster_bench.GBIT if args.rate else None)
        with tempfile.TemporaryDirectory(dir=cluster.tmp) as workdir:
            for round_ in range(args.rounds):
                order = list(COMPRESSIONS) if round_ % 2 == 0 else list(reversed(COMPRESSIONS))
                for compression in order:
                    if not args.json:
                        print(f"round {round_ + 1}/{args.rounds}: {compression}", file=sys.stderr, flush=True)
                    runs[compression].append(measure(args, cluster, compression, workdir))
    except (cluster_bench.Interrupted, RuntimeError, subprocess.SubprocessError) as e:
        cluster_bench.fail(str(e), 130 if isinstance(e, cluster_bench.Interrupted) else 1)
    finally:
        # A second Ctrl-C must not stop the teardown half-way.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cluster.down()
    doc = summarise(args, runs)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print_text(doc)


if __name__ == "__main__":
    main()
