"""Signals to a Python job under tnt-launch (tests/python/signals_test.py trains meanwhile):

  SIGINT (Ctrl-C): every rank stops at one step and ends with KeyboardInterrupt; the job exits
          130 within 3 s, without tnt-launch's SIGKILL, and no rank is left.
  SIGTERM (to the last rank alone, as a cluster's preemption may reach one rank): preemption as
          for tnt-train: every rank stops at one step, the checkpoint, exit status 3 within 10 s; a
          rerun with resume="auto" continues from it.

    signals_driver.py SIGINT|SIGTERM RANKS --launch tnt-launch --python PYTHON --script signals_test.py
                      --workdir DIR
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("signal", choices=["SIGINT", "SIGTERM"])
parser.add_argument("ranks", type=int)
for name in ("launch", "python", "script", "workdir"):
    parser.add_argument("--" + name, required=True)
args = parser.parse_args()
shutil.rmtree(args.workdir, ignore_errors=True)
os.makedirs(args.workdir)
command = [args.launch, "-n", str(args.ranks), "--", args.python, args.script, args.workdir]
log = open(os.path.join(args.workdir, "job.log"), "w+")
job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def fail(why):
    job.kill()
    log.seek(0)
    print(log.read())
    sys.exit(why)


pid_files = [os.path.join(args.workdir, f"pid.{r}") for r in range(args.ranks)]
deadline = time.monotonic() + 60
while not all(os.path.exists(p) and os.path.getsize(p) for p in pid_files):
    if time.monotonic() > deadline or job.poll() is not None:
        fail("the ranks did not start training")
    time.sleep(0.1)
pids = [int(open(p).read()) for p in pid_files]
time.sleep(1.5)  # well into fit
if job.poll() is not None:
    fail("the job ended before the signal")
if args.signal == "SIGINT":
    job.send_signal(signal.SIGINT)  # Ctrl-C: tnt-launch forwards it to every rank
else:
    os.kill(pids[-1], signal.SIGTERM)
sent = time.monotonic()
limit = 3 if args.signal == "SIGINT" else 10
try:
    status = job.wait(timeout=limit)
except subprocess.TimeoutExpired:
    fail(f"the job still ran {limit} s after {args.signal}")
took = time.monotonic() - sent
log.seek(0)
output = log.read()
print(output)
print(f"exit status {status}, {took:.2f} s after {args.signal}")
left = [p for p in pids if os.path.exists(f"/proc/{p}")]
if left:
    sys.exit(f"ranks still running after the job ended: pids {left}")
if "SIGKILL" in output:
    sys.exit("tnt-launch had to SIGKILL ranks: they did not stop on the signal")
if args.signal == "SIGINT":
    if status != 130 or "KeyboardInterrupt" not in output:
        sys.exit("expected exit status 130 and KeyboardInterrupt on the master")
    sys.exit(0)

if status != 3 or "Preempted" not in output:
    sys.exit("expected exit status 3 (preempted) and tnt.Preempted on the master")
if not os.path.exists(os.path.join(args.workdir, "run.ckpt")):
    sys.exit("no checkpoint was written")
resumed = subprocess.run([args.launch, "-n", str(args.ranks), "--", args.python, args.script, args.workdir, "40"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
print(resumed.stdout)
if resumed.returncode != 0 or "resuming from" not in resumed.stdout:
    sys.exit("the rerun with resume='auto' did not continue from the checkpoint")
