#!/usr/bin/env python3
"""tnt-train on the user's own data (trainer.image_folder_resnet20, trainer.user_data_errors).

resnet20: writes a folder of 32x32 RGB PNGs in two class folders (class 0 reddish, class 1
bluish, with noise) and a test folder, trains ResNet-20 on it for 3 epochs through tnt-train
(image-folder source, 2 decoding threads) on 1 rank and under tnt-launch on 2, and checks that
every run ends cleanly with a per-epoch CSV whose loss falls and a test accuracy line.
errors: a truncated PNG in the folder ends tnt-train with a non-zero status and a message that
names the file; so do NumPy files whose shapes do not fit the model.
"""
import argparse
import csv
import math
import os
import pathlib
import random
import shutil
import struct
import subprocess
import sys
import zlib


def png(width, height, pixels):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    raw = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def write_folder(root, per_class, seed):
    rng = random.Random(seed)
    for label, base in enumerate([(200, 60, 60), (60, 60, 200)]):
        folder = root / f"class_{label}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            pixels = [max(0, min(255, base[c] + rng.randrange(-50, 51))) for _ in range(32 * 32) for c in range(3)]
            (folder / f"{i:03}.png").write_bytes(png(32, 32, pixels))


def train(args, work, extra, ranks=1):
    cmd = [args.train, "--model", "resnet20", "--dataset", "image-folder", "--data-path", str(work / "train"),
           "--set", f'data.test_path="{work / "test"}"', "--set", "data.decode_threads=2",
           "--global-batch", "16", "--epochs", "3", "--optimizer", "adam", "--learning-rate", "0.002",
           "--no-progress", "--threads", "1"] + extra
    if ranks > 1:
        cmd = [args.launch, "-n", str(ranks), "--"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=work)


def resnet20(args, work):
    write_folder(work / "train", 24, 1)
    write_folder(work / "test", 8, 2)
    for ranks in (1, 2):
        csv_path = work / f"epochs_{ranks}.csv"
        out = train(args, work, ["--csv", str(csv_path)], ranks)
        if out.returncode != 0:
            sys.exit(f"{ranks} ranks: tnt-train failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        rows = list(csv.DictReader(open(csv_path)))
        losses = [float(r["loss"]) for r in rows]
        if len(rows) != 3 or not all(math.isfinite(v) for v in losses) or not losses[-1] < losses[0]:
            sys.exit(f"{ranks} ranks: expected 3 epochs with a falling loss, got {losses}\n{out.stdout}")
        if "test accuracy:" not in out.stdout or "image folder" not in out.stdout + out.stderr:
            sys.exit(f"{ranks} ranks: no test accuracy or source description:\n{out.stdout}\n{out.stderr}")
        print(f"{ranks} ranks: losses {losses}, " + out.stdout.strip().splitlines()[-1])


def errors(args, work):
    write_folder(work / "train", 4, 3)
    write_folder(work / "test", 2, 4)
    bad = work / "train" / "class_1" / "001.png"
    bad.write_bytes(bad.read_bytes()[:60])
    out = train(args, work, [])
    if out.returncode == 0 or "001.png" not in out.stderr + out.stdout:
        sys.exit(f"a truncated PNG: expected a failure naming it, got {out.returncode}:\n{out.stdout}\n{out.stderr}")
    print("truncated PNG:", [l for l in (out.stderr + out.stdout).splitlines() if "001.png" in l][0])
    # NumPy features of 1x4x4 for a model of 3x32x32 (the shape comes from the file).
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 4, 4), }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    (work / "x.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(128))
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    (work / "y.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\x00\x01")
    out = subprocess.run([args.train, "--model", "resnet20", "--dataset", "npy", "--data-path", str(work / "x.npy"),
                          "--labels-path", str(work / "y.npy"), "--global-batch", "2", "--no-progress"],
                         capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    if out.returncode == 0 or "3x32x32" not in text.replace(" ", "").replace("{", "").replace("}", "").replace(",", "x"):
        sys.exit(f"npy of the wrong shape: expected a failure naming the shapes, got {out.returncode}:\n{text}")
    print("npy of the wrong shape:", [l for l in text.splitlines() if "input" in l or "npy" in l][-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["resnet20", "errors"])
    ap.add_argument("--train", required=True)
    ap.add_argument("--launch", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    work = pathlib.Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (resnet20 if args.what == "resnet20" else errors)(args, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
