#!/usr/bin/env python3
"""Multi-process tests of tnt-train, run through tnt-launch (see tests/trainer/CMakeLists.txt).

  trainer_integration.py reproducibility|dropout_reproducibility|resume|callback_resume|failure|
      skip_gradient_allreduce|nan_guard|input_shape|preemption|export_pairs|bf16_reproducibility|precision_refused --launch L --train T --ckpt C --compare W --workdir D [--conf CONF_DIR]
"""
import argparse
import csv
import os
import re
import signal
import shutil
import subprocess
import sys
import time

# LeNet-5 on 1000 synthetic 28x28 samples: batch 64 leaves a partial last batch of 40 (3 ranks
# take 14, 13, 13), and 64 is not a multiple of 3.
COMMON = [
    "--model", "lenet5", "--dataset", "synthetic", "--shape", "1", "28", "28",
    "--num-classes", "10", "--train-size", "1000", "--test-size", "0",
    "--global-batch", "64", "--seed", "7", "--optimizer", "sgd", "--learning-rate", "0.01",
    "--no-progress", "--validation-frequency", "0",
]
# Learning rate 0.01: at 0.05 (and at 0.02 on 3 ranks) this run is chaotic from epoch 3 on, and
# a last-bit difference in one step's gradient sum grows to a visibly different loss curve
# (measured: 3e-5 .. 1e-2 relative weight differences after 50 steps); at 0.01 it is not
# (3e-7 and 4e-7 on 2 and 3 ranks). The 1e-5 bound below is the issue's, unchanged.
# Plain SGD for the comparison across rank counts: summing a batch's gradient in another order
# changes the last bits, and with momentum 0.9 this network's first 50 steps amplify such
# differences ~10x every few steps (measured: 1e-6 at step 30, 1e-2 at step 50), which says
# nothing about the trainer. Resume and failure runs use momentum (optimizer state matters).
MOMENTUM = ["--momentum", "0.9"]


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


def run(args, ranks, extra, timeout=120, env=None):
    cmd = [args.launch, "-n", str(ranks), "--", args.train] + COMMON + extra
    print("$ " + " ".join([f"{k}={v}" for k, v in (env or {}).items()] + cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, cwd=args.workdir, env={**os.environ, **(env or {})})
    if p.returncode != 0:
        print(p.stdout)
        fail(f"tnt-train on {ranks} rank(s) exited with {p.returncode}")
    return p.stdout


def step_losses(output):
    losses = {}
    for m in re.finditer(r"^epoch (\d+) step (\d+) loss (\S+) accuracy (\S+)$", output, re.M):
        losses[(int(m.group(1)), int(m.group(2)))] = float(m.group(3))
    return [losses[k] for k in sorted(losses)]


def ckpt_diff(args, a, b, rtol, atol):
    p = subprocess.run([args.ckpt, "diff", a, b, "--rtol", str(rtol), "--atol", str(atol)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def significant(x, digits=4):
    return float(f"{x:.{digits - 1}e}")


def reproducibility(args):
    outputs, ckpts = {}, {}
    for ranks, tag in [(1, "1"), (2, "2"), (3, "3"), (2, "2b")]:
        ckpts[tag] = os.path.join(args.workdir, f"repro_{tag}.ckpt")
        outputs[tag] = run(args, ranks, ["--epochs", "4", "--max-steps", "50", "--print-steps",
                                         "--checkpoint", ckpts[tag]])
    base = step_losses(outputs["1"])
    if len(base) != 50:
        fail(f"expected 50 printed step losses on 1 rank, got {len(base)}")
    for tag in ["2", "3", "2b"]:
        losses = step_losses(outputs[tag])
        if len(losses) != 50:
            fail(f"expected 50 printed step losses on run {tag}, got {len(losses)}")
        worst = max(abs(a - b) / abs(a) for a, b in zip(base, losses))
        mismatched = [i + 1 for i, (a, b) in enumerate(zip(base, losses))
                      if significant(a) != significant(b)]
        print(f"run {tag}: largest relative step-loss difference to 1 rank {worst:.2e}; "
              f"steps differing in 4 significant digits: {mismatched}")
        if mismatched:
            fail(f"run {tag}: step losses differ from the 1-rank run at 4 significant digits")
    for tag in ["2", "3"]:
        p = subprocess.run([args.compare, ckpts["1"], ckpts[tag], "1e-5"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        code, text = p.returncode, p.stdout
        print(f"weights, 1 rank vs {tag} ranks: {text.strip()}")
        if code != 0:
            fail(f"weights after 50 steps differ between 1 and {tag} ranks beyond 1e-5 relative")
    # 961 samples: the last batch of each epoch has 1 sample, so ranks 1 and 2 of 3 have none
    # and contribute zeros to every allreduce of that step.
    lone = {}
    for ranks in (1, 3):
        lone[ranks] = os.path.join(args.workdir, f"repro_lone_{ranks}.ckpt")
        out = run(args, ranks, ["--train-size", "961", "--epochs", "2", "--checkpoint", lone[ranks],
                                "--print-steps"])
        if len(step_losses(out)) != 32:
            fail(f"expected 32 steps over 961 samples on {ranks} rank(s)")
    p = subprocess.run([args.compare, lone[1], lone[3], "1e-5"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    print(f"961 samples (ranks without samples in the last step), 1 vs 3 ranks: {p.stdout.strip()}")
    if p.returncode != 0:
        fail("ranks without samples in a step change the result")
    code, text = ckpt_diff(args, ckpts["2"], ckpts["2b"], 0, 0)
    print(f"two runs on 2 ranks (bitwise): {text.strip()}")
    if code != 0:
        fail("two runs with the same number of ranks are not bitwise identical")


# An MLP with Dropout: its masks are keyed by (seed, step, global sample index, element)
# (compute/include/tnt/compute/model.h, Note [Dropout masks]), so they do not depend on the
# number of ranks, and a resumed run draws the masks of the steps it resumes at.
DROPOUT_MODEL = """name = "mlp_dropout"
input = [1, 28, 28]
[[layers]]
type = "flatten"
[[layers]]
type = "dense"
units = 64
[[layers]]
type = "activation"
function = "tanh"
[[layers]]
type = "dropout"
rate = 0.4
seed = 3
[[layers]]
type = "dense"
units = 10
"""


def thirty_steps_over_ranks(args, what, extra, rtol):
    """30 steps on 1, 2 and 3 ranks, and again on 2: weights within rtol of the 1-rank run's per
    tensor, and the two 2-rank runs bitwise equal. Returns the checkpoints by run."""
    ckpts = {}
    for ranks, tag in [(1, "1"), (2, "2"), (3, "3"), (2, "2b")]:
        ckpts[tag] = os.path.join(args.workdir, f"{what}_{tag}.ckpt")
        run(args, ranks, extra + ["--epochs", "2", "--max-steps", "30", "--checkpoint", ckpts[tag]])
    for tag in ["2", "3"]:
        p = subprocess.run([args.compare, ckpts["1"], ckpts[tag], rtol], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        print(f"{what}: weights after 30 steps, 1 rank vs {tag} ranks: {p.stdout.strip()}")
        if p.returncode != 0:
            fail(f"{what}: weights after 30 steps differ between 1 and {tag} ranks beyond {rtol} relative")
    code, text = ckpt_diff(args, ckpts["2"], ckpts["2b"], 0, 0)
    print(f"{what}: two runs on 2 ranks (bitwise): {text.strip()}")
    if code != 0:
        fail(f"{what}: two runs with the same number of ranks are not bitwise identical")
    return ckpts


def dropout_reproducibility(args):
    model = os.path.join(args.workdir, "mlp_dropout.toml")
    with open(model, "w") as f:
        f.write(DROPOUT_MODEL)
    ckpts = thirty_steps_over_ranks(args, "dropout", ["--model", model], "1e-5")
    split = os.path.join(args.workdir, "dropout_split.ckpt")
    if os.path.exists(split):
        os.remove(split)
    run(args, 2, ["--model", model, "--epochs", "2", "--max-steps", "21", "--checkpoint", split])
    run(args, 2, ["--model", model, "--epochs", "2", "--max-steps", "30", "--checkpoint", split, "--resume", split])
    code, text = ckpt_diff(args, ckpts["2"], split, 0, 0)
    print(f"dropout model, 30 steps straight vs 21 + resume (bitwise): {text.strip()}")
    if code != 0:
        fail("with dropout, a resumed run does not end bitwise identical to one straight through")


def resume(args):
    straight = os.path.join(args.workdir, "resume_straight.ckpt")
    split = os.path.join(args.workdir, "resume_split.ckpt")
    for path in (straight, split):
        if os.path.exists(path):
            os.remove(path)
    run(args, 2, MOMENTUM + ["--epochs", "2", "--checkpoint", straight, "--checkpoint-every-epochs", "1"])
    run(args, 2, MOMENTUM + ["--epochs", "1", "--checkpoint", split, "--checkpoint-every-epochs", "1"])
    out = run(args, 2, MOMENTUM + ["--epochs", "2", "--checkpoint", split,
                                   "--checkpoint-every-epochs", "1", "--resume", split])
    if "resuming from" not in out:
        print(out)
        fail("the resumed run did not say it resumed")
    code, text = ckpt_diff(args, straight, split, 0, 0)
    print(f"2 epochs straight vs 1 + resume 1 (bitwise): {text.strip()}")
    if code != 0:
        fail("resumed training does not end bitwise identical to training straight through")
    # The trained weights, evaluated without training, on 3 ranks; predictions from the master.
    predictions = os.path.join(args.workdir, "predictions.csv")
    out = run(args, 3, MOMENTUM + ["--epochs", "2", "--test-size", "200", "--evaluate", straight,
                                   "--predict", predictions])
    if not re.search(r"^test accuracy: 0\.\d+$", out, re.M) or "trained" in out:
        print(out)
        fail("--evaluate did not evaluate without training")
    with open(predictions) as f:
        rows = f.read().splitlines()
    if len(rows) != 201 or not rows[0].startswith("index,label,predicted,p0"):
        fail(f"--predict wrote {len(rows)} lines, expected a header and 200 samples")
    # Mid-epoch: stop after 21 steps (epoch 2, step 5 of 16), resume to the end of epoch 2.
    mid = os.path.join(args.workdir, "resume_mid.ckpt")
    if os.path.exists(mid):
        os.remove(mid)
    run(args, 2, MOMENTUM + ["--epochs", "2", "--max-steps", "21", "--checkpoint", mid])
    run(args, 2, MOMENTUM + ["--epochs", "2", "--checkpoint", mid, "--resume", mid])
    code, text = ckpt_diff(args, straight, mid, 0, 0)
    print(f"2 epochs straight vs 21 steps + resume (bitwise): {text.strip()}")
    if code != 0:
        fail("training resumed mid-epoch does not end bitwise identical to training straight through")


# Issue 29, point 4: 320 samples (5 steps an epoch), validated on 100 every epoch. The straight
# run's val_loss (2 ranks, measured 2026-11-27): 2.309, 2.200, 2.144, then falling by < 0.2 an
# epoch too: with min_delta 0.2 and patience 2, epochs 2 and 3 do not improve on epoch 1, so the
# callbacks act after epoch 3, one epoch after the resumed run starts. Without the callbacks'
# states a resumed run starts with no best value and no wait, and acts later or never.
CALLBACK_RUN = ["--train-size", "320", "--test-size", "100", "--validation-frequency", "1"]
CALLBACK_SETTINGS = {
    "reduce_lr_on_plateau": ["patience=2", "min_delta=0.2", "factor=0.5"],
    "early_stopping": ["patience=2", "min_delta=0.2", "restore_best_weights=true"],
}


def callback_sets(name):
    return [arg for setting in CALLBACK_SETTINGS[name] for arg in ("--set", f"callbacks.{name}.{setting}")]


def epochs_logged(path):
    """epoch, loss, val_loss and learning_rate of each row of a CSVLogger file, as written."""
    with open(path) as f:
        return [(r["epoch"], r["loss"], r["val_loss"], r["learning_rate"]) for r in csv.DictReader(f)]


def callback_resume(args):
    for name in CALLBACK_SETTINGS:
        paths = {k: os.path.join(args.workdir, f"{name}_{k}") for k in
                 ("straight.ckpt", "split.ckpt", "straight.csv", "split.csv")}
        for path in paths.values():
            if os.path.exists(path):
                os.remove(path)
        common = MOMENTUM + CALLBACK_RUN + callback_sets(name)
        run(args, 2, common + ["--epochs", "5", "--checkpoint", paths["straight.ckpt"], "--csv", paths["straight.csv"]])
        run(args, 2, common + ["--epochs", "2", "--checkpoint", paths["split.ckpt"], "--csv", paths["split.csv"]])
        out = run(args, 2, common + ["--epochs", "5", "--checkpoint", paths["split.ckpt"], "--csv", paths["split.csv"],
                                     "--resume", paths["split.ckpt"]])
        if "resuming from" not in out or "WARNING" in out:
            print(out)
            fail(f"{name}: the run did not resume, or warned")
        straight, split = epochs_logged(paths["straight.csv"]), epochs_logged(paths["split.csv"])
        rates = [row[3] for row in straight]
        print(f"{name}: straight run: {len(straight)} epochs at rates {rates}")
        print(f"{name}: 2 epochs + resume:  {len(split)} epochs at rates {[row[3] for row in split]}")
        # Else the test proves nothing: the callback must act after the resumed run has begun.
        if name == "reduce_lr_on_plateau" and len(set(rates[2:]) - {rates[0]}) == 0:
            fail(f"{name}: the straight run's rate never changes after epoch 2: {rates}")
        if name == "early_stopping" and not 2 < len(straight) < 5:
            fail(f"{name}: the straight run stopped after epoch {len(straight)}, not between epochs 3 and 4")
        if split != straight:
            fail(f"{name}: the resumed run's epochs {split} differ from the straight run's {straight}")
        code, text = ckpt_diff(args, paths["straight.ckpt"], paths["split.ckpt"], 0, 0)
        print(f"{name}: 5 epochs straight vs 2 + resume (bitwise, callback state included): {text.strip()}")
        if code != 0:
            fail(f"{name}: the resumed run does not end bitwise identical to the straight run")
    # A saved state that the resumed run has no callback for, and a callback without a saved
    # state: each a warning naming it; the run goes on.
    split = os.path.join(args.workdir, "reduce_lr_on_plateau_split.ckpt")
    out = run(args, 2, MOMENTUM + CALLBACK_RUN + callback_sets("early_stopping") +
              ["--epochs", "6", "--checkpoint", split, "--resume", split])
    for warning in ("holds the state of callback 'ReduceLROnPlateau', which this run does not have",
                    "holds no state of callback 'EarlyStopping': it starts afresh"):
        if warning not in out:
            print(out)
            fail(f"no warning: {warning}")
    print("a dropped and a new callback are warned about")


def rank_pid(tag, rank):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == "tnt-train" and f"TNT_TEST_TAG={tag}".encode() in env and \
                f"TNT_RANK={rank}".encode() in env:
            return int(pid)
    return None


def failure(args):
    ckpt = os.path.join(args.workdir, "failure.ckpt")
    if os.path.exists(ckpt):
        os.remove(ckpt)
    tag = f"failure-{os.getpid()}"
    cmd = [args.launch, "-n", "3", "-x", f"TNT_TEST_TAG={tag}", "--", args.train] + COMMON + MOMENTUM + [
        "--train-size", "200000", "--epochs", "1", "--checkpoint", ckpt,
        "--checkpoint-every-steps", "5"]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         cwd=args.workdir)
    try:
        deadline = time.time() + 60
        while not os.path.exists(ckpt):
            if p.poll() is not None or time.time() > deadline:
                print(p.communicate()[0])
                fail("no checkpoint appeared within 60 s")
            time.sleep(0.05)
        time.sleep(0.3)  # mid-epoch, between checkpoints
        victim = rank_pid(tag, 1)
        if victim is None:
            fail("rank 1's process not found")
        os.kill(victim, signal.SIGKILL)
        killed = time.time()
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            fail("tnt-launch still running 10 s after rank 1 was killed")
        elapsed = time.time() - killed
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    print(out)
    print(f"tnt-launch exited with {p.returncode} {elapsed:.2f} s after rank 1 was SIGKILLed")
    if p.returncode == 0:
        fail("tnt-launch exited 0 after a rank was killed")
    for r in (0, 2):
        if rank_pid(tag, r) is not None:
            fail(f"rank {r} still running")
    if not re.search(r"rank 1\b", out):
        fail("nothing names the lost rank 1")
    # Either tnt-launch sees the SIGKILL first and names rank 1, or a survivor notices the lost
    # connection first and exits 1 with an error naming rank 1 (which tnt-launch relays). Every
    # error a survivor logs must name rank 1.
    launcher_named = re.search(r"tnt-launch: error: rank 1 .*killed by SIGKILL", out)
    survivors = re.findall(r"\[tnt [^\]]* rank [02]\] ERROR .*$", out, re.M)
    for line in survivors:
        if not re.search(r"\brank 1\b", line):
            fail("a surviving rank reported an error that does not name rank 1: " + line)
    if not launcher_named and not survivors:
        fail("neither tnt-launch nor a surviving rank names the lost rank 1")
    print(f"tnt-launch named rank 1: {bool(launcher_named)}; "
          f"{len(survivors)} survivor error line(s), all naming rank 1")
    q = subprocess.run([args.ckpt, "info", ckpt], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    print(q.stdout.splitlines()[0:6])
    if q.returncode != 0:
        fail("the last checkpoint on disk does not load: " + q.stdout)


# The benchmark-only switch TNT_BENCH_SKIP_GRADIENT_ALLREDUCE (bench/trainer): it warns, on one
# rank it changes nothing (the allreduce of one rank is the identity), and on two ranks each rank
# steps with its own half of the gradient, so the run departs from the summed one.
def skip_gradient_allreduce(args):
    skip = {"TNT_BENCH_SKIP_GRADIENT_ALLREDUCE": "1"}
    ckpts = {}
    outputs = {}
    for ranks, tag, env in [(1, "1", None), (1, "1skip", skip), (2, "2", None), (2, "2skip", skip)]:
        ckpts[tag] = os.path.join(args.workdir, f"skip_{tag}.ckpt")
        outputs[tag] = run(args, ranks, ["--epochs", "1", "--max-steps", "12", "--print-steps",
                                         "--checkpoint", ckpts[tag]], env=env)
    for tag in ["1skip", "2skip"]:
        if "WARNING" not in outputs[tag] or "weights diverge" not in outputs[tag]:
            print(outputs[tag])
            fail(f"run {tag}: no WARNING that the ranks' weights diverge")
    for tag in ["1", "2"]:
        if "TNT_BENCH_SKIP_GRADIENT_ALLREDUCE" in outputs[tag]:
            fail(f"run {tag}: warned about the switch without it")
    code, text = ckpt_diff(args, ckpts["1"], ckpts["1skip"], 0, 0)
    print(f"1 rank, with and without the switch (bitwise): {text.strip()}")
    if code != 0:
        fail("on one rank the switch changed the result")
    both, alone = step_losses(outputs["2"]), step_losses(outputs["2skip"])
    if len(both) != 12 or len(alone) != 12:
        fail(f"expected 12 printed step losses, got {len(both)} and {len(alone)}")
    print(f"2 ranks, step losses summed: {both}\n2 ranks, step losses skipped: {alone}")
    if both[0] != alone[0]:
        fail("the first step's loss (same weights on every rank) differs with the switch")
    if both[-1] == alone[-1]:
        fail("on two ranks the switch did not change the run: the gradients were still summed")


def outcome(cmd, args, timeout=180):
    """Runs a command that may fail; returns (exit status, output)."""
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       cwd=args.workdir)
    return p.returncode, p.stdout


# The run: LeNet-5 on Fashion-MNIST at a learning rate of 1e6 diverges within a few steps.
def nan_guard(args):
    conf = os.path.join(args.conf, "lenet5_fashion_mnist.toml")
    common = [conf, "--learning-rate", "1e6", "--optimizer", "sgd", "--schedule", "constant", "--no-progress",
              "--print-steps", "--checkpoint", os.path.join(args.workdir, "nan.ckpt"),
              "--csv", os.path.join(args.workdir, "nan.csv")]
    for ranks in (1, 2):
        cmd = [args.train] + common if ranks == 1 else [args.launch, "-n", "2", "--log-on-all-devices", "--",
                                                        args.train] + common
        start = time.time()
        code, out = outcome(cmd, args)
        elapsed = time.time() - start
        steps = step_losses(out)
        # rank -> its error (tnt-launch may repeat a failed rank's last lines)
        found = dict(re.findall(r"\[tnt [^\]]*?(?: rank (\d+))?\] ERROR tnt-train failed: (.*)$", out, re.M))
        errors = list(found.values())
        print(f"{ranks} rank(s): exit status {code} after {elapsed:.1f} s and {len(steps)} step(s); errors: {errors}")
        if code == 0:
            print(out)
            fail(f"a run whose loss is NaN exited 0 on {ranks} rank(s)")
        if len(errors) != ranks:
            print(out)
            fail(f"expected an error from each of the {ranks} rank(s), got {len(errors)}")
        named = {re.search(r" at step (\d+) ", e).group(1) if re.search(r" at step (\d+) ", e) else None
                 for e in errors}
        if None in named or len(named) != 1:
            fail(f"the errors do not all name one step: {errors}")
        step = int(named.pop())
        if step > 20 or len(steps) > 20:
            fail(f"stopped at step {step} after {len(steps)} printed steps: expected within 20")
        if not all("NaN" in e for e in errors):
            fail("the error does not say NaN: " + errors[0])
    code, out = outcome([args.train] + common + ["--allow-nan", "--max-steps", "25"], args)
    if code != 0 or len(step_losses(out)) != 25:
        print(out)
        fail("with --allow-nan the run did not train on to --max-steps")
    print("with --allow-nan: 25 steps, exit status 0")


def write_idx(path, magic, dims, payload):
    with open(path, "wb") as f:
        f.write(magic.to_bytes(4, "big"))
        for d in dims:
            f.write(d.to_bytes(4, "big"))
        f.write(payload)


# The case: train images of 32x32, a test split of 28x28. Refused before the first step.
def input_shape(args):
    folder = os.path.join(args.workdir, "mixed_shapes")
    os.makedirs(folder, exist_ok=True)
    for prefix, n, side in (("train", 64, 32), ("t10k", 16, 28)):
        write_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte"), 0x803, [n, side, side],
                  bytes((i * 7) % 256 for i in range(n * side * side)))
        write_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), 0x801, [n], bytes(i % 10 for i in range(n)))
    code, out = outcome([args.train, "--dataset", "mnist", "--data-path", folder, "--global-batch", "16",
                         "--epochs", "1", "--no-progress", "--print-steps"], args)
    print(out)
    if code == 0:
        fail("a test split of another shape was accepted")
    if step_losses(out):
        fail("training began before the test split was found wrong")
    for needed in ("the test split has samples of 1x28x28", "takes 1x32x32", "built for the train split",
                   "1x32x32"):
        if needed not in out:
            fail(f"the error does not say '{needed}'")


def run_until_preempted(args, cmd, tag, stop):
    """Starts a 2-rank run, calls stop(process) once step 20 is printed; returns (status, output)."""
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=args.workdir)
    lines = []
    try:
        for line in p.stdout:
            lines.append(line)
            if line.startswith("epoch 1 step 20 "):
                stop(p)
                break
        else:
            fail("the run ended before step 20: " + "".join(lines))
        rest, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    out = "".join(lines) + rest
    for r in (0, 1):
        if rank_pid(tag, r) is not None:
            fail(f"rank {r} still running after tnt-launch exited")
    return p.returncode, out


# Preemption (Note [Preemption]): a signal to one rank, or to tnt-launch, mid-epoch stops both
# ranks at one step; the checkpoint resumes (resume auto) to the weights of an uninterrupted run.
def preemption(args):
    run_args = COMMON + MOMENTUM + ["--train-size", "4000", "--epochs", "2", "--resume", "auto"]  # 63 steps/epoch
    reference = os.path.join(args.workdir, "preempt_reference.ckpt")
    if os.path.exists(reference):
        os.remove(reference)
    out = run(args, 2, run_args + ["--checkpoint", reference])
    if "no checkpoint at" not in out:
        fail("resume auto without a checkpoint did not say it starts fresh")

    def to_rank_1(tag):
        return lambda p: os.kill(rank_pid(tag, 1), signal.SIGTERM)

    def to_launcher(p):
        p.send_signal(signal.SIGUSR1)

    for name, stop in (("SIGTERM to rank 1", to_rank_1), ("SIGUSR1 to tnt-launch", lambda tag: to_launcher)):
        ckpt = os.path.join(args.workdir, "preempted.ckpt")
        if os.path.exists(ckpt):
            os.remove(ckpt)
        tag = f"preempt-{os.getpid()}-{name.split()[0]}"
        cmd = [args.launch, "-n", "2", "--log-on-all-devices", "-x", f"TNT_TEST_TAG={tag}", "--", args.train] + run_args + [
            "--checkpoint", ckpt, "--print-steps"]
        code, out = run_until_preempted(args, cmd, tag, stop(tag))
        stops = re.findall(r"rank ([01])\] ERROR tnt-train stopped: preempted: .*every rank stopped after step "
                           r"(\d+) ", out)
        print(f"{name}: tnt-launch exited with {code}; ranks stopped: {stops}")
        if code != 3:
            print(out)
            fail(f"{name}: expected exit status 3 (preempted), got {code}")
        if sorted({r for r, _ in stops}) != ["0", "1"] or len({s for _, s in stops}) != 1:
            print(out)
            fail(f"{name}: both ranks must say they stopped, after the same step")
        info = subprocess.run([args.ckpt, "info", ckpt], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        print("\n".join(info.stdout.splitlines()[0:4]))
        if info.returncode != 0:
            fail(f"{name}: the checkpoint does not load: " + info.stdout)
        step = int(stops[0][1])
        if not 20 <= step < 63:
            fail(f"{name}: stopped after step {step}, expected in the first epoch after step 20")
        out = run(args, 2, run_args + ["--checkpoint", ckpt])
        if "resuming from" not in out:
            fail(f"{name}: resume auto did not resume")
        code, text = ckpt_diff(args, reference, ckpt, 0, 0)
        print(f"{name}: uninterrupted vs preempted after step {step} and resumed (bitwise): {text.strip()}")
        if code != 0:
            fail(f"{name}: the resumed run does not end bitwise equal to the uninterrupted one")


# The tiny Transformer, dropout on, through the Trainer API (seq2seq_probe.cpp: --train is the
# probe here): 30 steps of global batch 10 over 47 pairs of unequal lengths on 1, 2 and 3 ranks
# give the same weights within 1e-5 relative (the exact token mean over the global batch), and
# two runs on 2 ranks the same bits.
def seq2seq_reproducibility(args):
    outputs, ckpts = {}, {}
    for ranks, tag in [(1, "1"), (2, "2"), (3, "3"), (2, "2b")]:
        ckpts[tag] = os.path.join(args.workdir, f"seq2seq_{tag}.ckpt")
        cmd = [args.launch, "-n", str(ranks), "--", args.train, ckpts[tag], "30"]
        print("$ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                           cwd=args.workdir)
        if p.returncode != 0:
            print(p.stdout)
            fail(f"the seq2seq probe on {ranks} rank(s) exited with {p.returncode}")
        outputs[tag] = p.stdout
    base = step_losses(outputs["1"])
    if len(base) != 30:
        fail(f"expected 30 printed step losses on 1 rank, got {len(base)}")
    if not base[-1] < base[0]:
        fail(f"the loss did not fall in 30 steps: {base[0]} -> {base[-1]}")
    for tag in ["2", "3", "2b"]:
        losses = step_losses(outputs[tag])
        worst = max(abs(a - b) / abs(a) for a, b in zip(base, losses))
        print(f"run {tag}: largest relative step-loss difference to 1 rank {worst:.2e}")
        if len(losses) != 30 or worst > 1e-4:
            fail(f"run {tag}: step losses differ from the 1-rank run")
    for tag in ["2", "3"]:
        p = subprocess.run([args.compare, ckpts["1"], ckpts[tag], "1e-5"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        print(f"weights, 1 rank vs {tag} ranks: {p.stdout.strip()}")
        if p.returncode != 0:
            fail(f"weights after 30 steps differ between 1 and {tag} ranks beyond 1e-5 relative")
    code, text = ckpt_diff(args, ckpts["2"], ckpts["2b"], 0, 0)
    print(f"two runs on 2 ranks (bitwise): {text.strip()}")
    if code != 0:
        fail("two runs with the same number of ranks are not bitwise identical")
    translations = [line for line in outputs["3"].splitlines() if line.startswith("beam ")]
    print("\n".join(translations))
    if len(translations) != 2:
        fail("the probe printed no translations")


def export_pairs(args):
    """tnt-train --export-pairs writes the run's global batches and the test pairs as token ids
    (bench/transformer/torch_compare.py trains PyTorch on them), and --translations the decoded
    test pairs, the same ones tnt-train scores."""
    conf = os.path.join(args.conf, "transformer_en_de.toml")
    small = [args.train, conf, "--model", "transformer_tiny", "--global-batch", "16", "--max-steps", "4",
             "--no-progress", "--checkpoint", "", "--csv", "", "--set", "translate.sentences=20"]
    out = os.path.join(args.workdir, "export")
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run(small + ["--export-pairs", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    if p.returncode != 0:
        print(p.stdout)
        fail(f"--export-pairs exited with {p.returncode}")
    info = dict(line.split() for line in open(os.path.join(out, "info.txt")))
    if (info["steps"], info["global_batch"], info["pad"], info["bos"], info["eos"]) != ("4", "16", "0", "1", "2"):
        fail(f"info.txt: {info}")
    vocab = int(info["vocab_size"])
    rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(out, "train.tsv"), encoding="utf-8")]
    if [r[0] for r in rows] != [str(step) for step in range(4) for _ in range(16)]:
        fail("train.tsv does not hold 4 steps of 16 pairs in step order")
    for r in rows:
        ids = [int(t) for t in (r[1] + " " + r[2]).split()]
        if len(r) != 3 or not r[1] or not r[2] or min(ids) < 4 or max(ids) >= vocab:
            fail(f"train.tsv: bad row {r}")
    test = [line.rstrip("\n").split("\t") for line in open(os.path.join(out, "test.tsv"), encoding="utf-8")]
    if len(test) < 1000 or any(len(t) != 4 for t in test):
        fail(f"test.tsv: {len(test)} rows, or a row without 4 fields")
    if os.path.getsize(os.path.join(out, "vocab.txt")) == 0:
        fail("no vocabulary")
    translations = os.path.join(args.workdir, "translations.tsv")
    p = subprocess.run(small + ["--translations", translations], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    if p.returncode != 0:
        print(p.stdout)
        fail(f"--translations exited with {p.returncode}")
    trained = re.search(r"trained 4 steps in [0-9.]+ s: [0-9.]+ sentence pairs/s, ([0-9]+) target tokens/s", p.stdout)
    if not trained or int(trained.group(1)) <= 0:
        print(p.stdout)
        fail("tnt-train did not report its target tokens/s")
    decoded = [line.rstrip("\n").split("\t") for line in open(translations, encoding="utf-8")]
    expected = [test[k * len(test) // 20][:2] for k in range(20)]
    if len(decoded) != 20 or [d[:2] for d in decoded] != expected or any(len(d) != 3 for d in decoded):
        fail(f"--translations: {decoded[:3]} ... is not the 20 test pairs spread over the split, with a translation")
    print(f"exported 4 steps x 16 pairs, {len(test)} test pairs; 20 translations, e.g. {decoded[0]}")


SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests


def bf16_refused(args):
    """Whether this CPU refuses bf16; tnt-train says why and exits 2 where it does."""
    p = subprocess.run([args.train] + COMMON + ["--precision", "bf16", "--max-steps", "1"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, cwd=args.workdir)
    if p.returncode == 0:
        return None
    if p.returncode == 2 and "--precision bf16) is refused" in p.stdout:
        return p.stdout.strip()
    print(p.stdout)
    fail(f"tnt-train --precision bf16 exited with {p.returncode}")


# Note [Mixed precision] (compute/include/tnt/compute/runtime.h): the 30 steps on 1, 2
# and 3 ranks within 1e-2 relative per tensor, and bitwise equal runs on the same ranks. The
# ranks round the same elements the same way; only the fp32 sums over ranks differ in order, and
# such a last-bit difference can move a rounded operand by a whole bf16 step (2^-8).
def bf16_reproducibility(args):
    why = bf16_refused(args)
    if why:
        print(f"SKIP: {why}")
        sys.exit(SKIP)
    ckpts = thirty_steps_over_ranks(args, "bf16", ["--precision", "bf16"], "1e-2")
    # Checkpoints hold the fp32 master weights either way: an fp32 run resumes a bf16 one.
    out = run(args, 1, ["--epochs", "2", "--max-steps", "31", "--resume", ckpts["1"], "--print-steps"])
    if len(step_losses(out)) != 1:
        print(out)
        fail("an fp32 run did not resume the bf16 checkpoint at its step 30 for one more step")
    print("an fp32 run resumed the bf16 checkpoint for its step 31")


def precision_refused(args):
    """bf16 where oneDNN may not use a bf16 ISA (ONEDNN_MAX_CPU_ISA): a clear error, exit 2."""
    p = subprocess.run([args.launch, "-n", "2", "--", args.train] + COMMON + ["--precision", "bf16"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, cwd=args.workdir,
                       env={**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"})
    print(p.stdout.strip()[-600:])
    if p.returncode == 0 or "--precision bf16) is refused: this CPU has no native bf16" not in p.stdout:
        fail(f"bf16 without a bf16 ISA was not refused clearly (exit {p.returncode})")
    p = subprocess.run([args.train] + COMMON + ["--precision", "fp8"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60, cwd=args.workdir)
    if p.returncode != 2 or "'fp8' is not a precision (fp32 or bf16)" not in p.stdout:
        print(p.stdout)
        fail(f"--precision fp8 was not refused clearly (exit {p.returncode})")


def accumulation(args):
    """Issue 26, item 1 (Note [Gradient accumulation]): --accumulate 4 at global batch 256 on 2
    ranks gives the plain run's weights within 1e-5 after 50 steps; a global batch that does not
    cut into ranks x 4 equal micro-steps is refused (exit 2). accumulation_timeline checks the
    timeline."""
    # Learning rate 0.002: at COMMON's 0.01 this run (batch 256, 5 epochs of 2560 samples) turns
    # chaotic, and 1 against 2 plain ranks already differ by 1e-3 after 50 steps (measured
    # 2026-11-27); at 0.002 both differences stay near 1e-6.
    steps = ["--global-batch", "256", "--train-size", "2560", "--epochs", "5", "--max-steps", "50",
             "--learning-rate", "0.002"]
    plain = os.path.join(args.workdir, "plain.ckpt")
    accumulated = os.path.join(args.workdir, "accumulated.ckpt")
    run(args, 2, steps + ["--checkpoint", plain])
    run(args, 2, steps + ["--checkpoint", accumulated, "--accumulate", "4"])
    code, text = ckpt_diff(args, plain, accumulated, 1e-5, 1e-5)
    print(f"weights after 50 steps, plain vs --accumulate 4: {text.strip()}")
    if code != 0:
        fail("--accumulate 4 does not give the plain run's weights within 1e-5")
    cmd = [args.launch, "-n", "2", "--", args.train] + COMMON + steps + ["--accumulate", "3"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                       cwd=args.workdir)
    print(p.stdout.strip()[-400:])
    if p.returncode != 2 or "does not cut into 2 rank(s) x 3 micro-steps" not in p.stdout:
        fail(f"--accumulate 3 at global batch 256 on 2 ranks was not refused clearly (exit {p.returncode})")


def accumulation_timeline(args):
    """Issue 26, item 1: with --accumulate 4 at global batch 256 on 2 ranks the timeline shows, per
    step and rank, micro-steps 0..3 of 32 samples each, each with one forward and one backward
    span, and every bucket allreduce of the step begins after micro-step 3's backward began: the
    earlier micro-steps keep their gradients and send nothing."""
    import json
    steps_run, ranks, parts, global_batch = 6, 2, 4, 256
    timeline = os.path.join(args.workdir, "accumulated.json")
    run(args, ranks, ["--global-batch", str(global_batch), "--train-size", "1024", "--epochs", "2",
                      "--max-steps", str(steps_run), "--accumulate", str(parts), "--timeline", timeline])
    with open(timeline) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    by_step = {}
    for e in events:
        by_step.setdefault((e["pid"], e["args"]["step"]), []).append(e)
    expected = {(rank, step) for rank in range(ranks) for step in range(steps_run)}
    if set(by_step) != expected:
        fail(f"the timeline's (rank, step) pairs are {sorted(by_step)}, expected {sorted(expected)}")
    samples = global_batch // (ranks * parts)
    for (rank, step), es in sorted(by_step.items()):
        where = f"rank {rank} step {step}"
        for name in ["forward", "backward"]:
            spans = sorted((e for e in es if e["name"] == name), key=lambda e: e["args"].get("micro_step", -1))
            seen = [(e["args"].get("micro_step"), e["args"].get("samples")) for e in spans]
            if seen != [(k, samples) for k in range(parts)]:
                fail(f"{where}: {name} spans (micro-step, samples) are {seen}, expected micro-steps 0..{parts - 1} "
                     f"of {samples} samples each")
        last_backward = next(e["ts"] for e in es if e["name"] == "backward" and e["args"]["micro_step"] == parts - 1)
        reduces = sorted((e["ts"], e["name"]) for e in es if e["cat"] == "allreduce")
        if not reduces:
            fail(f"{where}: no bucket allreduce span")
        early = [name for ts, name in reduces if ts < last_backward]
        if early:
            fail(f"{where}: {early} began before micro-step {parts - 1}'s backward (at {last_backward} us): "
                 f"allreduces ran in an earlier micro-step")
    print(f"timeline: {len(by_step)} (rank, step) pairs, each {parts} forward + {parts} backward spans of "
          f"{samples} samples, every bucket allreduce after micro-step {parts - 1}'s backward began")


def bf16_gradients(args):
    """Issue 26, item 6 (Note [bf16 gradients on the wire]): --gradient-compression bf16 on 2 ranks
    hands exactly half the bytes of gradients to the allreduces (fit's count), trains to weights
    near the fp32 run's but not bitwise equal to them (the rounding happened), and an unknown
    compression is refused (exit 2)."""
    steps = ["--max-steps", "20"]
    fp32 = os.path.join(args.workdir, "fp32.ckpt")
    bf16 = os.path.join(args.workdir, "bf16.ckpt")
    sent = {}
    for name, path, extra in [("fp32", fp32, []), ("bf16", bf16, ["--gradient-compression", "bf16"])]:
        out = run(args, 2, steps + ["--checkpoint", path] + extra)
        m = re.search(r"gradient allreduce: (\d+) bytes per optimizer step on each rank \((\w+)\)", out)
        if not m or m.group(2) != name:
            print(out)
            fail(f"the {name} run did not count its gradient bytes")
        sent[name] = int(m.group(1))
    print(f"gradient bytes per step and rank: fp32 {sent['fp32']}, bf16 {sent['bf16']}")
    if sent["bf16"] * 2 != sent["fp32"]:
        fail("bf16 gradients did not halve the bytes on the wire")
    code, text = ckpt_diff(args, fp32, bf16, 0, 0)
    if code == 0:
        fail("bf16 gradients trained bitwise the fp32 run's weights: the buckets were not rounded")
    p = subprocess.run([args.compare, fp32, bf16, "0.2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    print(f"weights after 20 steps, fp32 vs bf16 gradients: {p.stdout.strip()}")
    if p.returncode != 0:
        fail("bf16 gradients moved the weights far from the fp32 run's")
    p = subprocess.run([args.train] + COMMON + ["--gradient-compression", "fp8"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60, cwd=args.workdir)
    if p.returncode != 2 or "'fp8': expected none or bf16" not in p.stdout:
        print(p.stdout)
        fail(f"--gradient-compression fp8 was not refused clearly (exit {p.returncode})")


def max_restarts(args):
    """Issue 26, item 2 (Note [Restarts] in launcher/src/launch.cpp): 4 ranks with --max-restarts 2
    and a checkpoint every 20 steps, rank 2 SIGKILLed at step 50: the job exits 0 by itself and its
    weights are bitwise those of a run resumed by hand from the step-40 checkpoint. A rank that
    fails at every start ends the job after 3 failures, naming them; a run without a checkpoint
    path is refused (exit 2) and not restarted."""
    steps = MOMENTUM + ["--epochs", "10", "--max-steps", "80", "--checkpoint-every-steps", "20"]
    restarted = os.path.join(args.workdir, "restarted.ckpt")
    for f in [restarted]:
        if os.path.exists(f):
            os.remove(f)
    cmd = [args.launch, "-n", "4", "--max-restarts", "2", "--", args.train] + COMMON + steps + \
        ["--checkpoint", restarted, "--print-steps"]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=args.workdir,
                         env={**os.environ, "TNT_TEST_TAG": "restart"})
    out, seen, killed = [], 0, False
    for line in p.stdout:
        out.append(line)
        if not killed and re.match(r"^epoch \d+ step \d+ ", line):
            seen += 1
            if seen == 50:
                pid = rank_pid("restart", 2)
                if pid is None:
                    p.kill()
                    fail("rank 2 of the job was not found")
                os.kill(pid, signal.SIGKILL)
                killed = True
    code = p.wait(timeout=120)
    text = "".join(out)
    print("\n".join(l for l in text.splitlines() if "restart" in l or "error" in l.lower())[-1500:])
    if code != 0 or "restart 1 of 2" not in text:
        print(text[-3000:])
        fail(f"the job with a rank killed at step 50 did not restart and finish (exit {code})")
    # Weights alone cannot tell a resumed restart from one that trained again from step 0 (both
    # are bitwise the uninterrupted run's): the restart must train only the steps after its
    # checkpoint (step 40, or 60 if the kill came late), not all 80.
    after = text.split("restart 1 of 2", 1)[1]
    steps_after = len(re.findall(r"^epoch \d+ step \d+ ", after, re.M))
    print(f"steps trained after the restart: {steps_after}")
    if not 0 < steps_after <= 40:
        fail(f"the restart trained {steps_after} steps: it did not resume from the step-40 checkpoint")
    by_hand = os.path.join(args.workdir, "by_hand.ckpt")
    if os.path.exists(by_hand):
        os.remove(by_hand)
    run(args, 4, MOMENTUM + ["--epochs", "10", "--max-steps", "40", "--checkpoint", by_hand])
    run(args, 4, steps + ["--checkpoint", by_hand, "--resume", by_hand])
    code, text = ckpt_diff(args, restarted, by_hand, 0, 0)
    print(f"restarted job against a resume by hand from step 40: {text.strip()}")
    if code != 0:
        fail("the restarted job's weights are not bitwise those of the resume by hand")
    cmd = [args.launch, "-n", "2", "--max-restarts", "2", "--", args.train] + COMMON + \
        ["--max-steps", "5", "--checkpoint", os.path.join(args.workdir, "always_failing.ckpt")]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                       cwd=args.workdir, env={**os.environ, "TNT_TEST_FAIL_AT": "step:1"})
    print(p.stdout.strip()[-600:])
    if p.returncode == 0 or "failed 3 time(s), --max-restarts 2 spent" not in p.stdout \
            or p.stdout.count("restart ") < 2:
        fail(f"a rank failing at every start did not end the job after 3 failures (exit {p.returncode})")
    cmd = [args.launch, "-n", "2", "--max-restarts", "2", "--", args.train] + COMMON + ["--max-steps", "5"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                       cwd=args.workdir)
    if p.returncode != 2 or "has no checkpoint path" not in p.stdout or "restart 1" in p.stdout:
        print(p.stdout)
        fail(f"--max-restarts without a checkpoint path was not refused once, exit 2 (exit {p.returncode})")


def min_ranks_refused(args):
    """Issue 26, resize: under tnt-launch --min-ranks a restart may run on fewer ranks, so tnt-train
    refuses each setting whose meaning depends on the rank count (exit 2, not restarted), naming
    it; without those settings the same command trains."""
    ckpt = os.path.join(args.workdir, "min_ranks.ckpt")
    base = [args.launch, "-n", "2", "--max-restarts", "1", "--min-ranks", "1", "--", args.train] + COMMON + \
        ["--max-steps", "2", "--checkpoint", ckpt]
    for extra, named in [(["--micro-batch", "32"], "train.micro_batch (--micro-batch)"),
                         (["--set", "schedule.scale_with_ranks=true"], "schedule.scale_with_ranks = true"),
                         (["--no-distribute-dataset"], "distribution.distribute_dataset = false")]:
        p = subprocess.run(base + extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
                           cwd=args.workdir)
        print(p.stdout.strip()[-400:])
        if p.returncode != 2 or "--min-ranks 1 may restart the job on fewer ranks, and " + named not in p.stdout \
                or "restart 1" in p.stdout:
            fail(f"{' '.join(extra)} under --min-ranks was not refused once, exit 2, naming {named} "
                 f"(exit {p.returncode})")
    if os.path.exists(ckpt):
        os.remove(ckpt)
    p = subprocess.run(base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
                       cwd=args.workdir)
    if p.returncode != 0:
        print(p.stdout[-2000:])
        fail(f"the same command without those settings exited with {p.returncode}")


def threads_chosen(cmd, args, preexec=None):
    """Runs one step; the master's 'N thread(s) each' and the host's automatic-threads line."""
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                       cwd=args.workdir, preexec_fn=preexec)
    each = re.search(r"on (\d+) rank\(s\), (\d+) thread\(s\) each", p.stdout)
    if p.returncode != 0 or not each:
        print(p.stdout)
        fail(f"tnt-train exited with {p.returncode} or did not say its threads")
    auto = re.findall(r"(\d+) compute thread\(s\) per rank", p.stdout)
    return int(each.group(2)), [int(a) for a in auto]


def threads_follow_cores(args):
    """Issue 26, item 3 (Note [Threads follow the cores]): with no --threads a rank runs one thread
    per core of its affinity mask, the host's ranks share a mask they were not bound apart in, and
    the choice is logged once per host; --threads overrides."""
    cores = len(os.sched_getaffinity(0))
    one_step = COMMON + ["--max-steps", "1"]
    threads, auto = threads_chosen([args.train] + one_step, args)
    print(f"lone rank on {cores} core(s): {threads} thread(s); logged {auto}")
    if threads != cores or auto != [cores]:
        fail(f"a lone rank with {cores} core(s) in its mask chose {threads} thread(s) (logged {auto})")
    first = min(os.sched_getaffinity(0))
    threads, auto = threads_chosen([args.train] + one_step, args,
                                   preexec=lambda: os.sched_setaffinity(0, {first}))
    print(f"lone rank under an affinity of cpu {first} (taskset -c {first}): {threads} thread(s)")
    if threads != 1 or auto != [1]:
        fail(f"a lone rank bound to one cpu chose {threads} thread(s) (logged {auto})")
    for binding in ["core", "none"]:
        threads, auto = threads_chosen([args.launch, "-n", "2", "--bind-to", binding, "--", args.train] + one_step,
                                       args)
        print(f"2 ranks, tnt-launch --bind-to {binding}: {threads} thread(s) each; logged {auto}")
        if threads != max(1, cores // 2) or len(auto) != 1:
            fail(f"2 ranks on {cores} core(s) (--bind-to {binding}) chose {threads} thread(s) each, logged {auto}")
    threads, auto = threads_chosen([args.train] + one_step + ["--threads", "3"], args)
    if threads != 3 or auto:
        fail(f"--threads 3 gave {threads} thread(s) (automatic choice logged: {auto})")


def unused_setting_refused(args):
    """Issue 26, item 7: the main job's run file has a piecewise schedule, so --learning-rate would
    change nothing; tnt-train refuses it (exit 2) naming both, before any rank starts training."""
    conf = os.path.join(args.conf, "lenet5_fashion_mnist.toml")
    p = subprocess.run([args.train, conf, "--learning-rate", "0.5"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60, cwd=args.workdir)
    print(p.stdout.strip()[-600:])
    if p.returncode != 2 or "schedule.learning_rate (--learning-rate) is given but not used" not in p.stdout \
            or 'schedule.kind = "piecewise"' not in p.stdout:
        fail(f"--learning-rate with a piecewise schedule was not refused naming both (exit {p.returncode})")


# ResNet-20 at global batch 64 for 50 steps over 2049 synthetic samples: the last step of the
# first epoch (step 33) has 1 sample, so on 4 ranks three ranks have none and take part in the
# BatchNorm sums through Model::pass_without_samples.
RESNET = [
    "--model", "resnet20", "--dataset", "synthetic", "--shape", "3", "32", "32", "--num-classes", "10",
    "--train-size", "2049", "--test-size", "0", "--global-batch", "64", "--epochs", "2", "--max-steps", "50",
    "--seed", "7", "--optimizer", "sgd", "--learning-rate", "0.0002", "--no-progress",
    "--validation-frequency", "0", "--threads", "1",
]


def sync_batch_norm(args):
    """Issue 26, item 4 (Note [Synchronized BatchNorm] in compute/src/layers_dnnl.cpp): ResNet-20
    with --sync-batch-norm on 1, 2 and 4 ranks ends 50 steps with weights and running statistics
    within 1e-5 (rtol and atol, element by element) of each other; per-rank BatchNorm on 2 ranks
    does not (so the comparison can fail); a model without BatchNorm is refused (exit 2).
    Learning rate 0.0002, plain SGD: at 0.0005 this network's float noise alone (1 rank, 1 against
    2 threads, the same code) already moves running variances by 3e-5 relative after 50 steps
    (measured 2026-11-28), and at the run file's 0.05 with momentum 0.9 by far more."""
    ckpts = {}
    for ranks, extra in [(1, ["--sync-batch-norm"]), (2, ["--sync-batch-norm"]), (4, ["--sync-batch-norm"]),
                         ("2 per-rank", [])]:
        ckpts[ranks] = os.path.join(args.workdir, f"sync_{str(ranks).replace(' ', '_')}.ckpt")
        n = ranks if isinstance(ranks, int) else 2
        cmd = [args.launch, "-n", str(n), "--", args.train] + RESNET + extra + ["--checkpoint", ckpts[ranks]]
        print("$ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240,
                           cwd=args.workdir)
        if p.returncode != 0:
            print(p.stdout)
            fail(f"tnt-train on {ranks} rank(s) exited with {p.returncode}")
    for ranks in (2, 4):
        code, text = ckpt_diff(args, ckpts[1], ckpts[ranks], 1e-5, 1e-5)
        print(f"--sync-batch-norm, 1 vs {ranks} ranks after 50 steps: {text.strip().splitlines()[-1]}")
        if code != 0:
            print(text)
            fail(f"synchronized BatchNorm on {ranks} ranks is not within 1e-5 of 1 rank")
    code, text = ckpt_diff(args, ckpts[1], ckpts["2 per-rank"], 1e-5, 1e-5)
    print(f"per-rank BatchNorm on 2 ranks vs --sync-batch-norm on 1: {text.strip().splitlines()[-1]}")
    if code == 0:
        fail("per-rank BatchNorm on 2 ranks matched the 1-rank run: the comparison cannot tell")
    cmd = [args.launch, "-n", "2", "--", args.train] + COMMON + ["--max-steps", "2", "--sync-batch-norm"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                       cwd=args.workdir)
    print(p.stdout.strip()[-300:])
    if p.returncode != 2 or "model 'lenet5' has no BatchNorm layer to synchronize" not in p.stdout:
        fail(f"--sync-batch-norm with LeNet-5 (no BatchNorm) was not refused clearly (exit {p.returncode})")


# Issue 26, item 5 (Note [Bitwise-reproducible mode] in actors/trainer/src/exact_sum.cpp).
# LeNet-5 on COMMON's data crosses epochs (a last batch of 40 in 13 shards of 3 or 4 samples);
# ResNet-20 without BatchNorm at global batch 24 over 250 samples ends each epoch with a batch
# of 10 in 12 shards, some empty, so on 4 ranks a rank may have 1 sample of a step.
BITWISE_STEPS = {"lenet5": 100, "resnet20_no_batch_norm": 100}


def bitwise_runs(args, model_args, steps, name, ranks_list, extra):
    ckpts = {}
    for ranks in ranks_list:
        ckpts[ranks] = os.path.join(args.workdir, f"{name}_{ranks}.ckpt")
        cmd = ([args.launch, "-n", str(ranks), "--", args.train] + model_args +
               ["--max-steps", str(steps), "--threads", "1", "--checkpoint", ckpts[ranks]] + extra)
        print("$ " + " ".join(cmd), flush=True)
        start = time.time()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                           cwd=args.workdir)
        if p.returncode != 0:
            print(p.stdout)
            fail(f"{name} on {ranks} rank(s) exited with {p.returncode}")
        print(f"  {time.time() - start:.1f} s", flush=True)
    return ckpts


def bitwise(args):
    """Issue 26, item 5: with --bitwise (and --threads 1 everywhere) LeNet-5 for 100 steps and
    ResNet-20 without BatchNorm for 100 steps end with every weight bitwise equal on 1, 2, 3 and 4
    ranks (tnt-ckpt diff --rtol 0 --atol 0 prints "same (rtol 0, atol 0)"), so does an MLP with
    Dropout on 1 and 3 ranks, and so does LeNet-5
    for 50 steps on 2 ranks resumed to 100 on 4 without overlap; LeNet-5 without the mode on 1
    and 2 ranks does not (so the comparison can fail)."""
    resnet = ["--model", os.path.join(args.conf, "models", "resnet20_no_batch_norm.toml"), "--dataset",
              "synthetic", "--shape", "3", "32", "32", "--num-classes", "10", "--train-size", "250",
              "--test-size", "0", "--global-batch", "24", "--epochs", "10", "--seed", "7", "--optimizer", "sgd",
              "--momentum", "0.9", "--learning-rate", "0.01", "--no-progress", "--validation-frequency", "0"]
    lenet = COMMON + ["--epochs", "10", "--momentum", "0.9"]
    for name, model_args in [("lenet5", lenet), ("resnet20_no_batch_norm", resnet)]:
        steps = BITWISE_STEPS[name]
        ckpts = bitwise_runs(args, model_args, steps, name, [1, 2, 3, 4], ["--bitwise"])
        for ranks in (2, 3, 4):
            code, text = ckpt_diff(args, ckpts[1], ckpts[ranks], 0, 0)
            print(f"{name} --bitwise, 1 vs {ranks} ranks after {steps} steps: {text.strip().splitlines()[-1]}")
            if code != 0 or text.strip() != "same (rtol 0, atol 0)":
                print(text)
                fail(f"{name} with --bitwise on {ranks} ranks is not bitwise the 1-rank run's weights")
    # Dropout masks are keyed by the global sample: a model with Dropout too.
    dropout_model = os.path.join(args.workdir, "mlp_dropout.toml")
    with open(dropout_model, "w") as f:
        f.write(DROPOUT_MODEL)
    dropout = bitwise_runs(args, lenet + ["--model", dropout_model], BITWISE_STEPS["lenet5"], "dropout", [1, 3],
                           ["--bitwise"])
    code, text = ckpt_diff(args, dropout[1], dropout[3], 0, 0)
    print(f"MLP with Dropout --bitwise, 1 vs 3 ranks: {text.strip().splitlines()[-1]}")
    if code != 0:
        fail("the MLP with Dropout with --bitwise on 3 ranks is not bitwise the 1-rank run's weights")
    # Half the steps on 2 ranks, resumed on 4 to the end, without overlap: the 1-rank run's bits.
    half = bitwise_runs(args, lenet, BITWISE_STEPS["lenet5"] // 2, "lenet5_half", [2], ["--bitwise"])[2]
    cmd = ([args.launch, "-n", "4", "--", args.train] + lenet +
           ["--max-steps", str(BITWISE_STEPS["lenet5"]), "--threads", "1", "--bitwise", "--no-overlap",
            "--checkpoint", half, "--resume", half])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       cwd=args.workdir)
    if p.returncode != 0:
        print(p.stdout)
        fail(f"the resumed run on 4 ranks exited with {p.returncode}")
    code, text = ckpt_diff(args, os.path.join(args.workdir, "lenet5_1.ckpt"), half, 0, 0)
    print(f"lenet5 --bitwise, 1 rank vs 2 ranks resumed on 4 (--no-overlap): {text.strip().splitlines()[-1]}")
    if code != 0:
        fail("lenet5 with --bitwise, 2 ranks resumed on 4, is not bitwise the 1-rank run's weights")
    plain = bitwise_runs(args, lenet, BITWISE_STEPS["lenet5"], "lenet5_plain", [1, 2], [])
    code, text = ckpt_diff(args, plain[1], plain[2], 0, 0)
    print(f"lenet5 without --bitwise, 1 vs 2 ranks: {text.strip().splitlines()[-1]}")
    if code == 0:
        fail("LeNet-5 without --bitwise gave the same bits on 1 and 2 ranks: the comparison cannot tell")


def bitwise_refused(args):
    """Issue 26, item 5: what the bitwise-reproducible mode cannot make bitwise is refused (exit 2),
    naming the setting: a model with BatchNorm, accumulation, a micro-batch, bf16 gradients, no
    --threads, more ranks than shards, a batch smaller than the shards; --bitwise-shards without
    the mode."""
    cases = [
        (1, ["--bitwise", "--threads", "1", "--model", "resnet20", "--shape", "3", "32", "32"],
         "model 'resnet20' has BatchNorm"),
        (2, ["--bitwise", "--threads", "1", "--accumulate", "2"], "accumulation_steps (--accumulate) 2 is refused"),
        (2, ["--bitwise", "--threads", "1", "--micro-batch", "32", "--global-batch", "0"],
         "micro_batch (--micro-batch) 32 is refused"),
        (2, ["--bitwise", "--threads", "1", "--gradient-compression", "bf16"],
         "gradient compression bf16 (--gradient-compression bf16) is refused"),
        (1, ["--bitwise"], "needs train.threads (--threads) set"),
        (3, ["--bitwise", "--threads", "1", "--bitwise-shards", "2"], "3 ranks are more than the 2 shards"),
        (1, ["--bitwise", "--threads", "1", "--bitwise-shards", "100"],
         "the global batch of 64 is smaller than the 100 shards"),
        (1, ["--reproducible", "exact", "--threads", "1"], "train.reproducible (--reproducible) 'exact'"),
        (1, ["--bitwise-shards", "4", "--threads", "1"], "train.bitwise_shards (--bitwise-shards) is given but not used"),
    ]
    for ranks, extra, expected in cases:
        cmd = [args.launch, "-n", str(ranks), "--", args.train] + COMMON + ["--max-steps", "2"] + extra
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                           cwd=args.workdir)
        print(f"{' '.join(extra)} on {ranks} rank(s): exit {p.returncode}")
        if p.returncode != 2 or expected not in p.stdout:
            print(p.stdout.strip()[-800:])
            fail(f"{extra} on {ranks} rank(s) was not refused with '{expected}' (exit {p.returncode})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("test", choices=["reproducibility", "dropout_reproducibility", "resume", "failure",
                                            "skip_gradient_allreduce", "nan_guard", "input_shape", "preemption",
                                            "seq2seq_reproducibility", "export_pairs", "bf16_reproducibility",
                                            "precision_refused", "callback_resume", "unused_setting_refused",
                                            "threads_follow_cores", "accumulation", "accumulation_timeline",
                                            "bf16_gradients", "max_restarts", "min_ranks_refused", "sync_batch_norm", "bitwise",
                                            "bitwise_refused"])
    parser.add_argument("--conf", help="the conf/ folder (nan_guard, export_pairs)")
    parser.add_argument("--launch", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--compare", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    globals()[args.test](args)
    print("PASS")


if __name__ == "__main__":
    main()
