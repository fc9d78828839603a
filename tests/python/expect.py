"""Runs a job and checks how it ends: its exit status (zero for `succeeds`, non-zero for `fails`),
a match of the regular expression TEXT in its output, and an end within SECONDS (no hang).

    expect.py succeeds|fails SECONDS TEXT -- COMMAND...
"""
import re
import subprocess
import sys
import time

outcome, seconds, text = sys.argv[1], float(sys.argv[2]), sys.argv[3]
command = sys.argv[sys.argv.index("--") + 1:]
start = time.monotonic()
try:
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=seconds)
except subprocess.TimeoutExpired as e:
    print(e.output or "")
    sys.exit(f"the job still ran after {seconds} s (a hang)")
print(done.stdout)
print(f"exit status {done.returncode} after {time.monotonic() - start:.1f} s")
if (done.returncode == 0) != (outcome == "succeeds"):
    sys.exit(f"the job should have ended with {'status 0' if outcome == 'succeeds' else 'a failure'}")
if not re.search(text, done.stdout):
    sys.exit(f"nothing in the job's output matches '{text}'")
