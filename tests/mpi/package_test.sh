#!/usr/bin/env bash
# Installs tnt into a temporary prefix and builds the MPI layer's test programs against it as a
# user would: with the installed tnt-mpicc (as with mpicc), and with CMake's
# find_package(tnt COMPONENTS mpi); then runs them on 2 ranks under the installed tnt-launch.
#   package_test.sh BUILD_DIR SOURCE_DIR [C_COMPILER CXX_COMPILER [SANITIZE_FLAGS]]
# A sanitizer build's libraries need the programs built with the same compiler and sanitizers:
# given here, they reach the wrappers through TNT_MPICC and TNT_MPICXX, as a user would give them.
set -euo pipefail
build_dir=$1 source_dir=$2 c_compiler=${3:-cc} cxx_compiler=${4:-c++} sanitize_flags=${5:-}
export TNT_MPICC="$c_compiler $sanitize_flags" TNT_MPICXX="$cxx_compiler $sanitize_flags"
work=$(mktemp -d "${TMPDIR:-/tmp}/tnt-mpi-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build_dir" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; exit 1; }
for tool in tnt-mpicc tnt-mpicxx tnt-launch; do
  [[ -x "$prefix/bin/$tool" ]] || { echo "FAILED: $tool is not installed in bin/"; exit 1; }
done

# The wrapper's flags point into the prefix, wherever it lies.
showme=$("$prefix/bin/tnt-mpicc" --showme prog.c)
echo "tnt-mpicc --showme: $showme"
[[ "$showme" == *"-I$prefix/bin/../include/tnt/mpi"* && "$showme" == *"-ltnt_mpi"* ]] ||
  { echo "FAILED: tnt-mpicc --showme does not name the prefix's include/tnt/mpi and -ltnt_mpi"; exit 1; }

# Compiling and linking in two steps, as makefiles do, and in one.
"$prefix/bin/tnt-mpicc" -O2 -Wall -c "$source_dir/tests/mpi/collectives.c" -o "$work/collectives.o"
"$prefix/bin/tnt-mpicc" "$work/collectives.o" -o "$work/collectives"
"$prefix/bin/tnt-mpicc" -O2 -Wall "$source_dir/tests/mpi/errors.c" -o "$work/errors"
# The C++ wrapper: the same header compiles as C++.
"$prefix/bin/tnt-mpicxx" -O2 -x c++ "$source_dir/tests/mpi/start_end.c" -o "$work/start_end_cxx"

cmake -S "$source_dir/tests/mpi/package" -B "$work/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$c_compiler" -DCMAKE_C_FLAGS="$sanitize_flags" -DCMAKE_EXE_LINKER_FLAGS="$sanitize_flags" \
  -DTNT_MPI_TEST_SOURCES="$source_dir/tests/mpi" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
# An unknown component is refused at configure time, by name.
mkdir -p "$work/bad"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(bad LANGUAGES C)\nfind_package(tnt REQUIRED COMPONENTS nonesuch)\n' \
  > "$work/bad/CMakeLists.txt"
if cmake -S "$work/bad" -B "$work/bad/build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/bad.log" 2>&1; then
  echo "FAILED: find_package(tnt COMPONENTS nonesuch) succeeded"; exit 1
fi
grep -q "no component nonesuch" "$work/bad.log" || { cat "$work/bad.log"; echo "FAILED: the refusal does not name it"; exit 1; }

for program in "$work/collectives" "$work/errors" "$work/start_end_cxx" "$work/cmake-build/start_end"; do
  timeout 120 "$prefix/bin/tnt-launch" -n 2 -- "$program" || { echo "FAILED: $program on 2 ranks"; exit 1; }
done
echo PASS
