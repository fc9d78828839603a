#!/usr/bin/python3
"""Someone else reads tnt's ONNX export: OpenCV's dnn module (python3-opencv).

For LeNet-5 and ResNet-20 (tnt's zoo) and, where Debian's PyTorch is installed, torchvision's
ResNet-18 imported from ONNX: tnt-train trains a few steps on random NumPy data and writes the
test split's predictions (--predict, softmax probabilities) and its weights; tnt-ckpt export-onnx
--output softmax writes the ONNX file; onnx.checker.check_model(full_check=True) passes; OpenCV's
cv2.dnn.readNetFromONNX loads it and its outputs match tnt's within 1e-4 at batch 1 and 16.

One rank by default: on more, each rank's BatchNorm running statistics are its own (statistics
are over the local micro-batch and are not averaged), so --predict's rows from rank 1 use other
statistics than the weights file (rank 0's) holds; ResNet-20 on 2 ranks differs by 3.6e-3 so.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import cv2
    import numpy as np
    import onnx
except ImportError as e:
    print(f"opencv_check: skipped, {e.name} is not installed (python3-opencv, python3-onnx)")
    sys.exit(77)

TEST_SAMPLES = 16


def run(args, cwd):
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=240)
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr)
        sys.exit(f"opencv_check: {' '.join(args)} exited {proc.returncode}")
    return proc.stdout


def check(name, model_args, shape, classes, tools, workdir):
    rng = np.random.default_rng(27)
    files = {k: os.path.join(workdir, f"{name}_{k}.npy") for k in ("x", "y", "xt", "yt")}
    np.save(files["x"], rng.standard_normal((32,) + shape).astype(np.float32))
    np.save(files["y"], rng.integers(0, classes, 32).astype(np.int64))
    test = rng.standard_normal((TEST_SAMPLES,) + shape).astype(np.float32)
    np.save(files["xt"], test)
    np.save(files["yt"], rng.integers(0, classes, TEST_SAMPLES).astype(np.int64))
    weights, predictions = os.path.join(workdir, f"{name}.weights"), os.path.join(workdir, f"{name}_predict.npy")
    run([tools.launch, "-n", str(tools.ranks), "--", tools.train, *model_args, "--dataset", "npy", "--data-path", files["x"],
         "--labels-path", files["y"], "--test-path", files["xt"], "--test-labels-path", files["yt"], "--epochs", "2",
         "--global-batch", "8", "--save-weights", weights, "--predict", predictions, "--threads", "1"], workdir)
    exported = os.path.join(workdir, f"{name}.onnx")
    run([tools.ckpt, "export-onnx", weights, exported, "--output", "softmax"], workdir)
    onnx.checker.check_model(onnx.load(exported), full_check=True)
    want = np.load(predictions)
    net = cv2.dnn.readNetFromONNX(exported)
    worst = 0.0
    for batch in (1, TEST_SAMPLES):
        for first in range(0, TEST_SAMPLES, batch):
            net.setInput(test[first:first + batch])
            got = net.forward()
            worst = max(worst, float(np.abs(got - want[first:first + batch]).max()))
    print(f"{name}: onnx.checker full check passes; OpenCV {cv2.__version__} vs tnt-train --predict at batch 1 "
          f"and {TEST_SAMPLES}: max |diff| {worst:.2e}")
    if not worst <= 1e-4:
        sys.exit(f"opencv_check: {name}: OpenCV's outputs differ from tnt's by {worst}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launch", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--ranks", type=int, default=1)
    tools = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        check("lenet5", ["--model", "lenet5"], (1, 28, 28), 10, tools, workdir)
        check("resnet20", ["--model", "resnet20"], (3, 32, 32), 10, tools, workdir)
        try:
            import torch
            import torchvision
        except ImportError as e:
            print(f"opencv_check: ResNet-18 skipped, {e.name} is not installed")
            return
        path = os.path.join(workdir, "resnet18_in.onnx")
        torch.manual_seed(27)
        torch.onnx.export(torchvision.models.resnet18(num_classes=10).eval(), torch.randn(1, 3, 32, 32), path,
                          opset_version=13, training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                          dynamic_axes={"input.1": {0: "N"}})
        check("resnet18_imported_fine_tuned", ["--model-onnx", path], (3, 32, 32), 10, tools, workdir)


if __name__ == "__main__":
    main()
