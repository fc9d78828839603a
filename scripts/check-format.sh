#!/usr/bin/env bash
# Checks that every C++ file tracked by git is formatted by .clang-format (Debian's clang-format).
# With --fix, formats them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null; then
  echo "check-format: $clang_format not found (scripts/install-deps.sh installs clang-format)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cpp' '*.cc' '*.h' '*.hpp')
if [[ "${1:-}" == --fix ]]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
if ! "$clang_format" --dry-run --Werror "${files[@]}" 2>/tmp/tnt-check-format.$$; then
  grep -E '^[^ ].*: (error|warning):' /tmp/tnt-check-format.$$ | sed -E 's/:[0-9]+:[0-9]+: .*//' | sort -u | sed 's/^/check-format: not formatted: /' >&2
  rm -f /tmp/tnt-check-format.$$
  echo "check-format: run scripts/check-format.sh --fix" >&2
  exit 1
fi
rm -f /tmp/tnt-check-format.$$
echo "check-format: ${#files[@]} files formatted"
