"""Runs a job that must fail: a non-zero exit status, TEXT in its output, within SECONDS (no hang).

    expect_failure.py SECONDS TEXT -- COMMAND...
"""
import subprocess
import sys
import time

seconds, text = float(sys.argv[1]), sys.argv[2]
command = sys.argv[sys.argv.index("--") + 1:]
start = time.monotonic()
try:
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=seconds)
except subprocess.TimeoutExpired as e:
    print(e.output or "")
    sys.exit(f"the job still ran after {seconds} s (a hang)")
print(done.stdout)
print(f"exit status {done.returncode} after {time.monotonic() - start:.1f} s")
if done.returncode == 0:
    sys.exit("the job succeeded; it should have failed")
if text not in done.stdout:
    sys.exit(f"'{text}' is not in the job's output")
