#!/usr/bin/env bash
# The README's main job: installs what is needed, builds, and trains LeNet-5 on Fashion-MNIST
# with 2 ranks on this machine (conf/lenet5_fashion_mnist.toml), then prints the test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build=${TNT_BUILD_DIR:-build}
exec "$build/bin/tnt-launch" -n 2 -- "$build/bin/tnt-train" conf/lenet5_fashion_mnist.toml
