#!/usr/bin/python3
"""An imported ONNX network trains on tnt, on 2 ranks (compute/README.md, "Models from PyTorch and Keras").

  lenet5    LeNet-5 written in PyTorch (tests/compute/onnx/data/lenet5_pytorch_opset13.onnx) on
            Fashion-MNIST, 4 epochs: test accuracy >= 0.88.
  resnet18  torchvision's ResNet-18 exported with PRESERVE (BatchNorm kept) by Debian's PyTorch,
            50 steps on synthetic data: every loss finite, the last 10 steps' mean below the first
            10 steps'. Skips (77) without PyTorch.
  refusals  tnt-train on 2 ranks refuses an LSTM, a ConvTranspose, two outputs, a truncated file and
            a file that is not ONNX before any rank trains: exit status 2, the cause named.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(args, cwd):
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        print(out)
        sys.exit(f"onnx_train: {' '.join(args)} exited {proc.returncode}")
    return out


def lenet5(launch, train, conf, workdir):
    out = run([launch, "-n", "2", "--", train, os.path.join(conf, "lenet5_fashion_mnist.toml"),
               "--model-onnx", os.path.join(HERE, "data", "lenet5_pytorch_opset13.onnx"), "--epochs", "4"], workdir)
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", out).group(1))
    print(f"imported LeNet-5, 2 ranks, 4 epochs: test accuracy {accuracy:.4f}")
    if accuracy < 0.88:
        print(out)
        sys.exit("onnx_train: test accuracy below 0.88")


def resnet18(launch, train, workdir):
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"onnx_train: skipped, {e.name} is not installed")
        sys.exit(77)
    path = os.path.join(workdir, "resnet18.onnx")
    torch.manual_seed(27)
    torch.onnx.export(torchvision.models.resnet18(num_classes=4).eval(), torch.randn(1, 3, 16, 16), path, opset_version=13,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                      dynamic_axes={"input.1": {0: "N"}})
    out = run([launch, "-n", "2", "--", train, "--model-onnx", path, "--dataset", "synthetic", "--shape", "3", "16",
               "16", "--num-classes", "4", "--train-size", "64", "--test-size", "0", "--global-batch", "8",
               "--max-steps", "50", "--epochs", "50", "--optimizer", "sgd", "--learning-rate", "0.01", "--print-steps",
               "--threads", "1"], workdir)
    losses = [float(x) for x in re.findall(r"^epoch \d+ step \d+ loss (\S+)", out, re.MULTILINE)]
    if len(losses) < 50 or not all(math.isfinite(x) for x in losses):
        print(out)
        sys.exit(f"onnx_train: expected 50 finite losses, got {losses}")
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    print(f"imported ResNet-18, 2 ranks, 50 steps: mean loss of the first 10 steps {first:.4f}, last 10 {last:.4f}")
    if not last < first:
        sys.exit("onnx_train: the loss did not decrease")


def refusals(launch, train, conf, workdir):
    data = os.path.join(HERE, "data")
    with open(os.path.join(data, "lenet5_pytorch_opset13.onnx"), "rb") as f:
        good = f.read()
    truncated = os.path.join(workdir, "truncated.onnx")
    with open(truncated, "wb") as f:
        f.write(good[: len(good) // 3])
    cases = [(os.path.join(data, "refuse_lstm.onnx"), "(the graph has Expand, LSTM, Squeeze, Transpose)"),
             (os.path.join(data, "refuse_conv_transpose.onnx"), "(ConvTranspose, opset 13"),
             (os.path.join(data, "refuse_two_outputs.onnx"), "the graph has 2 outputs"),
             (truncated, "not an ONNX model"),
             (os.path.join(conf, "lenet5_fashion_mnist.toml"), "not an ONNX model")]
    for path, cause in cases:
        proc = subprocess.run([launch, "-n", "2", "--", train, os.path.join(conf, "lenet5_fashion_mnist.toml"),
                               "--model-onnx", path], cwd=workdir, capture_output=True, text=True, timeout=120)
        out = proc.stdout + proc.stderr
        if proc.returncode != 2 or cause not in out or "Epoch 1" in out:
            print(out)
            sys.exit(f"onnx_train: {path}: expected exit status 2 before training, naming '{cause}'")
        print(f"refused {os.path.basename(path)}: {cause}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=["lenet5", "resnet18", "refusals"])
    parser.add_argument("--launch", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--conf", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        if args.case == "lenet5":
            lenet5(args.launch, args.train, args.conf, workdir)
        elif args.case == "refusals":
            refusals(args.launch, args.train, args.conf, workdir)
        else:
            resnet18(args.launch, args.train, workdir)


if __name__ == "__main__":
    main()
