#!/usr/bin/env bash
# Prints the include graph between tnt's folders, derived from the `#include "tnt/..."` lines of
# the C++ files git tracks, so that anyone can re-check the layering of docs/design.md ("Layers").
#
# A folder is a top-level folder of the repository, except that actors/ holds two libraries,
# actors/runtime and actors/trainer, which are shown apart. A header "tnt/NAME/..." belongs to the
# folder that holds NAME's include/tnt/NAME directory. Includes within one folder are not shown.
#
# Usage: scripts/include-graph.sh [--all]
#   Without --all, only the libraries and tools (tests/, bench/, examples/ and fuzz/ are left out).
# Prints one line per edge, "from -> to" and how many #include lines make it, then the folders
# bottom-up. Exits 1 when an edge is not allowed by the layering of docs/design.md ("Layers", also
# written below) or the graph has a cycle.
set -euo pipefail
cd "$(dirname "$0")/.."

all=false
case "${1:-}" in
  --all) all=true ;;
  "") ;;
  *) echo "usage: scripts/include-graph.sh [--all]" >&2; exit 2 ;;
esac

folder_of() {
  case "$1" in
    actors/runtime/*) echo actors/runtime ;;
    actors/trainer/*) echo actors/trainer ;;
    *) echo "${1%%/*}" ;;
  esac
}

# tnt/NAME -> the folder that owns it, from where include/tnt/NAME/ lies.
declare -A owner
while read -r dir; do
  owner[${dir##*/}]=$(folder_of "$dir")
done < <(git ls-files '*/include/tnt/*' | sed -E 's|(/include/tnt/[^/]+)/.*|\1|' | sort -u)

# Folders that use the libraries without being one: they may include anything.
is_user() {
  case "$1" in
    tests | bench | examples | fuzz) return 0 ;;
    *) return 1 ;;
  esac
}

declare -A count
while IFS= read -r line; do
  file=${line%%:*}
  header=${line#*\"tnt/}
  header=${header%%\"*}
  # tnt/NAME/... names a folder's headers; tnt/tnt.h (the C API) names itself.
  name=${header%%/*}
  from=$(folder_of "$file")
  to=${owner[$name]:-}
  if [[ -z "$to" ]]; then
    echo "include-graph: $file includes tnt/$name/, which no folder's include/tnt/ holds" >&2
    exit 1
  fi
  if ! $all && is_user "$from"; then
    continue
  fi
  [[ "$from" == "$to" ]] && continue
  key="$from -> $to"
  count[$key]=$((${count[$key]:-0} + 1))
done < <(git grep --no-color -E '^[[:space:]]*#[[:space:]]*include "tnt/' -- '*.h' '*.hpp' '*.cpp' '*.cc')

printf '%-34s %s\n' "folder -> folder it includes" "#include lines"
for key in "${!count[@]}"; do
  printf '%-34s %5d\n' "$key" "${count[$key]}"
done | sort

# The layering of docs/design.md ("Layers"): what each library folder may include. The users of
# the libraries (is_user) may include anything.
declare -A allowed=(
  [core]=""
  [transport]="core"
  [collectives]="transport core"
  [c]="collectives transport core"
  [compute]="core"
  [dataset]="core"
  [actors/runtime]="core"
  [actors/trainer]="actors/runtime collectives transport compute dataset core"
  [launcher]="core"
  [mpi]="collectives transport core"
  [python]="actors/trainer actors/runtime collectives transport compute dataset core"
)
status=0
declare -A unknown=()
for key in "${!count[@]}"; do
  from=${key%% -> *}
  to=${key##* -> }
  is_user "$from" && continue
  if [[ -z "${allowed[$from]+set}" ]]; then
    unknown[$from]=1
    status=1
  elif [[ " ${allowed[$from]} " != *" $to "* ]]; then
    echo "include-graph: $from -> $to is not allowed by the layering of docs/design.md (\"Layers\")" >&2
    status=1
  fi
done

for from in "${!unknown[@]}"; do
  echo "include-graph: $from is not in the layering of docs/design.md; add it to this script and the doc" >&2
done

# tsort lists a node before the nodes it points to; reversed, each folder comes after every folder
# it includes.
echo
echo "bottom-up (each folder after every folder it includes):"
pairs=$(for key in "${!count[@]}"; do echo "${key/ -> / }"; done)
if ! order=$(echo "$pairs" | tsort 2>&1); then
  echo "$order" | grep '^tsort' >&2 || true
  echo "include-graph: the graph has a cycle: an include runs back up" >&2
  exit 1
fi
echo "$order" | tac | sed 's/^/  /'
exit $status
