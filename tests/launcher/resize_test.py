#!/usr/bin/env python3
"""tnt-launch --min-ranks (issue 26, resize; Note [Restarts] in launcher/src/launch.cpp) on two
network-namespace hosts of 2 ranks each (netns_hosts.sh: each its own address and sshd).

  resize_test.py shrink|below_min --launch L --train T --ckpt C --hosts-script S --workdir D

tnt-train trains LeNet-5 with a checkpoint every 5 steps under --max-restarts 1; once it has
trained a few steps, the second host's link is set down, as if its network went away.
  shrink:    with --min-ranks 2 the restart leaves that host out and finishes on the first host's
             2 ranks, exit 0, with the weights of a resume by hand on 2 ranks from the checkpoint
             the restart started from (within 1e-5).
  below_min: with --min-ranks 3 the restart cannot go on: the job exits non-zero naming the host.
  comeback:  the hostfile is read again at each restart, so a host can come back: a program that
             fails at the first two starts, the link down during the first; restart 1 runs on 2
             ranks without the host; the link comes back up and the hostfile gives the first host
             a third slot, and restart 2 runs on all 5 ranks.
Exit 77 (skipped) where namespaces cannot be made.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time

MAX_STEPS = 80
# As tests/trainer/trainer_integration.py: LeNet-5 on synthetic data, 16 steps an epoch.
TRAIN = [
    "--model", "lenet5", "--dataset", "synthetic", "--shape", "1", "28", "28",
    "--num-classes", "10", "--train-size", "1000", "--test-size", "0",
    "--global-batch", "64", "--seed", "7", "--optimizer", "sgd", "--learning-rate", "0.01",
    "--momentum", "0.9", "--no-progress", "--validation-frequency", "0",
    "--epochs", "10", "--max-steps", str(MAX_STEPS), "--checkpoint-every-steps", "5",
]
DOWN_AFTER_STEP = 20  # steps trained before the link goes down
JOB_LIMIT_S = 75      # the whole job, restart included


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


def skip(message):
    print("skipped: " + message, flush=True)
    sys.exit(77)


def sh(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def check_namespaces_possible():
    if os.geteuid() != 0:
        skip("needs root to create network namespaces and run sshd")
    if not os.access("/usr/sbin/sshd", os.X_OK) or not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        skip("needs /usr/sbin/sshd, ssh and ssh-keygen (Debian: openssh-server, openssh-client)")
    probe = f"trprobe{os.getpid() % 100000}"
    if sh(["ip", "netns", "add", probe]).returncode != 0:
        skip("cannot create network namespaces here (ip netns add failed)")
    sh(["ip", "netns", "del", probe])


def run_job(args, hosts_dir, hostfile, min_ranks, link, checkpoint, copy_at_restart):
    """Runs the job, sets `link` down after DOWN_AFTER_STEP steps; copies the checkpoint to
    `copy_at_restart` when the launcher says it restarts (the old job has ended then, and the new
    one has not started: the file is the one the restart resumes from). Returns (exit, output)."""
    cmd = [args.launch, "--hostfile", hostfile, "--ssh-command", f"ssh -F {hosts_dir}/ssh_config",
           "--ssh-connect-timeout", "2", "--stop-grace", "1", "--max-restarts", "1", "--min-ranks", str(min_ranks),
           "-x", "TNT_PEER_TIMEOUT_S=5", "--", args.train] + TRAIN + ["--checkpoint", checkpoint, "--print-steps"]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=args.workdir)
    timer = threading.Timer(JOB_LIMIT_S, p.kill)
    timer.start()
    out, steps, down_at = [], 0, None
    try:
        for line in p.stdout:
            out.append(line)
            if down_at is None and re.match(r"^epoch \d+ step \d+ ", line):
                steps += 1
                if steps == DOWN_AFTER_STEP:
                    sh(["ip", "link", "set", link, "down"], check=True)
                    down_at = time.monotonic()
                    print(f"link {link} set down after {steps} steps", flush=True)
            if copy_at_restart and "restart 1 of 1" in line and os.path.exists(checkpoint):
                shutil.copyfile(checkpoint, copy_at_restart)
        code = p.wait()
    finally:
        timer.cancel()
    text = "".join(out)
    print("\n".join(l for l in text.splitlines() if "restart" in l or "error" in l.lower())[-3000:], flush=True)
    if code == -9:
        print(text[-4000:])
        fail(f"the job did not end within {JOB_LIMIT_S} s")
    if down_at is None:
        print(text[-4000:])
        fail(f"the job ended (exit {code}) before {DOWN_AFTER_STEP} steps: the link was never set down")
    print(f"the job ended {time.monotonic() - down_at:.1f} s after the link went down, exit {code}", flush=True)
    return code, text


def comeback(args, hosts_dir, hostfile, link, addrs):
    program = os.path.join(args.workdir, "fails_twice.sh")
    with open(program, "w") as f:
        f.write('#!/bin/sh\necho "started restart=$TNT_RESTART_COUNT size=$TNT_SIZE"\n'
                '[ "$TNT_RESTART_COUNT" = 2 ] && exit 0\nsleep 3\nexit 1\n')
    os.chmod(program, 0o755)
    cmd = [args.launch, "--hostfile", hostfile, "--ssh-command", f"ssh -F {hosts_dir}/ssh_config",
           "--ssh-connect-timeout", "2", "--stop-grace", "1", "--max-restarts", "2", "--min-ranks", "2",
           "--output-on-all-devices", "--", program]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=args.workdir)
    timer = threading.Timer(JOB_LIMIT_S, p.kill)
    timer.start()
    out = []
    try:
        for line in p.stdout:
            out.append(line)
            if "started restart=0" in line and len([l for l in out if "started restart=0" in l]) == 4:
                sh(["ip", "link", "set", link, "down"], check=True)
            if "started restart=1" in line:
                sh(["ip", "link", "set", link, "up"], check=True)
                with open(hostfile, "w") as f:
                    f.write(f"{addrs[0]} slots=3\n{addrs[1]} slots=2\n")
        code = p.wait()
    finally:
        timer.cancel()
    text = "".join(out)
    print(text[-3000:], flush=True)
    if code != 0 or f"restart 1 of 2: the job failed (rank" not in text or \
            f"starting it again on 2 rank(s) without host(s) {addrs[1]}" not in text or \
            "starting it again on 5 rank(s)" not in text or \
            text.split("restart 2 of 2", 1)[1].count("started restart=2 size=5") != 5:
        fail(f"the host did not come back at the second restart (exit {code})")
    print("PASS")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("test", choices=["shrink", "below_min", "comeback"])
    parser.add_argument("--launch", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--hosts-script", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    check_namespaces_possible()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    tag = str(os.getpid() % 100000)
    hosts_dir = os.path.join(args.workdir, "hosts")
    try:
        up = sh([args.hosts_script, "up", hosts_dir, tag, "2"])
        hosts = [l.split() for l in up.stdout.splitlines() if l.startswith("host ")]
        if up.returncode != 0 or len(hosts) != 2:
            fail("setting up 2 namespace hosts:\n" + up.stdout)
        addrs = [h[2] for h in hosts]
        hostfile = os.path.join(args.workdir, "hostfile")
        with open(hostfile, "w") as f:
            f.write(f"{addrs[0]} slots=2\n{addrs[1]} slots=2\n")
        link = f"t{tag}v2"  # the bridge's end of the second host's link (netns_hosts.sh)
        checkpoint = os.path.join(args.workdir, "resized.ckpt")
        if args.test == "comeback":
            comeback(args, hosts_dir, hostfile, link, addrs)
            return
        if args.test == "below_min":
            code, text = run_job(args, hosts_dir, hostfile, 3, link, checkpoint, None)
            if code == 0 or f"cannot reach host(s) {addrs[1]}" not in text or "fewer than --min-ranks 3" not in text:
                print(text[-4000:])
                fail(f"below --min-ranks the job did not end non-zero naming host {addrs[1]} (exit {code})")
            print("PASS")
            return
        resumed_from = os.path.join(args.workdir, "resumed_from.ckpt")
        code, text = run_job(args, hosts_dir, hostfile, 2, link, checkpoint, resumed_from)
        want = f"on 2 rank(s) without host(s) {addrs[1]}, which cannot be reached"
        if code != 0 or want not in text:
            print(text[-4000:])
            fail(f"the job did not restart on the first host's 2 ranks and finish (exit {code})")
        if not os.path.exists(resumed_from):
            fail("no checkpoint was there when the job restarted")
        after = text.split("restart 1 of 1", 1)[1]
        m = re.search(r"resuming from \S+ at epoch \d+, step \d+ \(optimizer step (\d+)\)", after)
        if not m or not 0 < int(m.group(1)) < MAX_STEPS:
            fail("the restart did not resume from the checkpoint")
        # Weights alone cannot tell a resume from a start over (both give the same weights): the
        # restart must train only the steps after its checkpoint.
        resumed_at = int(m.group(1))
        steps_after = len(re.findall(r"^epoch \d+ step \d+ ", after, re.M))
        print(f"the restart resumed at optimizer step {resumed_at} on 2 ranks and trained {steps_after} steps",
              flush=True)
        if steps_after != MAX_STEPS - resumed_at:
            fail(f"the restart trained {steps_after} steps, not the {MAX_STEPS - resumed_at} after its checkpoint")
        by_hand = os.path.join(args.workdir, "by_hand.ckpt")
        shutil.copyfile(resumed_from, by_hand)
        cmd = [args.launch, "-n", "2", "--", args.train] + TRAIN + ["--checkpoint", by_hand, "--resume", by_hand]
        print("$ " + " ".join(cmd), flush=True)
        p = sh(cmd, cwd=args.workdir, timeout=60)
        if p.returncode != 0:
            print(p.stdout[-3000:])
            fail(f"the resume by hand on 2 ranks exited with {p.returncode}")
        d = sh([args.ckpt, "diff", checkpoint, by_hand, "--rtol", "0", "--atol", "1e-5"])
        print(f"resized job against a resume by hand on 2 ranks: {d.stdout.strip()}", flush=True)
        if d.returncode != 0:
            fail("the resized job's weights differ from the resume by hand by more than 1e-5")
        print("PASS")
    finally:
        sh([args.hosts_script, "down", hosts_dir, tag, "2"])


if __name__ == "__main__":
    main()
