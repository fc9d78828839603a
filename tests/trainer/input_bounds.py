#!/usr/bin/env python3
"""Bounded inputs and named conflicts through tnt-train (issue 29, points 5 and 6).

model_files: model files beyond the documented bounds (compute/README.md, "Bounds of a model
  file") are refused within 2 s, under 200 MB of memory, with a message naming the limit: 2,000
  nested residual blocks (10 MB; crashed Residual::prepare), 100,000 ReLU layers (4.5 MB; grew
  to 24 GB), and below the size bound 65 nested blocks, 10,001 layers and a dotted key of
  400,000 parts (overflowed toml++'s stack). 64 nested blocks still train, and a run file's
  dotted key of 400,000 parts is refused too.
memory: a model whose weights and activations cannot fit in the rank's memory is refused before
  allocation, with the estimate and the limit.
early_errors: errors before logging starts (a job token file too short) go to stderr without
  colour codes and name the file.
layout: channels-last .npy images (N, H, W, C) get the transpose as a hint, for a zoo model
  (built for the data's shape) and for a model file.
empty_class: an image folder with an empty class folder trains, with a warning naming it.
The files are generated here (nothing large is committed).
"""
import argparse
import pathlib
import resource
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from image_folder_run import png  # noqa: E402

SYNTHETIC = ["--dataset", "synthetic", "--shape", "1", "28", "28", "--train-size", "64", "--num-classes", "10",
             "--global-batch", "8", "--epochs", "1", "--max-steps", "1", "--no-progress", "--threads", "1"]


def run(cmd, env=None, timeout=60):
    """Runs cmd; returns (completed process, seconds, MB). MB is the peak RSS of the largest child so
    far (getrusage's RUSAGE_CHILDREN), so it bounds this child's own when the cases before were
    smaller: the refusals run before anything trains."""
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    seconds = time.monotonic() - start
    return out, seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def expect_refused(args, name, path, fragments, max_seconds=2.0, max_mb=200.0):
    out, seconds, mb = run([args.train, "--model", str(path)] + SYNTHETIC)
    text = out.stdout + out.stderr
    if out.returncode != 2:
        sys.exit(f"{name}: expected exit status 2, got {out.returncode}:\n{text[-2000:]}")
    for fragment in fragments:
        if fragment not in text:
            sys.exit(f"{name}: the message does not say '{fragment}':\n{text[-2000:]}")
    if seconds > max_seconds or mb > max_mb:
        sys.exit(f"{name}: refused after {seconds:.2f} s at {mb:.0f} MB (limits {max_seconds} s, {max_mb} MB)")
    if len(text) > 1000:
        sys.exit(f"{name}: {len(text)} characters of output; the file must not be echoed")
    print(f"{name} ({path.stat().st_size} bytes): refused in {seconds:.2f} s, peak RSS so far {mb:.0f} MB: "
          f"{out.stderr.strip().splitlines()[-1]}")


def nested(depth):
    """A model of `depth` residual blocks, each the main branch of the one before, around a ReLU."""
    lines = ['name = "nested"', "input = [1, 28, 28]"]
    for d in range(depth):
        lines += [f"[[{'.'.join(['layers'] + ['main'] * d)}]]", 'type = "residual"']
    lines += [f"[[{'.'.join(['layers'] + ['main'] * depth)}]]", 'type = "activation"', 'function = "relu"']
    lines += ["[[layers]]", 'type = "dense"', "units = 10"]
    return "\n".join(lines) + "\n"


def relus(count):
    return 'name = "long"\ninput = [1, 28, 28]\n' + '[[layers]]\ntype = "activation"\nfunction = "relu"\n' * count


def model_files(args, work):
    cases = [
        ("2,000 nested residual blocks", "nested2000.toml", nested(2000), ["1048576", "compute/README.md"]),
        ("100,000 ReLU layers", "relu100000.toml", relus(100_000), ["1048576", "compute/README.md"]),
        ("65 nested residual blocks", "nested65.toml", nested(65), ["nested more than 64 deep"]),
        ("10,001 layers", "relu10001.toml", relus(10_001), ["more than 10000 layers"]),
        ("a dotted key of 400,000 parts", "dotted.toml", "input = [1]\n" + ".".join(["a"] * 400_000) + " = 1\n",
         ["dotted.toml:2: more than 256 dots outside strings"]),
    ]
    for name, file, text, fragments in cases:
        path = work / file
        path.write_text(text)
        expect_refused(args, name, path, fragments)
    # A run file goes through toml++ too.
    path = work / "run_dotted.toml"
    path.write_text("[train]\nepochs = 1\n" + ".".join(["a"] * 400_000) + " = 1\n")
    out, seconds, mb = run([args.train, str(path)])
    if out.returncode != 2 or "run_dotted.toml:3: more than 256 dots outside strings" not in out.stderr:
        sys.exit(f"a run file with a dotted key of 400,000 parts: expected a refusal, got {out.returncode}:\n"
                 f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
    print(f"a run file with a dotted key of 400,000 parts: refused in {seconds:.2f} s:",
          out.stderr.strip().splitlines()[-1])
    # The bound itself is allowed: 64 nested blocks train one step.
    path = work / "nested64.toml"
    path.write_text(nested(64))
    out, seconds, _ = run([args.train, "--model", str(path)] + SYNTHETIC, timeout=120)
    if out.returncode != 0:
        sys.exit(f"64 nested blocks: expected a run, got {out.returncode}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    print(f"64 nested residual blocks: trained one step in {seconds:.2f} s")


def memory(args, work):
    # 10^9 units on 784 inputs: 7.8e11 weights, several TB with their gradients.
    path = work / "huge_dense.toml"
    path.write_text('name = "huge"\ninput = [1, 28, 28]\n[[layers]]\ntype = "dense"\nunits = 1000000000\n')
    expect_refused(args, "a dense layer of 10^9 units", path,
                   ["needs at least", "MiB of weights and gradients", "it may take", "available ("])
    # Outputs, not weights: 65,536 channels of 28x28 per sample are 400 MB a sample with gradients.
    path = work / "wide_conv.toml"
    path.write_text('name = "wide"\ninput = [1, 28, 28]\n[[layers]]\ntype = "conv2d"\nfilters = 65536\nkernel = 1\n'
                    '[[layers]]\ntype = "global_avg_pool2d"\n[[layers]]\ntype = "dense"\nunits = 10\n')
    out, _, _ = run([args.train, "--model", str(path), "--dataset", "synthetic", "--shape", "1", "28", "28",
                     "--train-size", "4096", "--num-classes", "10", "--global-batch", "4096", "--epochs", "1"])
    text = out.stdout + out.stderr
    if out.returncode != 2 or "MiB of layer outputs and their gradients at a micro-batch of 4096" not in text:
        sys.exit(f"65,536 channels at a batch of 4096: expected a refusal naming the outputs, got "
                 f"{out.returncode}:\n{text[-2000:]}")
    print("65,536 channels at a batch of 4096:", out.stderr.strip().splitlines()[-1])


def early_errors(args, work):
    token = work / "short.token"
    token.write_text("tooshort\n")
    env = {"PATH": "/usr/bin:/bin", "TNT_SIZE": "2", "TNT_RANK": "1", "TNT_MASTER_PORT": "1",
           "TNT_JOB_TOKEN_FILE": str(token)}
    out, _, _ = run([args.train] + SYNTHETIC, env=env)
    if out.returncode != 2 or str(token) not in out.stderr or "8 characters, fewer than 16" not in out.stderr:
        sys.exit(f"a short token file: expected a refusal on stderr naming {token}, got {out.returncode}:\n"
                 f"stdout: {out.stdout}\nstderr: {out.stderr}")
    if out.stdout.strip() or "\x1b[" in out.stderr:
        sys.exit(f"an error before logging starts went to stdout or has colour codes:\nstdout: {out.stdout!r}\n"
                 f"stderr: {out.stderr!r}")
    print("short token file:", out.stderr.strip().splitlines()[-1][:300])


def npy(path, shape, dtype, payload):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (dtype, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload)


def layout(args, work):
    n = 16
    npy(work / "x.npy", (n, 28, 28, 1), "<f4", struct.pack(f"<{n * 784}f", *[(i % 13) / 13 for i in range(n * 784)]))
    npy(work / "y.npy", (n,), "|u1", bytes(i % 10 for i in range(n)))
    data = ["--dataset", "npy", "--data-path", str(work / "x.npy"), "--labels-path", str(work / "y.npy"),
            "--global-batch", "8", "--epochs", "1", "--no-progress"]
    for model in ["lenet5", str(args.source / "conf" / "models" / "lenet5.toml")]:
        out, _, _ = run([args.train, "--model", model] + data)
        if out.returncode != 2 or "channels-last" not in out.stderr or "(0, 3, 1, 2)" not in out.stderr:
            sys.exit(f"{model} on (N, 28, 28, 1): expected a hint at the layout, got {out.returncode}:\n"
                     f"{out.stdout}{out.stderr}")
        print(f"{pathlib.Path(model).name} on (N, 28, 28, 1):", out.stderr.strip().splitlines()[-1])


def empty_class(args, work):
    for label in ("cats", "dogs"):
        folder = work / "train" / label
        folder.mkdir(parents=True)
        for i in range(4):
            (folder / f"{i}.png").write_bytes(png(8, 8, [(i * 40 + len(label)) % 256] * 8 * 8 * 3))
    (work / "train" / "birds").mkdir()
    out, _, _ = run([args.train, "--model", "mlp", "--dataset", "image-folder", "--data-path", str(work / "train"),
                     "--shape", "3", "8", "8", "--global-batch", "4", "--epochs", "1", "--no-progress"])
    warning = [line for line in out.stderr.splitlines() if "WARNING" in line and "birds" in line]
    if out.returncode != 0 or not warning:
        sys.exit(f"an empty class folder: expected a run with a warning naming 'birds', got {out.returncode}:\n"
                 f"{out.stdout}{out.stderr}")
    print("empty class folder:", warning[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["model_files", "memory", "early_errors", "layout", "empty_class"])
    ap.add_argument("--train", required=True)
    ap.add_argument("--source", required=True, type=pathlib.Path)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    work = pathlib.Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    globals()[args.what](args, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
