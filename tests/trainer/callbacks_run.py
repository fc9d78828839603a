#!/usr/bin/env python3
"""Keras's callbacks through tnt-train's run file and --set.

  tensorboard     the README's LeNet-5 run writes event files that tensorboard_reader.py (CRC of
                  every record checked) reads back: the expected scalars and steps, the epoch
                  figures equal to the CSV's; on 2 ranks the master alone writes, or every rank in
                  rank-N with TNT_TENSORBOARD_ON_ALL_DEVICES=true.
  remote_monitor  a local HTTP server (started here, always stopped) receives each epoch's logs as
                  JSON, as a form field by default and as the body with send_as_json; a refused
                  connection and a server that never answers are warnings, and the run ends well.
  run_file        early stopping, a learning-rate scheduler, model checkpoints and a CSV logger
                  from [callbacks.*] sections; [optimizer] global_clipnorm on 2 ranks; both forms of a shorthand, or a scheduler with a
                  schedule that changes the rate, are errors (exit 2) naming both.
"""
import argparse
import csv
import http.server
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tensorboard_reader as tb  # noqa: E402

# Without a learning rate: a run whose learning_rate_scheduler sets every rate refuses one
# (Note [Unused settings]).
SYNTHETIC_NO_RATE = ["--dataset", "synthetic", "--train-size", "300", "--test-size", "120", "--shape", "1", "8", "8",
                     "--num-classes", "3", "--model", "mlp", "--global-batch", "30", "--optimizer", "sgd",
                     "--schedule", "constant", "--no-progress"]
SYNTHETIC = SYNTHETIC_NO_RATE + ["--learning-rate", "0.05"]


def fail(what):
    sys.exit("FAIL: " + what)


def run(args, work, argv, ranks=1, env=None, expect=0):
    cmd = [args.train] + argv if ranks == 1 else [args.launch, "-n", str(ranks), "--", args.train] + argv
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, **(env or {})))
    if out.returncode != expect:
        fail(f"{' '.join(cmd)}: exit status {out.returncode}, expected {expect}\n{out.stdout}\n{out.stderr}")
    return out.stdout + out.stderr


def fresh(args, name):
    work = Path(args.workdir) / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work


def check_scalars(run_dir, expected_epoch_tags, epochs, batch_steps=()):
    scalars = tb.read_run(run_dir)
    for tag in expected_epoch_tags:
        steps = [s for s, _ in scalars.get(tag, [])]
        if steps != list(range(epochs)):
            fail(f"{run_dir}: {tag} at steps {steps}, expected {list(range(epochs))} (tags: {sorted(scalars)})")
    for tag in ("batch_loss", "batch_accuracy", "batch_learning_rate") if batch_steps else ():
        steps = [s for s, _ in scalars.get(tag, [])]
        if steps != list(batch_steps):
            fail(f"{run_dir}: {tag} at steps {steps}, expected {list(batch_steps)}")
    return scalars


def tensorboard(args):
    conf = str(Path(args.conf) / "lenet5_fashion_mnist.toml")
    short = ["--train-size", "640", "--test-size", "200", "--epochs", "2", "--no-progress"]
    work = fresh(args, "tensorboard")
    # The command, shortened: 10 steps an epoch.
    run(args, work, [conf, "--set", 'callbacks.tensorboard.log_dir="tb"', "--set", "callbacks.tensorboard.update_freq=5"]
        + short)
    train = check_scalars(work / "tb" / "train", ["epoch_loss", "epoch_accuracy", "epoch_learning_rate",
                                                   "epoch_samples_per_second"], 2, batch_steps=(5, 10, 15, 20))
    validation = check_scalars(work / "tb" / "validation", ["epoch_loss", "epoch_accuracy"], 2)
    rows = list(csv.DictReader(open(work / "lenet5_fashion_mnist.csv")))
    for e, row in enumerate(rows):
        for scalars, tag, column in ((train, "epoch_loss", "loss"), (validation, "epoch_loss", "val_loss"),
                                     (validation, "epoch_accuracy", "val_accuracy")):
            if not math.isclose(scalars[tag][e][1], float(row[column]), rel_tol=1e-5, abs_tol=1e-6):
                fail(f"epoch {e}: {tag} {scalars[tag][e][1]} but the CSV's {column} is {row[column]}")
        if not train["epoch_samples_per_second"][e][1] > 0:
            fail("samples/s is not positive")
    # A damaged record is found: the reader checks every CRC.
    event_file = next((work / "tb" / "train").glob("*tfevents*"))
    damaged = bytearray(event_file.read_bytes())
    damaged[len(damaged) // 2] ^= 0x40
    copy = work / "damaged" / event_file.name
    copy.parent.mkdir()
    copy.write_bytes(bytes(damaged))
    try:
        tb.read_run(copy.parent)
        fail("the reader accepted a damaged event file")
    except tb.CorruptFile as e:
        print(f"damaged copy refused: {e}")
    print(f"1 rank: train tags {sorted(train)}; validation tags {sorted(validation)}")

    for everyone in (False, True):
        work = fresh(args, f"tensorboard_2_ranks_{'all' if everyone else 'master'}")
        env = {"TNT_TENSORBOARD_ON_ALL_DEVICES": "true"} if everyone else {}
        run(args, work, SYNTHETIC + ["--epochs", "2", "--set", 'callbacks.tensorboard.log_dir="tb"'], ranks=2, env=env)
        runs = sorted(str(p.parent.relative_to(work / "tb")) for p in (work / "tb").rglob("*tfevents*"))
        expected = (["rank-0/train", "rank-0/validation", "rank-1/train", "rank-1/validation"] if everyone
                    else ["train", "validation"])
        if runs != expected:
            fail(f"2 ranks{' (all devices)' if everyone else ''}: event files in {runs}, expected {expected}")
        if everyone:
            losses = [[v for _, v in tb.read_run(work / "tb" / f"rank-{r}" / "train")["epoch_loss"]] for r in (0, 1)]
            if losses[0] != losses[1]:
                fail(f"the ranks' epoch_loss differ: {losses}")
        print(f"2 ranks, TNT_TENSORBOARD_ON_ALL_DEVICES={'true' if everyone else 'unset'}: {runs}")
    print("tensorboard: PASS")


class Recorder(http.server.BaseHTTPRequestHandler):
    posts = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Recorder.posts.append((self.path, self.headers["Content-Type"], body.decode()))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_):
        pass


def remote_monitor(args):
    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    silent = socket.socket()  # listens, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/publish/epoch/end/"
        for as_json in (False, True):
            Recorder.posts.clear()
            work = fresh(args, f"remote_monitor_{'json' if as_json else 'form'}")
            run(args, work, SYNTHETIC + ["--epochs", "2", "--csv", "m.csv", "--set", f'callbacks.remote_monitor.url="{url}"',
                                         "--set", f"callbacks.remote_monitor.send_as_json={str(as_json).lower()}"])
            rows = list(csv.DictReader(open(work / "m.csv")))
            if len(Recorder.posts) != 2:
                fail(f"{len(Recorder.posts)} posts, expected 2: {Recorder.posts}")
            for e, (path, kind, body) in enumerate(Recorder.posts):
                if as_json:
                    logs = json.loads(body)
                    ok_kind = kind == "application/json"
                else:
                    logs = json.loads(urllib.parse.parse_qs(body)["data"][0])
                    ok_kind = kind == "application/x-www-form-urlencoded"
                if path != "/publish/epoch/end/" or not ok_kind or logs["epoch"] != e:
                    fail(f"post {e}: {path} {kind} {body}")
                for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
                    if not math.isclose(logs[key], float(rows[e][key]), abs_tol=1e-6):
                        fail(f"post {e}: {key} {logs[key]} but the CSV says {rows[e][key]}")
            print(f"send_as_json={as_json}: {Recorder.posts[-1][1]}: {Recorder.posts[-1][2][:100]}")
        # Nobody listens on a closed port; the silent server never answers within 0.5 s.
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        closed_port = closed.getsockname()[1]
        closed.close()
        for name, port, expected in (("refused", closed_port, "connect"),
                                     ("silent", silent.getsockname()[1], "no answer within 500 ms")):
            work = fresh(args, f"remote_monitor_{name}")
            start = time.time()
            out = run(args, work, SYNTHETIC + ["--epochs", "2", "--set",
                                               f'callbacks.remote_monitor.url="http://127.0.0.1:{port}/x"',
                                               "--set", "callbacks.remote_monitor.timeout=0.5"])
            elapsed = time.time() - start
            warnings = [line for line in out.splitlines() if "RemoteMonitor: could not post" in line]
            if len(warnings) != 2 or expected not in warnings[0] or "test accuracy" not in out:
                fail(f"{name}: expected 2 warnings naming '{expected}' and a finished run:\n{out}")
            print(f"{name}: exit 0 after {elapsed:.1f} s; {warnings[0].split('] ')[-1]}")
    finally:
        server.shutdown()
        server.server_close()
        silent.close()
    print("remote_monitor: PASS")


def run_file(args):
    work = fresh(args, "run_file")
    (work / "run.toml").write_text("""
[callbacks.early_stopping]
monitor = "loss"
mode = "max"        # the training loss falls: no epoch after the first improves
patience = 1

[callbacks.learning_rate_scheduler]
rates = [0.05, 0.02]

[callbacks.model_checkpoint]
filepath = "ckpt/m-{epoch:02d}-{loss:.2f}.tnt"
save_weights_only = true

[callbacks.csv_logger]
filename = "log.csv"
separator = ";"
""")
    out = run(args, work, ["run.toml"] + SYNTHETIC_NO_RATE + ["--epochs", "5"])
    rows = list(csv.DictReader(open(work / "log.csv"), delimiter=";"))
    if [r["epoch"] for r in rows] != ["1", "2"] or "EarlyStopping: loss has not improved for 1 epoch" not in out:
        fail(f"early stopping after epoch 2 expected, the CSV has {rows}\n{out}")
    # The CSV's rate is the next step's at the epoch's end: epoch 2 is trained at 0.02 (rates[1]).
    if [float(r["learning_rate"]) for r in rows] != [0.05, 0.02]:
        fail(f"learning rates {[r['learning_rate'] for r in rows]}, expected [0.05, 0.02]")
    files = sorted(p.name for p in (work / "ckpt").iterdir())
    expected = [f"m-{e + 1:02d}-{float(r['loss']):.2f}.tnt" for e, r in enumerate(rows)]
    if files != expected:
        fail(f"checkpoints {files}, expected {expected}")
    print(f"early stopping + scheduler + checkpoints + CSV: {files}, rates {[r['learning_rate'] for r in rows]}")
    # Keras's gradient clipping from the run file, on 2 ranks: a tight global norm slows training.
    losses = {}
    for clip in (0, 0.01):
        out = run(args, work, SYNTHETIC + ["--epochs", "1", "--csv", f"clip{clip}.csv", "--set",
                                           f"optimizer.global_clipnorm={clip}"], ranks=2)
        losses[clip] = float(next(csv.DictReader(open(work / f"clip{clip}.csv")))["loss"])
    if not losses[0.01] > losses[0]:
        fail(f"global_clipnorm 0.01 did not slow training: epoch losses {losses}")
    print(f"global_clipnorm on 2 ranks: epoch-1 loss {losses[0.01]:.4f} clipped, {losses[0]:.4f} not")
    for settings, message in (
        (["--csv", "a.csv", "--set", 'callbacks.csv_logger.filename="b.csv"'], "[output] csv (--csv) is a shorthand"),
        (["--checkpoint", "a.ckpt", "--set", 'callbacks.model_checkpoint.filepath="b.ckpt"'],
         "[checkpoint] path (--checkpoint) is a shorthand"),
        (["--schedule", "exponential", "--set", "callbacks.learning_rate_scheduler.rates=[0.1]"],
         "cannot be combined with [schedule] kind 'exponential'"),
        (["--set", "callbacks.early_stopping.patiense=2"], "unknown key 'patiense'"),
        (["--set", 'callbacks.reduce_lr_on_plateau.mode="up"'], "mode 'up': expected auto, min or max"),
        (["--set", 'callbacks.remote_monitor.url="https://example.org/"'], "https is not supported"),
        (["--set", "optimizer.clipnorm=1.0", "--set", "optimizer.clipvalue=0.5"],
         "at most one of clipnorm, global_clipnorm and clipvalue"),
    ):
        out = run(args, work, SYNTHETIC + settings, expect=2)
        if message not in out:
            fail(f"{settings}: the error does not say '{message}':\n{out}")
        print(f"refused: {out.strip().splitlines()[-1]}")
    print("run_file: PASS")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("test", choices=["tensorboard", "remote_monitor", "run_file"])
    p.add_argument("--train", required=True)
    p.add_argument("--launch", required=True)
    p.add_argument("--conf", required=True)
    p.add_argument("--workdir", required=True)
    args = p.parse_args()
    globals()[args.test](args)


if __name__ == "__main__":
    main()
