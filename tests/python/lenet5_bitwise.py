"""examples/python/lenet5.py and tnt-train conf/lenet5_fashion_mnist.toml, each on 2 ranks for a few
steps with the same seed and global batch: their final weights must be bitwise equal (RTOL 0).

    lenet5_bitwise.py --launch tnt-launch --train tnt-train --compare tnt-trainer-weights-compare
                      --python /usr/bin/python3 --root REPO --workdir DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

parser = argparse.ArgumentParser()
for name in ("launch", "train", "compare", "python", "root", "workdir"):
    parser.add_argument("--" + name, required=True)
parser.add_argument("--steps", default="40")
args = parser.parse_args()

shutil.rmtree(args.workdir, ignore_errors=True)
os.makedirs(args.workdir)


def run(command):
    print("+", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=args.workdir, timeout=120, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    print(done.stdout)
    if done.returncode != 0:
        sys.exit(f"exit status {done.returncode}")
    return done.stdout


run([args.launch, "-n", "2", "--", args.train, os.path.join(args.root, "conf/lenet5_fashion_mnist.toml"),
     "--max-steps", args.steps, "--save-weights", "train.weights", "--no-progress"])
out = run([args.launch, "-n", "2", "--", args.python, os.path.join(args.root, "examples/python/lenet5.py"),
           "--max-steps", args.steps, "--save-weights", "python.weights"])
if f"trained {args.steps} steps" not in out:
    sys.exit(f"the Python run did not train {args.steps} steps")
compare = subprocess.run([args.compare, "train.weights", "python.weights", "0"], cwd=args.workdir,
                         stdout=subprocess.PIPE, text=True)
print(compare.stdout)
sys.exit(compare.returncode)
