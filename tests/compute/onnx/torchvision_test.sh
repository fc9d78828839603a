#!/usr/bin/env bash
# Usage: torchvision_test.sh TESTS MAKER MAKER_OPTION GTEST_FILTER
# Makes torchvision cases with Debian's PyTorch (MAKER MAKER_OPTION DIR, make_onnx_cases.py) and runs
# the gtest binary TESTS on them (TNT_ONNX_CASES=DIR). Skips (77) without PyTorch.
#   --resnet:   ResNet-18 (and ResNet-50 with TNT_ONNX_RESNET50=1: 50 s more on 2 loaded cores), folded and
#               PRESERVE, fixed and symbolic batch: outputs for 8 fixed inputs within 1e-4 * max|logit| of
#               PyTorch's, the same arg-max (compute.onnx_torchvision).
#   --gradient: ResNet-18 folded and PRESERVE at 3x16x16 with PyTorch's float64 gradients of one batch
#               (compute.onnx_resnet18_gradient, tests/compute/gradient_test.cpp).
set -euo pipefail
tests=$1 maker=$2 option=$3 filter=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
extra=()
[[ "$option" == --resnet && "${TNT_ONNX_RESNET50:-0}" == 1 ]] && extra=(--resnet50)
rc=0
/usr/bin/python3 "$maker" "$option" "$dir" "${extra[@]}" 2> "$dir/python.err" || rc=$?
if ((rc == 77)); then exit 77; fi
if ((rc != 0)); then cat "$dir/python.err" >&2; exit "$rc"; fi
TNT_ONNX_CASES=$dir "$tests" --gtest_filter="$filter"
