#!/usr/bin/env bash
# Builds tnt with sanitizers and runs tests there (scripts/test.sh calls it; see README.md).
#
#   scripts/sanitize.sh asan   build-asan: TNT_SANITIZE=address,undefined, the whole test suite. With
#                              clang installed it is built with clang and TNT_FUZZ=ON, so the suite
#                              includes the fuzz targets' short runs (ctest label fuzz).
#                              TNT_SANITIZE_COMPILER=gcc builds it with GCC instead, into
#                              build-asan-gcc (no fuzz targets: they need clang); =clang insists on
#                              clang.
#   scripts/sanitize.sh tsan   build-tsan: TNT_SANITIZE=thread, the tests labelled collectives,
#                              transport and actors (and only the targets they need), less the
#                              3- and 4-rank tiny-segment variants of the collectives matrix.
#   scripts/sanitize.sh        both.
#
# Every sanitizer report fails: the builds use -fno-sanitize-recover=all, the runtimes halt on the
# first report with a non-zero exit status, and because a test may expect a worker to fail (and so
# would not notice that one failed for another reason), every process writes its reports to
# files that are collected at the end: any report file fails this script, and is printed.
# Timings of each part are printed at the end. TNT_SANITIZE_JOBS sets the build's parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
parts=("$@")
((${#parts[@]})) || parts=(asan tsan)
jobs=${TNT_SANITIZE_JOBS:-$(nproc)}

launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$PWD
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
timings=()
now() { date +%s; }
timed() {  # timed LABEL COMMAND...: runs it, records how long it took, returns its status
  local label=$1 start rc=0
  shift
  start=$(now)
  "$@" || rc=$?
  timings+=("$label: $(($(now) - start)) s")
  return $rc
}

# The runtimes' options: stop at the first report, exit non-zero, write reports under $1.
sanitizer_env() {
  local reports=$1
  rm -rf "$reports" && mkdir -p "$reports"
  local common="halt_on_error=1:log_path=$reports/report:log_exe_name=1"
  export ASAN_OPTIONS="$common:abort_on_error=0:exitcode=86:detect_leaks=1"
  export UBSAN_OPTIONS="$common:print_stacktrace=1:exitcode=86"
  # print_suppressions=0: a used suppression is no report, and would otherwise be written to the report files.
  export LSAN_OPTIONS="exitcode=86:print_suppressions=0:suppressions=$PWD/scripts/lsan-suppressions.txt"
  export TSAN_OPTIONS="$common:exitcode=86:second_deadlock_stack=1"
}

check_reports() {  # fails (and prints them) when any process wrote a sanitizer report
  local reports=$1 label=$2
  mapfile -t found < <(find "$reports" -type f | sort)
  if ((${#found[@]})); then
    echo "sanitize: $label: ${#found[@]} sanitizer report(s):" >&2
    for f in "${found[@]}"; do
      echo "---- $f" >&2
      head -n 60 "$f" >&2
    done
    return 1
  fi
  echo "sanitize: $label: no sanitizer reports"
}

configure() {  # configure DIR CMAKE_ARGS...
  local dir=$1
  shift
  # -O1, as the sanitizers' documentation advises: it also compiles faster than -O3 (2 cores in CI).
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DTNT_BUILD_BENCH=OFF "${launcher[@]}" "$@" >/dev/null
}

run_asan() {
  local dir compiler=() has_clang=0
  command -v clang++ >/dev/null && command -v clang >/dev/null && has_clang=1
  case ${TNT_SANITIZE_COMPILER:-} in
    gcc)
      dir=${TNT_ASAN_BUILD_DIR:-build-asan-gcc}
      compiler=(-DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DTNT_FUZZ=OFF)
      ;;
    clang | "")
      dir=${TNT_ASAN_BUILD_DIR:-build-asan}
      if ((has_clang)); then
        compiler=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTNT_FUZZ=ON)
      elif [[ ${TNT_SANITIZE_COMPILER:-} == clang ]]; then
        echo "sanitize: TNT_SANITIZE_COMPILER=clang, but clang or clang++ is not installed" >&2
        return 1
      else
        echo "sanitize: clang not found: the ASan build uses the default compiler and builds no fuzz targets"
      fi
      ;;
    *)
      echo "sanitize: TNT_SANITIZE_COMPILER='$TNT_SANITIZE_COMPILER': expected gcc or clang" >&2
      exit 2
      ;;
  esac
  timed "asan configure" configure "$dir" -DTNT_SANITIZE=address,undefined "${compiler[@]}" || return 1
  timed "asan build" cmake --build "$dir" -j "$jobs" || return 1
  sanitizer_env "$(realpath -m "$dir")/sanitizer-reports"
  local status=0
  timed "asan tests" ctest --test-dir "$dir" --output-on-failure --timeout 900 -j "$(nproc)" || status=1
  check_reports "$dir/sanitizer-reports" "address,undefined" || status=1
  return $status
}

run_tsan() {
  local dir=${TNT_TSAN_BUILD_DIR:-build-tsan}
  timed "tsan configure" configure "$dir" -DTNT_SANITIZE=thread || return 1
  # Only what the labelled tests run (their executables and the workers they start).
  local targets=(tnt-collectives-test tnt-test-worker tnt-test-bad-peer tnt-auth-test tnt-stall-watch-test
    tnt_actors_runtime_test)
  if grep -q '^TNT_WITH_IB:BOOL=ON' "$dir/CMakeCache.txt"; then
    targets+=(tnt-ib-protocol-test tnt-ib-job-test tnt-ib-fake-fabric-test)
  fi
  timed "tsan build" cmake --build "$dir" -j "$jobs" --target "${targets[@]}" || return 1
  sanitizer_env "$(realpath -m "$dir")/sanitizer-reports"
  local status=0
  # The 3- and 4-rank variants of the matrix with tiny segments run the same ring code as the
  # 2-rank ones with more steps, at 30-55 s each under TSan: left to the Release and ASan runs, so
  # that CI stays under 45 minutes on 2 cores.
  timed "tsan tests" ctest --test-dir "$dir" --output-on-failure --timeout 900 -j "$(nproc)" \
    -L '^(collectives|transport|actors)$' -E 'MatchSerialReference/[34]ranks.*(_ring_only|_small_segments)' || status=1
  check_reports "$dir/sanitizer-reports" "thread" || status=1
  return $status
}

status=0
for part in "${parts[@]}"; do
  case $part in
    asan) run_asan || status=1 ;;
    tsan) run_tsan || status=1 ;;
    *)
      echo "sanitize: unknown part '$part' (expected asan or tsan)" >&2
      exit 2
      ;;
  esac
done
printf 'sanitize: %s\n' "${timings[@]}"
exit $status
