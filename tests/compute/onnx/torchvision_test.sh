#!/usr/bin/env bash
# torchvision's ResNet-18 (and ResNet-50 with TNT_ONNX_RESNET50=1: 50 s more on 2 loaded cores), folded and PRESERVE, fixed and
# symbolic batch, exported by Debian's PyTorch and imported by tnt: outputs for 8 fixed inputs
# within 1e-4 * max|logit| of PyTorch's, the same arg-max. Skips (77) without PyTorch.
set -euo pipefail
tests=$1 maker=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
extra=()
[[ "${TNT_ONNX_RESNET50:-0}" == 1 ]] && extra=(--resnet50)
rc=0
/usr/bin/python3 "$maker" --resnet "$dir" "${extra[@]}" 2> "$dir/python.err" || rc=$?
if ((rc == 77)); then exit 77; fi
if ((rc != 0)); then cat "$dir/python.err" >&2; exit "$rc"; fi
TNT_ONNX_CASES=$dir "$tests" --gtest_filter=OnnxImport.MatchesSourceFramework
