#!/usr/bin/env python3
"""A cluster in a box: hosts as network namespaces on a private bridge, each with its own sshd
(tests/launcher/netns_hosts.sh), links shaped with tc tbf; tnt's allreduce and the main job
measured across them, an alpha-beta model fitted to the measurements and projected to larger
clusters. bench/cluster/README.md states what is measured and the model's assumptions.

  sudo bench/cluster/cluster_bench.py [--build build] [--rounds 3] [--quick] [--json]
                                      [--no-resnet] [--compute-speedup 1]

Measured, in rounds that alternate every configuration (medians over rounds):
  2 hosts x 1 rank: tnt-bench-allreduce and the main job (LeNet-5, 1 thread per rank) at each
    tbf rate (0.25, 0.5, 1, 2 Gbit/s) and unshaped
  2 hosts x 2 ranks: the same, flat ring against hierarchical (TNT_ALLREDUCE_ALGORITHM), unshaped
    and at 1 Gbit/s
  once: ResNet-50's compute time per sample on 1 rank x 1 thread (--no-resnet skips it)
Everything it starts (namespaces, sshd, tc, jobs) is stopped at the end, on failure and on
Ctrl-C or SIGTERM. Needs root (namespaces), iproute2's tc and openssh-server.
"""
import argparse
import json
import os
import re
import shutil
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
import alpha_beta  # noqa: E402
import bench_trainer  # noqa: E402
import report  # noqa: E402

NETNS_HOSTS = os.path.join(ROOT, "tests", "launcher", "netns_hosts.sh")
ALGORITHM_VARIABLE = "TNT_ALLREDUCE_ALGORITHM"
JOB_TIMEOUT_S = 600  # every job's bound; a run that takes longer is a failure, never a hang
GBIT = 1e9


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"interrupted by {signal.Signals(signum).name}")


def fail(message, status=1):
    print(f"cluster_bench: {message}", file=sys.stderr)
    sys.exit(status)


def run_job(cmd, env=None):
    """Runs a job in its own session, bounded; on any exception (Ctrl-C included) stops it:
    SIGTERM (tnt-launch forwards it to every rank), SIGKILL of the group 10 s later."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=JOB_TIMEOUT_S)
    except BaseException:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        raise
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {p.returncode}:\n{out[-4000:]}")
    return out


class Cluster:
    """N namespace hosts; up() and down() wrap netns_hosts.sh, shape() sets every host's egress."""

    def __init__(self, hosts):
        self.n = hosts
        self.tmp = tempfile.mkdtemp(prefix="tnt-cluster-")
        self.dir = os.path.join(self.tmp, "h")
        self.tag = str(os.getpid() % 100000)
        self.hosts = []  # (namespace, address)
        self.started = False

    def up(self):
        self.started = True
        p = subprocess.run(["sh", NETNS_HOSTS, "up", self.dir, self.tag, str(self.n)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"netns_hosts.sh up failed:\n{p.stdout}")
        self.hosts = [(w[1], w[2]) for w in (line.split() for line in p.stdout.splitlines()) if w and w[0] == "host"]
        if len(self.hosts) != self.n:
            raise RuntimeError(f"netns_hosts.sh gave {len(self.hosts)} hosts, expected {self.n}:\n{p.stdout}")
        self.ssh = f"ssh -F {self.dir}/ssh_config"

    def down(self):
        if self.started:
            subprocess.run(["sh", NETNS_HOSTS, "down", self.dir, self.tag, str(self.n)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def shape(self, rate_bps):
        """tbf on every host's eth0 egress (each direction of each link), or none (unshaped)."""
        for ns, _ in self.hosts:
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if rate_bps is None:
                continue
            # The bucket must hold a timer tick's worth of bytes at the rate (and a GSO packet).
            burst = max(128 << 10, int(rate_bps / 8 / 250))
            cmd = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
                   f"{int(rate_bps)}bit", "burst", str(burst), "latency", "20ms"]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed: {p.stdout.strip()}")

    def launch(self, per_host, algorithm):
        hostfile = os.path.join(self.dir, f"hosts{per_host}")
        with open(hostfile, "w") as f:
            f.write("".join(f"{addr}\n" for _, addr in self.hosts))
        args = ["--hostfile", hostfile, "--n-per-node", str(per_host), "--ssh-command", self.ssh]
        if algorithm != "default":
            args += ["-x", f"{ALGORITHM_VARIABLE}={algorithm}"]
        if os.environ.get("TNT_DATA_DIR"):
            args += ["-x", f"TNT_DATA_DIR={os.environ['TNT_DATA_DIR']}"]
        return args


def algorithm_supported(build):
    """Whether this build reads TNT_ALLREDUCE_ALGORITHM (its name is in the binaries that would)."""
    files = [os.path.join(build, "bin", "tnt-bench-allreduce")]
    for d in ("lib", "collectives", "transport"):
        for base, _, names in os.walk(os.path.join(build, d)):
            files += [os.path.join(base, n) for n in names if ".so" in n or n.endswith(".a")]
    for path in files:
        try:
            with open(path, "rb") as f:
                if ALGORITHM_VARIABLE.encode() in f.read():
                    return True
        except OSError:
            pass
    return False


def measure_allreduce(args, cluster, per_host, algorithm, max_bytes):
    cmd = ([os.path.join(args.build, "bin", "tnt-launch")] + cluster.launch(per_host, algorithm) +
           ["--", os.path.join(args.build, "bin", "tnt-bench-allreduce"), "--json", "--min", "4K",
            "--max", str(max_bytes), "--seconds", str(args.seconds)])
    out = run_job(cmd)
    line = next((x for x in out.splitlines() if x.startswith("{")), None)
    if line is None:
        raise RuntimeError(f"no JSON from tnt-bench-allreduce:\n{out[-2000:]}")
    return {r["bytes"]: r["median_us"] * 1e-6 for r in json.loads(line)["results"]}


def measure_job(args, cluster, per_host, algorithm, workdir):
    timeline = os.path.join(workdir, f"timeline_{per_host}_{algorithm}.json")
    cmd = bench_trainer.train_command(args.build, cluster.launch(per_host, algorithm), 1, args.steps,
                                      args.global_batch, timeline)
    out = run_job(cmd)
    with open(timeline) as f:
        figures = bench_trainer.analyse(json.load(f), args.global_batch, warmup=args.warmup)
    m = re.search(r"\((\d+) parameters\)", out)
    figures["parameters"] = int(m.group(1)) if m else None
    return figures


def measure_resnet(args, workdir):
    """ResNet-50's compute per sample and parameter count: 1 local rank x 1 thread, a few steps."""
    timeline = os.path.join(workdir, "timeline_resnet50.json")
    batch = 2
    cmd = bench_trainer.train_command(args.build, ["-n", "1"], 1, 5, batch, timeline,
                                      run_file=os.path.join(ROOT, "conf", "resnet50_synthetic.toml"))
    out = run_job(cmd)
    with open(timeline) as f:
        figures = bench_trainer.analyse(json.load(f), batch, warmup=2)
    m = re.search(r"\((\d+) parameters\)", out)
    if not m:
        raise RuntimeError(f"tnt-train did not print its parameter count:\n{out[-2000:]}")
    return {"parameters": int(m.group(1)), "batch": batch,
            **{k: figures[f"{k}_ms"] / 1e3 / batch for k in ("forward", "backward", "optimizer")}}


def plan(args, algorithms):
    """The configurations of one round: (hosts x per_host, algorithm, rate or None, max bytes)."""
    sweep = [None] + [r * GBIT for r in args.rates]
    configs = [{"per_host": 1, "algorithm": "default", "rate_bps": r, "max_bytes": args.max_unshaped if r is None
                else args.max_shaped} for r in sweep]
    for algorithm in algorithms:
        for r in (None, 1 * GBIT):
            configs.append({"per_host": 2, "algorithm": algorithm, "rate_bps": r, "max_bytes": args.max_shaped})
    return configs


def measure(args, cluster, configs, workdir):
    samples = {i: {"allreduce": [], "job": []} for i in range(len(configs))}
    for round_ in range(args.rounds):
        for i, c in enumerate(configs):
            label = report.config_label(c)
            if not args.json:
                print(f"round {round_ + 1}/{args.rounds}: {label}", file=sys.stderr, flush=True)
            cluster.shape(c["rate_bps"])
            samples[i]["allreduce"].append(measure_allreduce(args, cluster, c["per_host"], c["algorithm"],
                                                             c["max_bytes"]))
            samples[i]["job"].append(measure_job(args, cluster, c["per_host"], c["algorithm"], workdir))
    cluster.shape(None)
    results = []
    for i, c in enumerate(configs):
        runs = samples[i]["allreduce"]
        seconds = {b: statistics.median(r[b] for r in runs) for b in runs[0]}
        jobs = samples[i]["job"]
        job = {k: statistics.median(j[k] for j in jobs) for k in jobs[0] if k != "parameters"}
        job["samples_per_s_rounds"] = [round(j["samples_per_s"]) for j in jobs]
        job["parameters"] = jobs[0]["parameters"]
        results.append({**c, "seconds": seconds, "seconds_rounds": {b: [r[b] for r in runs] for b in runs[0]},
                        "job": job})
    return results


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1 round, 2 rates, small sizes, few steps")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-resnet", action="store_true", help="skip measuring ResNet-50's compute (no projection)")
    ap.add_argument("--compute-speedup", type=float, default=1.0,
                    help="projected hosts compute this many times faster than one rank here")
    args = ap.parse_args()
    args.rates, args.steps, args.global_batch, args.warmup = [0.25, 0.5, 1, 2], 150, 64, 10
    args.seconds, args.max_unshaped, args.max_shaped = 0.3, 64 << 20, 16 << 20
    if args.quick:
        args.rounds, args.rates, args.steps, args.warmup, args.no_resnet = 1, [0.25], 16, 4, True
        args.seconds, args.max_unshaped, args.max_shaped = 0.02, 4 << 20, 4 << 20
    if args.rounds < 1 or args.compute_speedup <= 0:
        ap.error("need --rounds >= 1 and --compute-speedup > 0")
    return args


def preflight(args, programs=("tnt-launch", "tnt-bench-allreduce", "tnt-train")):
    if os.geteuid() != 0:
        fail("needs root: it creates network namespaces, runs sshd in them and shapes their links", 77)
    for tool in ("ip", "tc", "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            fail(f"'{tool}' not found (apt-get install iproute2 openssh-client openssh-server)", 77)
    if not os.path.exists("/usr/sbin/sshd"):
        fail("/usr/sbin/sshd not found (apt-get install openssh-server)", 77)
    for program in programs:
        if not os.access(os.path.join(args.build, "bin", program), os.X_OK):
            fail(f"{args.build}/bin/{program} is missing: build first (bash scripts/build.sh)", 2)
    probe = f"tprobe{os.getpid() % 100000}"
    if subprocess.run(["ip", "netns", "add", probe], stderr=subprocess.DEVNULL).returncode != 0:
        fail("cannot create network namespaces here (ip netns add failed)", 77)
    subprocess.run(["ip", "netns", "del", probe], stderr=subprocess.DEVNULL)


def main():
    args = parse_args()
    args.build = os.path.abspath(args.build)
    preflight(args)
    supported = algorithm_supported(args.build)
    algorithms = ["ring", "hierarchical"] if supported else ["default"]
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    cluster = Cluster(2)
    started = time.time()
    try:
        cluster.up()
        with tempfile.TemporaryDirectory(dir=cluster.tmp) as workdir:
            results = measure(args, cluster, plan(args, algorithms), workdir)
            resnet = None if args.no_resnet else measure_resnet(args, workdir)
    except (Interrupted, RuntimeError, subprocess.TimeoutExpired) as e:
        fail(str(e), 130 if isinstance(e, Interrupted) else 1)
    finally:
        # A second Ctrl-C must not stop the teardown half-way.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cluster.down()
    try:
        doc = report.build(args, results, resnet, supported, time.time() - started)
    except ValueError as e:
        fail(f"fitting the model: {e}")
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        report.print_text(doc)


if __name__ == "__main__":
    main()
