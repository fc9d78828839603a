#!/usr/bin/python3
"""Writes ONNX models with 8 fixed inputs and the source framework's outputs for tnt's import tests.

Each case NAME is NAME.onnx, NAME.input (8 samples, float32 little-endian, the model's input shape)
and NAME.expected (their 8 outputs, float32). tests/compute/onnx_test.cpp imports every NAME.onnx
of a folder into tnt, runs the inputs and compares (max|diff| <= 1e-4 * max|logit|, same arg-max).

  make_onnx_cases.py --small DIR     the small cases committed in tests/compute/onnx/data (PyTorch
                                     and onnx.helper), and the models import must refuse
  make_onnx_cases.py --resnet DIR    torchvision's ResNet-18 and ResNet-50, folded and PRESERVE,
                                     fixed and symbolic batch (ctest compute.onnx_torchvision)
  make_onnx_cases.py --gradient DIR  torchvision's ResNet-18, folded and PRESERVE, with one batch
                                     and PyTorch's float64 gradients for it (ctest
                                     compute.onnx_resnet18_gradient, tests/compute/gradient_test.cpp)
Exit status 77 (skip) where PyTorch or onnx is not installed.
"""
import argparse
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import helper, TensorProto
    import torch
    import torchvision
except ImportError as e:  # a minimal build (TNT_MINIMAL_DEPS=1): nothing to compare against
    print(f"make_onnx_cases: skipped, {e.name} is not installed (python3-torch, python3-onnx)")
    sys.exit(77)

SAMPLES = 8


def randomise_batch_norm(model, generator):
    """No BatchNorm is an identity: scale, shift, mean and variance all random."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.rand(c, generator=generator) + 0.5)
                m.bias.copy_(torch.rand(c, generator=generator) - 0.5)
                m.running_mean.copy_(torch.rand(c, generator=generator) * 0.4 - 0.2)
                m.running_var.copy_(torch.rand(c, generator=generator) + 0.5)


def write_case(out, name, model, sample_shape, opset, fixed_batch, preserve, generator):
    model.eval()
    x = torch.randn((SAMPLES,) + sample_shape, generator=generator)
    with torch.no_grad():
        # tnt leaves a final (Log)Softmax to its loss and outputs the logits before it.
        y = model.logits(x) if hasattr(model, "logits") else model(x)
    path = os.path.join(out, name + ".onnx")
    kwargs = dict(input_names=["x"], output_names=["y"], opset_version=opset, do_constant_folding=not preserve)
    if not fixed_batch:
        kwargs["dynamic_axes"] = {"x": {0: "N"}, "y": {0: "N"}}
    if preserve:
        kwargs["training"] = torch.onnx.TrainingMode.PRESERVE
    torch.onnx.export(model, x if fixed_batch else x[:1], path, **kwargs)
    model.eval()  # PRESERVE export leaves the model as it found it, but make sure
    onnx.checker.check_model(onnx.load(path), full_check=True)
    x.numpy().astype("<f4").tofile(os.path.join(out, name + ".input"))
    y.numpy().astype("<f4").tofile(os.path.join(out, name + ".expected"))
    print(f"{name}: {os.path.getsize(path)} bytes, opset {opset}, "
          f"{'fixed' if fixed_batch else 'symbolic'} batch, {'PRESERVE' if preserve else 'folded'}")


class LeNetStyle(torch.nn.Module):
    """What a small PyTorch CNN uses: Conv with padding, ReLU, MaxPool, Tanh, AvgPool2d with
    padding (exported as Pad + AveragePool), x.view(x.size(0), -1), Linear, Sigmoid, Dropout and
    a final LogSoftmax."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(4, 8, 5)
        self.pool = torch.nn.AvgPool2d(2, padding=1)
        self.fc1 = torch.nn.Linear(8 * 6 * 6, 32)
        self.fc2 = torch.nn.Linear(32, classes)
        self.drop = torch.nn.Dropout(0.1)

    def logits(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = self.pool(torch.tanh(self.conv2(x)))
        x = x.view(x.size(0), -1)
        return self.fc2(self.drop(torch.sigmoid(self.fc1(x))))

    def forward(self, x):
        return torch.log_softmax(self.logits(x), 1)


class LeNet5(torch.nn.Module):
    """LeNet-5 as a PyTorch user writes it; the training test (onnx_train.py) trains its import."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(6, 16, 5)
        self.fc1 = torch.nn.Linear(16 * 5 * 5, 120)
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class TinyResNet(torch.nn.Module):
    """Residual blocks as torchvision builds them (identity and projection shortcuts), grouped
    and dilated convolutions, BatchNorm everywhere, global average pooling."""

    def __init__(self, classes=5):
        super().__init__()
        bn = torch.nn.BatchNorm2d
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), bn(8), torch.nn.ReLU())
        self.block1 = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2, bias=False), bn(8),
                                          torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1, groups=2,
                                                                           bias=False), bn(8))
        self.block2 = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), bn(16),
                                          torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1, bias=False), bn(16))
        self.down = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 1, stride=2, bias=False), bn(16))
        self.fc = torch.nn.Linear(16, classes)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(self.block1(x) + x)
        x = torch.relu(self.block2(x) + self.down(x))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        return self.fc(torch.flatten(x, 1))


def keras_style_mlp(out, generator):
    """A dense network as tf2onnx writes Keras' Dense: MatMul then Add, weights {in, out}, an
    Identity of an initializer, a final Softmax."""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((12, 16)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(16).astype(np.float32) * 0.1
    w2 = rng.standard_normal((16, 4)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(4).astype(np.float32) * 0.1
    t = lambda name, a: helper.make_tensor(name, TensorProto.FLOAT, a.shape, a.flatten().tolist())
    nodes = [
        helper.make_node("Identity", ["w1_stored"], ["w1"], name="w1_identity"),
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="dense1/MatMul"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="dense1/BiasAdd"),
        helper.make_node("Tanh", ["h1"], ["h2"], name="dense1/Tanh"),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="dense2/MatMul"),
        helper.make_node("Add", ["h3", "b2"], ["h4"], name="dense2/BiasAdd"),
        helper.make_node("Softmax", ["h4"], ["y"], name="dense2/Softmax", axis=-1),
    ]
    graph = helper.make_graph(nodes, "keras_style_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__0", 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__0", 4])],
                              [t("w1_stored", w1), t("b1", b1), t("w2", w2), t("b2", b2)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(out, "keras_style_mlp.onnx"))
    x = torch.randn((SAMPLES, 12), generator=generator).numpy()
    logits = np.tanh(x @ w1 + b1) @ w2 + b2  # the Softmax is left to tnt's loss
    x.astype("<f4").tofile(os.path.join(out, "keras_style_mlp.input"))
    logits.astype("<f4").tofile(os.path.join(out, "keras_style_mlp.expected"))
    print("keras_style_mlp: MatMul + Add, Identity of an initializer")


def refused(out):
    """Models tnt must refuse: an LSTM, a ConvTranspose, two outputs."""
    torch.onnx.export(torch.nn.LSTM(4, 3, batch_first=True), torch.randn(1, 5, 4),
                      os.path.join(out, "refuse_lstm.onnx"), opset_version=13)
    torch.onnx.export(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ConvTranspose2d(2, 1, 3)),
                      torch.randn(1, 1, 6, 6), os.path.join(out, "refuse_conv_transpose.onnx"), opset_version=13)

    class TwoOutputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            y = self.fc(x)
            return y, torch.relu(y)

    torch.onnx.export(TwoOutputs(), torch.randn(1, 4), os.path.join(out, "refuse_two_outputs.onnx"),
                      opset_version=13)


GRADIENT_BATCH, GRADIENT_SIZE = 8, 16  # gradient_test.cpp reads the same shapes


def gradient_case(out, generator):
    """torchvision's ResNet-18 at a reduced input (3x16x16, batch 8, so that the deepest BatchNorm
    still normalises 8 values per channel), exported folded and PRESERVE, with a batch x, output
    weights r and the gradients of sum(net(x) * r) that PyTorch computes in float64: in training mode
    (batch statistics) every parameter's, in the order of named_parameters (tnt's order for the
    PRESERVE import), then the input's; in eval mode the input's (the folded import's parameters are
    not PyTorch's)."""
    import copy
    net = torchvision.models.resnet18(num_classes=10)
    randomise_batch_norm(net, generator)
    net.eval()
    sample = torch.randn(1, 3, GRADIENT_SIZE, GRADIENT_SIZE, generator=generator)
    for preserve in (False, True):
        kwargs = dict(input_names=["x"], output_names=["y"], opset_version=13, do_constant_folding=not preserve,
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        if preserve:
            kwargs["training"] = torch.onnx.TrainingMode.PRESERVE
        torch.onnx.export(net, sample, os.path.join(out, f"resnet18_{'preserve' if preserve else 'folded'}.onnx"),
                          **kwargs)
    x = torch.rand((GRADIENT_BATCH, 3, GRADIENT_SIZE, GRADIENT_SIZE), generator=generator) * 2 - 1
    r = torch.rand((GRADIENT_BATCH, 10), generator=generator) * 2 - 1
    x.numpy().astype("<f4").tofile(os.path.join(out, "gradient.input"))
    r.numpy().astype("<f4").tofile(os.path.join(out, "gradient.output_weights"))
    for training, name in ((True, "resnet18_preserve.gradients"), (False, "resnet18_folded.gradients")):
        twin = copy.deepcopy(net).double().train(training)  # training mode moves its running statistics
        xd = x.double().requires_grad_()
        (twin(xd) * r.double()).sum().backward()
        grads = ([p.grad for p in twin.parameters()] if training else []) + [xd.grad]
        np.concatenate([g.numpy().ravel() for g in grads]).astype("<f4").tofile(os.path.join(out, name))
    print(f"resnet18 gradient case: batch {GRADIENT_BATCH} of 3x{GRADIENT_SIZE}x{GRADIENT_SIZE}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", metavar="DIR")
    parser.add_argument("--resnet", metavar="DIR")
    parser.add_argument("--resnet50", action="store_true", help="with --resnet: ResNet-50 too")
    parser.add_argument("--gradient", metavar="DIR")
    args = parser.parse_args()
    torch.manual_seed(27)
    generator = torch.Generator().manual_seed(27)
    if args.small:
        os.makedirs(args.small, exist_ok=True)
        lenet = LeNetStyle()
        write_case(args.small, "lenet_symbolic_opset13", lenet, (1, 28, 28), 13, False, False, generator)
        write_case(args.small, "lenet_fixed_opset9", lenet, (1, 28, 28), 9, True, False, generator)
        write_case(args.small, "lenet5_pytorch_opset13", LeNet5(), (1, 28, 28), 13, False, False, generator)
        tiny = TinyResNet()
        randomise_batch_norm(tiny, generator)
        write_case(args.small, "tiny_resnet_preserve_opset17", tiny, (3, 8, 8), 17, False, True, generator)
        write_case(args.small, "tiny_resnet_folded_fixed_opset11", tiny, (3, 8, 8), 11, True, False, generator)
        keras_style_mlp(args.small, generator)
        refused(args.small)
    if args.resnet:
        os.makedirs(args.resnet, exist_ok=True)
        nets = [("resnet18", torchvision.models.resnet18)]
        if args.resnet50:
            nets.append(("resnet50", torchvision.models.resnet50))
        for name, make in nets:
            net = make(num_classes=10)
            randomise_batch_norm(net, generator)
            for preserve in (False, True):
                for fixed in (False, True):
                    case = f"{name}_{'preserve' if preserve else 'folded'}_{'fixed' if fixed else 'symbolic'}"
                    write_case(args.resnet, case, net, (3, 64, 64), 13, fixed, preserve, generator)
    if args.gradient:
        os.makedirs(args.gradient, exist_ok=True)
        gradient_case(args.gradient, generator)


if __name__ == "__main__":
    main()
