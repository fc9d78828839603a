#!/usr/bin/python3
"""Compare tnt-bench-compute with the same training step in PyTorch (CPU).

Runs, in one invocation and under the same conditions, for every
(model, batch, threads) configuration:
  * tnt-bench-compute --json (the C++ compute core on oneDNN), and
  * the same network, batch, loss (mean softmax cross-entropy), backward and
    SGD-momentum update in PyTorch, timed the same way (warm-up, then the
    median of several timed rounds),
and prints both figures and their ratio (tnt / PyTorch), and each side's
first step (first_step_s: the step that creates primitives and touches the
memory first, before any warm-up); --json for a script. ResNet-50 is
torchvision's (python3-torchvision); tnt's zoo model has the same parameters.

--precision bf16 compares tnt's bf16 mixed precision (tnt-bench-compute
--precision bf16; Note [Mixed precision] in compute/include/tnt/compute/runtime.h)
with PyTorch under torch.autocast("cpu", dtype=torch.bfloat16), and measures
both sides in fp32 too in the same rounds (rows gain tnt_fp32_samples_per_second,
torch_fp32_samples_per_second and bf16_over_fp32, tnt's own gain).

Use Debian's interpreter (/usr/bin/python3, python3-torch). PyTorch's BLAS
should be OpenBLAS (libopenblas0-pthread), not the reference BLAS; the script
reports which libblas it loaded. Each PyTorch measurement runs in its own
process with OMP_NUM_THREADS / OPENBLAS_NUM_THREADS set to the thread count.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def lenet5(nn):
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def resnet20(nn):
    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.shortcut = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))
                             if stride != 1 or cin != cout else nn.Identity())
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.main(x) + self.shortcut(x))

    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for stage in range(3):
        cout = 16 << stage
        for block in range(3):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(Block(cin, cout, stride))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


def resnet50(nn):
    import torchvision
    return torchvision.models.resnet50(num_classes=1000)


INPUTS = {"lenet5": (1, 28, 28), "resnet20": (3, 32, 32), "resnet50": (3, 224, 224)}
CLASSES = {"lenet5": 10, "resnet20": 10, "resnet50": 1000}
MODELS = {"lenet5": lenet5, "resnet20": resnet20, "resnet50": resnet50}


def torch_worker(model_name, batch, threads, seconds, repeats, precision):
    """Runs in a child process; prints one JSON line."""
    import torch
    import torch.nn as nn
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = MODELS[model_name](nn)
    model.train()
    x = torch.randn(batch, *INPUTS[model_name])
    y = torch.randint(0, CLASSES[model_name], (batch,))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    start = time.perf_counter()
    step()
    first_step_s = time.perf_counter() - start
    start = time.perf_counter()
    warm = 0
    while warm < 2 or time.perf_counter() - start < 0.2:
        step()
        warm += 1
    per_step = (time.perf_counter() - start) / warm
    steps = max(3, int(seconds / repeats / per_step))
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(batch * steps / (time.perf_counter() - t0))
    blas = sorted({line.split()[-1] for line in open("/proc/self/maps")
                   if "blas" in line and line.split()[-1].startswith("/")})
    print(json.dumps({"samples_per_second": statistics.median(rates), "best": max(rates),
                      "first_step_s": first_step_s, "torch": torch.__version__, "blas": blas}))


def run_torch(model, batch, threads, seconds, repeats, precision):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, __file__, "--worker", model, str(batch), str(threads), str(seconds),
                           str(repeats), precision], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        sys.exit(f"torch_compare.py: the PyTorch side of {model}:{batch} failed under {sys.executable}: {last}"
                 " (run it with Debian's /usr/bin/python3, which has python3-torch and python3-torchvision)")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_tnt(binary, model, batch, threads, seconds, repeats, precision):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    done = subprocess.run([binary, "--json", "--peak-seconds", "0.1", "--case", f"{model}:{batch}", "--threads",
                           str(threads), "--seconds", str(seconds), "--repeats", str(repeats), "--precision", precision],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"torch_compare.py: tnt-bench-compute failed on {model}:{batch} ({precision}): "
                 f"{done.stderr.strip()}")
    return json.loads(done.stdout)["results"][0]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        model, batch, threads, seconds, repeats, precision = sys.argv[2:8]
        torch_worker(model, int(batch), int(threads), float(seconds), int(repeats), precision)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tnt", default="build/bench/compute/tnt-bench-compute", help="tnt-bench-compute binary")
    parser.add_argument("--case", action="append",
                        help="model:batch, model lenet5, resnet20 or resnet50 (default lenet5:64 lenet5:256 resnet20:64)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per configuration and side")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate tnt and PyTorch this many times per configuration (medians reported)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="bf16: tnt's mixed precision against PyTorch's autocast, both also in fp32")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.access(args.tnt, os.X_OK):
        sys.exit(f"torch_compare.py: {args.tnt} is not an executable; build tnt-bench-compute or pass --tnt")
    cases = args.case or ["lenet5:64", "lenet5:256", "resnet20:64"]
    rows = []
    info = {}
    for case in cases:
        model, _, batch = case.partition(":")
        if model not in INPUTS or not batch.isdigit():
            sys.exit(f"torch_compare.py: bad --case '{case}' (lenet5|resnet20|resnet50:batch)")
        for threads in args.threads:
            tnt_rates, torch_rates, tnt_first, torch_first, ratios = [], [], [], [], []
            tnt_fp32, torch_fp32 = [], []
            for _ in range(args.rounds):
                r = run_tnt(args.tnt, model, int(batch), threads, args.seconds, args.repeats, args.precision)
                tnt_rates.append(r["samples_per_second"])
                tnt_first.append(r["first_step_s"])
                t = run_torch(model, int(batch), threads, args.seconds, args.repeats, args.precision)
                torch_rates.append(t["samples_per_second"])
                torch_first.append(t["first_step_s"])
                ratios.append(tnt_rates[-1] / torch_rates[-1])
                info = {"torch": t["torch"], "blas": t["blas"]}
                if args.precision == "bf16":
                    tnt_fp32.append(run_tnt(args.tnt, model, int(batch), threads, args.seconds, args.repeats,
                                            "fp32")["samples_per_second"])
                    torch_fp32.append(run_torch(model, int(batch), threads, args.seconds, args.repeats,
                                                "fp32")["samples_per_second"])
            a, b = statistics.median(tnt_rates), statistics.median(torch_rates)
            rows.append({"model": model, "batch": int(batch), "threads": threads, "precision": args.precision,
                         "tnt_samples_per_second": a, "torch_samples_per_second": b, "ratio": a / b,
                         "round_ratios": ratios, "tnt_first_step_s": statistics.median(tnt_first),
                         "torch_first_step_s": statistics.median(torch_first)})
            if tnt_fp32:
                rows[-1].update({"tnt_fp32_samples_per_second": statistics.median(tnt_fp32),
                                 "torch_fp32_samples_per_second": statistics.median(torch_fp32),
                                 "bf16_over_fp32": a / statistics.median(tnt_fp32)})
            if not args.json:
                if len(rows) == 1:
                    print(f"PyTorch {info['torch']}, BLAS loaded: {', '.join(info['blas']) or 'none'}; "
                          f"precision {args.precision}")
                    print(f"{'model':10} {'batch':>6} {'threads':>8} {'tnt samples/s':>15} "
                          f"{'torch samples/s':>16} {'tnt/torch':>10} {'tnt first s':>12} {'torch first s':>14}"
                          + (f" {'tnt fp32':>10} {'torch fp32':>11} {'tnt bf16/fp32':>14}" if tnt_fp32 else ""))
                r = rows[-1]
                line = (f"{model:10} {batch:>6} {threads:>8} {a:15.2f} {b:16.2f} {r['ratio']:10.2f} "
                        f"{r['tnt_first_step_s']:12.2f} {r['torch_first_step_s']:14.2f}")
                if tnt_fp32:
                    line += (f" {r['tnt_fp32_samples_per_second']:10.2f} {r['torch_fp32_samples_per_second']:11.2f}"
                             f" {r['bf16_over_fp32']:14.2f}")
                print(line, flush=True)
    if args.json:
        print(json.dumps({"pytorch": info, "results": rows}, indent=1))


if __name__ == "__main__":
    main()
