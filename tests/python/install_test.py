"""cmake --install into a fresh prefix, then the installed package (alone: not the build tree's)
imports and reduces on 2 ranks of the installed tnt-launch.

    install_test.py --build BUILD_DIR --prefix PREFIX --package-dir REL --python PYTHON
"""
import argparse
import os
import shutil
import subprocess
import sys

parser = argparse.ArgumentParser()
for name in ("build", "prefix", "package-dir", "python"):
    parser.add_argument("--" + name, required=True)
args = parser.parse_args()
shutil.rmtree(args.prefix, ignore_errors=True)
subprocess.run(["cmake", "--install", args.build, "--prefix", args.prefix], check=True, stdout=subprocess.DEVNULL)
site = os.path.join(args.prefix, args.package_dir)
env = dict(os.environ, PYTHONPATH=site)
probe = ("import numpy as np, tnt; a = np.full(4, tnt.get_rank() + 1.0); tnt.comm_world().allreduce(a); "
         "assert list(a) == [3.0] * 4, a; assert tnt.__file__.startswith(%r), tnt.__file__; "
         "print('installed tnt ok on rank', tnt.get_rank())" % site)
done = subprocess.run([os.path.join(args.prefix, "bin", "tnt-launch"), "-n", "2", "--output-on-all-devices", "--",
                       args.python, "-c", probe], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                      text=True, timeout=60)
print(done.stdout)
if done.returncode != 0 or done.stdout.count("installed tnt ok") != 2:
    sys.exit("the installed package does not work on 2 ranks")
