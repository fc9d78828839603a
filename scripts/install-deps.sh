#!/usr/bin/env bash
# Installs every Debian package tnt needs to build, test and benchmark.
# Idempotent: apt-get skips what is already there. Run as root (or via sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  clang-format  # scripts/check-format.sh, run by scripts/test.sh
  clang libclang-rt-dev libomp-dev llvm  # scripts/sanitize.sh: ASan build with clang and libFuzzer; llvm-symbolizer
  libboost-dev libboost-system-dev
  capnproto libcapnp-dev
  libssl-dev
  libibverbs-dev rdma-core
  libnuma-dev numactl
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers  # Debian's oneDNN CMake package requires OpenCL
  libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev
  libpng-dev libturbojpeg0-dev  # the image-folder source (dataset/): PNG and JPEG decoding
  libcli11-dev libtomlplusplus-dev
  dataset-fashion-mnist
  dict-freedict-eng-deu  # English-German pairs for the translation tutorial (dataset/ FreeDict source)
  openssh-server openssh-client iproute2 procps psmisc
  openmpi-bin libopenmpi-dev
  gfortran  # examples/fortran-halo: the C API from Fortran (tests/c)
  libpmix-dev  # ranks started by mpirun find rank 0 through PMIx (transport/src/pmix_exchange.cpp)
  slurm-wlm munge  # the test Slurm of ctest label "slurm" (tests/slurm/slurm_cluster.sh)
  python3
  python3-dev python3-numpy pybind11-dev  # the Python package (python/) and its tests
  python3-matplotlib  # examples/python: the loss-curve callback's PNG
  libfftw3-dev pkg-config  # examples/fft2d: the distributed 2-D FFT and its test
  libonnx-dev libprotobuf-dev protobuf-compiler  # ONNX import and export (compute/src/onnx_*.cpp)
  python3-onnx python3-opencv  # ONNX tests: onnx.checker, and OpenCV's dnn reading tnt's exports
)
# Benchmark comparisons only (PyTorch CPU with OpenBLAS); skipped with TNT_MINIMAL_DEPS=1.
if [[ "${TNT_MINIMAL_DEPS:-0}" != 1 ]]; then
  packages+=(python3-torch python3-torchvision libopenblas0-pthread)
  packages+=(time)  # /usr/bin/time -v: peak resident memory in bench/trainer/accumulation_memory.sh
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#packages[@]} packages present"
fi
