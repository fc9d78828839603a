#!/usr/bin/env python3
"""Optimizer-state sharding (issue 26, item 8; Note [Optimizer-state sharding] in
actors/trainer/src/optimizer_shard.h), on the Transformer tutorial model (conf/transformer_en_de.toml,
Adam) with pairs of at most 10 characters so that a run takes seconds.

  shard_optimizer.py weights|resume --launch L --train T --ckpt C --workdir D --conf CONF_DIR

weights: 50 steps on 2 ranks sharded == unsharded within 1e-6 (weights and optimizer state, as
tnt-ckpt diff compares them), each rank's optimizer state is half the unsharded one's in bytes,
global_clipnorm sharded == unsharded within 1e-6 (and clips: it differs from the run without),
and what sharding cannot apply to is refused (exit 2, naming the settings).
resume: a sharded 2-rank checkpoint after 25 steps resumes to 50 on 1 and on 3 ranks, sharded,
equal within 1e-6 to the same resume unsharded; a NaN in rank 1's shard only
(TNT_TEST_NAN_GRADIENT_AT) stops both ranks at the same step.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


def outcome(args, ranks, extra, env=None, timeout=150):
    cmd = [args.launch, "-n", str(ranks), "--log-on-all-devices", "--", args.train,
           os.path.join(args.conf, "transformer_en_de.toml"),
           "--no-progress", "--csv", "", "--set", "translate.sentences=0", "--set", "data.max_chars=10"] + extra
    print("$ " + " ".join([f"{k}={v}" for k, v in (env or {}).items()] + cmd), flush=True)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                           cwd=args.workdir, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired as e:
        print(e.stdout or "")
        fail(f"tnt-train on {ranks} rank(s) did not end within {timeout} s")
    return p.returncode, p.stdout


def run(args, ranks, extra, env=None):
    code, out = outcome(args, ranks, extra, env)
    if code != 0:
        print(out)
        fail(f"tnt-train on {ranks} rank(s) exited with {code}")
    return out


def path(args, name):
    return os.path.join(args.workdir, name)


def same(args, a, b, what, tolerance=1e-6):
    p = subprocess.run([args.ckpt, "diff", a, b, "--rtol", "0", "--atol", str(tolerance)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = p.stdout.strip().splitlines()
    print(f"{what}: " + "\n".join(lines[:3]) + (f"\n({len(lines) - 3} more lines)" if len(lines) > 3 else ""))
    return p.returncode == 0


def state_bytes(out):
    """rank -> the optimizer state bytes it logged."""
    return {int(r): int(b) for r, b in re.findall(r"rank (\d+)\] INFO optimizer state: (\d+) bytes", out)}


def weights(args):
    steps = ["--max-steps", "50"]
    plain = run(args, 2, steps + ["--checkpoint", path(args, "plain.ckpt")])
    sharded = run(args, 2, steps + ["--checkpoint", path(args, "sharded.ckpt"), "--shard-optimizer"])
    if not same(args, path(args, "plain.ckpt"), path(args, "sharded.ckpt"), "50 steps, sharded vs not"):
        fail("--shard-optimizer on 2 ranks does not give the unsharded weights within 1e-6")
    whole, halves = state_bytes(plain), state_bytes(sharded)
    print(f"optimizer state bytes per rank: unsharded {whole}, sharded {halves}")
    if len(whole) != 2 or len(halves) != 2 or len(set(whole.values())) != 1:
        fail("every rank should log its optimizer state bytes once")
    full = whole[0]
    if sum(halves.values()) != full or max(halves.values()) > (full // 4 + 1) // 2 * 4:
        fail(f"the sharded ranks' states {halves} are not the halves of {full} bytes")

    clip = ["--set", "optimizer.global_clipnorm=0.05"]
    run(args, 2, steps + clip + ["--checkpoint", path(args, "clip.ckpt")])
    run(args, 2, steps + clip + ["--checkpoint", path(args, "clip_sharded.ckpt"), "--shard-optimizer"])
    if not same(args, path(args, "clip.ckpt"), path(args, "clip_sharded.ckpt"), "global_clipnorm, sharded vs not"):
        fail("global_clipnorm with --shard-optimizer does not give the unsharded weights within 1e-6")
    if same(args, path(args, "plain.ckpt"), path(args, "clip.ckpt"), "global_clipnorm 0.05 vs none"):
        fail("global_clipnorm 0.05 changed nothing: the test does not see clipping")

    for extra, expected in [(["--optimizer", "sgd"], "keeps no state to shard"),
                            (["--set", "optimizer.clipnorm=1"], "clipnorm scales each parameter"),
                            (["--gradient-compression", "bf16"], "gradient_compression bf16")]:
        code, out = outcome(args, 2, ["--max-steps", "1", "--checkpoint", "", "--shard-optimizer"] + extra)
        if code != 2 or expected not in out or "--shard-optimizer" not in out:
            print(out[-2000:])
            fail(f"--shard-optimizer with {' '.join(extra)} was not refused naming both (exit {code})")
        print(f"--shard-optimizer {' '.join(extra)}: refused, exit 2")


def resume(args):
    start = path(args, "start.ckpt")
    run(args, 2, ["--max-steps", "25", "--checkpoint", start, "--shard-optimizer"])
    for ranks in (1, 3):
        ends = {}
        for mode, extra in [("sharded", ["--shard-optimizer"]), ("unsharded", [])]:
            ends[mode] = path(args, f"resumed_{ranks}_{mode}.ckpt")
            shutil.copyfile(start, ends[mode])
            run(args, ranks, ["--max-steps", "50", "--checkpoint", ends[mode], "--resume", ends[mode]] + extra)
        if not same(args, ends["sharded"], ends["unsharded"], f"resumed on {ranks} rank(s), sharded vs not"):
            fail(f"a sharded 2-rank checkpoint resumed on {ranks} rank(s) sharded differs from the unsharded resume")

    # Rank 1 owns the second half of the flat layout: its NaN is in its shard only, and only the
    # flags that every rank exchanges before the update can stop rank 0.
    code, out = outcome(args, 2, ["--max-steps", "30", "--print-steps", "--checkpoint", "", "--shard-optimizer"],
                        env={"TNT_TEST_NAN_GRADIENT_AT": "1:10"})
    found = dict(re.findall(r"\[tnt [^\]]*?(?: rank (\d+))?\] ERROR tnt-train failed: (.*)$", out, re.M))
    print(f"NaN in rank 1's shard at step 10: exit {code}, errors {found}")
    if code == 0 or len(found) != 2:
        print(out[-3000:])
        fail("a NaN in rank 1's shard did not stop both ranks with an error")
    named = {m.group(1) if (m := re.search(r" at step (\d+) ", e)) else None for e in found.values()}
    if None in named or len(named) != 1 or not all("NaN" in e for e in found.values()):
        fail(f"the ranks do not name one step and NaN: {found}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("test", choices=["weights", "resume"])
    parser.add_argument("--conf", required=True)
    parser.add_argument("--launch", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    globals()[args.test](args)
    print("PASS")


if __name__ == "__main__":
    main()
