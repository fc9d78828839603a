#!/usr/bin/env python3
"""Issue "No hang, ever": one failure, every rank told.

fault_matrix.py PHASE: for TNT_TEST_FAIL_AT=PHASE:RANK with RANK the first and the last rank, on
2 and 3 ranks, starts tnt-train's ranks directly (as mpirun or srun would, with no tnt-launch to
stop the others when one exits) and checks that
  - every rank exits non-zero within BOUND_S of the injected failure (the failing rank stamps
    its wall clock into its message; the driver stamps each rank's exit),
  - the master prints the failing rank's message,
  - no process is left and no file is left in /dev/shm.
TNT_PEER_TIMEOUT_S is 60 s, so that no rank is released by a timeout: only by being told.
Prints one line per case: phase, ranks, failing rank, seconds from the failure to the last exit.

fault_matrix.py missing_checkpoint_folder: the issue's command through tnt-launch on 2 ranks,
--checkpoint in a folder that does not exist, ends non-zero within BOUND_S.
"""
import argparse
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time

BOUND_S = 5.0
STAMP = re.compile(r"injected failure at (\w+) on rank (\d+) \(wall clock ([0-9.]+)\)")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm_files():
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def left_by_another_process(name, procs):
    """ctest runs tests side by side: a file that LLVM's OpenMP runtime (clang builds) registered
    for another process (its pid is in the name), running or killed by another test, is not this
    case's leftover; nor is OpenMPI's shared memory (vader_segment.*), made by the mpi_layer tests
    that run OpenMPI's mpirun beside this one (tnt never uses it). tnt itself puts nothing in
    /dev/shm (its segments are memfds), so any other new file is counted."""
    if name.startswith("vader_segment."):
        return True
    m = re.match(r"__KMP_REGISTERED_LIB_(\d+)_", name)
    return bool(m) and int(m.group(1)) not in [p.pid for p in procs]


def run_args(args, phase, workdir):
    """A small, quick run that passes every phase but translate's; that one trains the tiny
    Transformer on sentence pairs and translates two test pairs."""
    if phase == "translate":
        return [args.train, os.path.join(args.conf, "transformer_en_de.toml"), "--model", "transformer_tiny",
                "--tokenizer", "char", "--global-batch", "16", "--max-steps", "2", "--no-progress",
                "--checkpoint", "", "--csv", "", "--translate-sentences", "2"]
    run = [args.train, os.path.join(args.conf, "lenet5_fashion_mnist.toml"), "--train-size", "256", "--test-size",
           "128", "--global-batch", "64", "--epochs", "1", "--no-progress", "--csv", "",
           "--checkpoint", os.path.join(workdir, "run.ckpt"), "--predict", os.path.join(workdir, "predictions.csv")]
    if phase == "checkpoint_read":
        run += ["--resume", args.resume_from]
    return run


def make_checkpoint(args, workdir):
    """checkpoint_read resumes from a checkpoint of the same run, written by one rank first: a
    1-epoch run of 2 steps, resumed to train its remaining steps."""
    path = os.path.join(workdir, "resume_from.ckpt")
    cmd = run_args(args, "step", workdir)
    cmd = [c for c in cmd]
    cmd[cmd.index("--checkpoint") + 1] = path
    cmd += ["--max-steps", "2"]
    env = dict(os.environ)
    for name in ("TNT_RANK", "TNT_SIZE", "TNT_TEST_FAIL_AT"):
        env.pop(name, None)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, env=env,
                       cwd=workdir)
    if p.returncode != 0 or not os.path.exists(path):
        print(p.stdout)
        fail("could not write the checkpoint that checkpoint_read resumes from")
    return path


def run_case(args, phase, size, failing, workdir):
    port, token = free_port(), secrets.token_hex(16)
    shm_before = shm_files()
    procs, logs = [], []
    for rank in range(size):
        env = dict(os.environ)
        env.update({"TNT_RANK": str(rank), "TNT_SIZE": str(size), "TNT_LOCAL_RANK": str(rank),
                    "TNT_LOCAL_SIZE": str(size), "TNT_MASTER_ADDR": "127.0.0.1", "TNT_MASTER_PORT": str(port),
                    "TNT_JOB_ID": f"fault-{phase}", "TNT_JOB_TOKEN": token, "TNT_PEER_TIMEOUT_S": "60",
                    "TNT_CONNECT_TIMEOUT_S": "30", "TNT_TEST_FAIL_AT": f"{phase}:{failing}"})
        log = open(os.path.join(workdir, f"{phase}-{size}-{failing}-rank{rank}.log"), "w+")
        logs.append(log)
        procs.append(subprocess.Popen(run_args(args, phase, workdir), stdout=log, stderr=subprocess.STDOUT, env=env,
                                      cwd=workdir))
    exited = [None] * size
    deadline = time.time() + 90
    while any(e is None for e in exited) and time.time() < deadline:
        for rank, p in enumerate(procs):
            if exited[rank] is None and p.poll() is not None:
                exited[rank] = time.time()
        time.sleep(0.01)
    hung = [rank for rank, e in enumerate(exited) if e is None]
    for rank in hung:
        procs[rank].kill()
        procs[rank].wait()
    texts = []
    for log in logs:
        log.seek(0)
        texts.append(log.read())
        log.close()
    where = f"{phase}, {size} ranks, rank {failing} failing"

    def show_logs():
        for rank, text in enumerate(texts):
            print(f"---- rank {rank}:\n{text[-3000:]}")

    if hung:
        show_logs()
        fail(f"{where}: rank(s) {hung} still ran 90 s after the start (killed)")
    stamp = STAMP.search(texts[failing])
    if not stamp or stamp.group(1) != phase or int(stamp.group(2)) != failing:
        show_logs()
        fail(f"{where}: the failing rank did not report the injected failure")
    failed_at = float(stamp.group(3))
    statuses = [p.returncode for p in procs]
    if any(s == 0 for s in statuses):
        show_logs()
        fail(f"{where}: exit statuses {statuses}: every rank must exit non-zero")
    took = max(exited) - failed_at
    if took > BOUND_S:
        show_logs()
        fail(f"{where}: the last rank exited {took:.2f} s after the failure (bound {BOUND_S} s)")
    message = f"injected failure at {phase} on rank {failing}"
    if message not in texts[0]:
        show_logs()
        fail(f"{where}: the master did not print the failing rank's message")
    if failing != 0 and not re.search(rf"rank {failing} \([^)]*\) failed: .*{message}", texts[0]):
        show_logs()
        fail(f"{where}: the master's message does not name rank {failing} as the one that failed")
    left = [f for f in shm_files() - shm_before if not left_by_another_process(f, procs)]
    if left:
        fail(f"{where}: files left in /dev/shm: {sorted(left)}")
    print(f"{phase:17s} {size} ranks  rank {failing} fails  every rank exited {took:5.2f} s after it, "
          f"statuses {statuses}")
    return took


def matrix(args, phase):
    workdir = os.path.join(args.workdir, phase)
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    if phase == "checkpoint_read":
        args.resume_from = make_checkpoint(args, workdir)
    for size in (2, 3):
        for failing in (0, size - 1):
            run_case(args, phase, size, failing, workdir)
    print("OK")


def missing_checkpoint_folder(args):
    os.makedirs(args.workdir, exist_ok=True)
    cmd = [args.launch, "-n", "2", "--", args.train, os.path.join(args.conf, "lenet5_fashion_mnist.toml"),
           "--max-steps", "5", "--epochs", "1", "--no-progress", "--validation-frequency", "0",
           "--checkpoint", "/nonexistent/dir/c.ckpt", "--csv", ""]
    env = dict(os.environ)
    env["TNT_PEER_TIMEOUT_S"] = "60"
    start = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60, env=env,
                           cwd=args.workdir)
    except subprocess.TimeoutExpired:
        fail("the run with a checkpoint in a missing folder still ran after 60 s")
    took = time.time() - start
    if p.returncode == 0:
        print(p.stdout)
        fail("the run with a checkpoint in a missing folder exited 0")
    if "/nonexistent/dir/c.ckpt" not in p.stdout:
        print(p.stdout)
        fail("the error does not name the checkpoint")
    # The whole run: start, 5 steps and the failure, all within the bound.
    if took > BOUND_S:
        print(p.stdout)
        fail(f"took {took:.2f} s (bound {BOUND_S} s)")
    print(f"checkpoint in a missing folder: exit status {p.returncode} after {took:.2f} s")
    print("OK")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what")
    parser.add_argument("--train", required=True)
    parser.add_argument("--launch", required=True)
    parser.add_argument("--conf", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    if args.what == "missing_checkpoint_folder":
        missing_checkpoint_folder(args)
    else:
        matrix(args, args.what)


if __name__ == "__main__":
    main()
