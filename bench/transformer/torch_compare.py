#!/usr/bin/python3
"""tnt's Transformer against PyTorch's nn.Transformer, trained on the same batches.

  bench/transformer/torch_compare.py [--steps 600] [--threads 1] [--sentences 500] [--json]
                                     [--config conf/transformer_en_de.toml] [--build build]
                                     [--learning-rate 0.002] [--warmup 200]

In one run:
  1. `tnt-train CONFIG --export-pairs DIR` writes the vocabulary, the token ids of every global
     batch the run trains on, in its order (FreeDict English-German, tnt's cleaning, split and
     character tokenization, length bucketing), and the test pairs;
  2. tnt-train trains its model (the run file's, conf/models/transformer_en_de.toml: pre-norm,
     d_model 64, 4 heads, d_ff 256, 2 + 2 layers) for --steps steps, as one rank with --threads
     threads, evaluates the test split with teacher forcing and decodes --sentences test pairs
     greedily (`--translations`);
  3. PyTorch trains nn.Transformer with the same sizes (norm_first, batch_first, the same
     sinusoidal positions, embeddings scaled by sqrt(d_model), separate source and target
     embeddings, no dropout) on the same batches in the same order, with the same loss (mean
     cross-entropy over the target tokens, label smoothing as in the run file), optimizer (Adam,
     the run file's betas and epsilon) and schedule (linear warm-up to --learning-rate, then
     inverse-square-root decay, as in Vaswani et al.; tnt's schedule.kind = "inverse_sqrt"),
     with torch.set_num_threads(--threads); then evaluates and decodes alike.
Both sides are scored by this script on the same pairs: token accuracy on the whole test split
(teacher forcing), exact match and chrF (character n-gram F-score, orders 1-6, beta 2, white
space removed, corpus statistics: sacreBLEU's default) of the greedy translations, and training
tokens/s (target tokens, </s> included, over the training loop's wall time). Copying the English
source is the baseline. PyTorch's weights are drawn from the distributions of tnt's model file
(Glorot uniform; He uniform for the first feed-forward layer; zero biases), not PyTorch's defaults,
whose N(0, 1) embeddings times sqrt(d_model) train visibly worse here.

Use Debian's interpreter (/usr/bin/python3 with python3-torch).
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


# --- chrF --------------------------------------------------------------------------------------

def chrf(hypotheses, references, order=6, beta=2.0):
    """Corpus chrF (Popovic 2015, sacreBLEU's defaults): per n-gram order, clipped matches and the
    hypothesis and reference n-gram counts are summed over the corpus; F_beta per order, averaged
    over the orders that occur; 0..100."""
    matches = [0] * order
    hyp_total = [0] * order
    ref_total = [0] * order
    for hyp, ref in zip(hypotheses, references):
        h = "".join(hyp.split())
        r = "".join(ref.split())
        for n in range(1, order + 1):
            hn = Counter(h[i:i + n] for i in range(len(h) - n + 1))
            rn = Counter(r[i:i + n] for i in range(len(r) - n + 1))
            matches[n - 1] += sum(min(c, rn[g]) for g, c in hn.items())
            hyp_total[n - 1] += sum(hn.values())
            ref_total[n - 1] += sum(rn.values())
    scores = []
    for n in range(order):
        if hyp_total[n] == 0 and ref_total[n] == 0:
            continue
        p = matches[n] / hyp_total[n] if hyp_total[n] else 0.0
        r = matches[n] / ref_total[n] if ref_total[n] else 0.0
        scores.append(0.0 if p + r == 0 else (1 + beta ** 2) * p * r / (beta ** 2 * p + r))
    return 100.0 * sum(scores) / len(scores) if scores else 0.0


def exact_match(hypotheses, references):
    return sum(h == r for h, r in zip(hypotheses, references)) / max(1, len(references))


# --- the exported data -------------------------------------------------------------------------

def ids(text):
    return [int(t) for t in text.split()] if text else []


def read_export(directory):
    info = {}
    with open(os.path.join(directory, "info.txt")) as f:
        for line in f:
            key, value = line.split()
            info[key] = int(value)
    steps = [[] for _ in range(info["steps"])]
    with open(os.path.join(directory, "train.tsv"), encoding="utf-8") as f:
        for line in f:
            step, source, target = line.rstrip("\n").split("\t")
            steps[int(step)].append((ids(source), ids(target)))
    test = []
    with open(os.path.join(directory, "test.tsv"), encoding="utf-8") as f:
        for line in f:
            source_text, reference, source, target = line.rstrip("\n").split("\t")
            test.append((source_text, reference, ids(source), ids(target)))
    tokens = []
    escapes = {"\\\\": "\\", "\\s": " ", "\\t": "\t", "\\n": "\n", "\\r": "\r"}
    with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    header = 4  # tnt-vocabulary 1, kind, tokens N, merges M
    count = int(lines[2].split()[1])
    for line in lines[header:header + count]:
        tokens.append(re.sub(r"\\[\\stnr]", lambda m: escapes[m.group(0)], line))
    return info, steps, test, tokens


def detokenize(token_ids, tokens, info):
    out = []
    for t in token_ids:
        if t == info["eos"]:
            break
        if t in (info["pad"], info["bos"]):
            continue
        out.append("\ufffd" if t == 3 else tokens[t])
    return "".join(out)


def chosen_pairs(test, n):
    """The test pairs tnt-train decodes: spread evenly over the split (k * size / n)."""
    n = min(n, len(test))
    return [k * len(test) // n for k in range(n)]


# --- tnt ---------------------------------------------------------------------------------------

def tnt_command(args, extra):
    return [os.path.join(args.build, "bin", "tnt-train"), args.config, "--max-steps", str(args.steps),
            "--threads", str(args.threads), "--no-progress", "--checkpoint", "", "--csv", "",
            "--validation-frequency", "0", "--set", f"translate.sentences={args.sentences}",
            "--set", "translate.beam=1", "--set", 'schedule.kind="inverse_sqrt"',
            "--set", f"schedule.learning_rate={args.learning_rate}",
            "--set", f"schedule.warmup_steps={args.warmup}"] + extra


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"torch_compare: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-4000:]}")
    return p.stdout


def run_tnt(args, workdir, env):
    translations = os.path.join(workdir, "tnt_translations.tsv")
    out = run(tnt_command(args, ["--translations", translations]), env)
    trained = re.search(r"trained (\d+) steps in ([0-9.]+) s: [0-9.]+ sentence pairs/s, ([0-9.]+) target tokens/s", out)
    test = re.search(r"token accuracy ([0-9.]+) over (\d+) tokens", out)
    scored = re.search(r"exact match ([0-9.]+), chrF ([0-9.]+);", out)
    if not trained or not test or not scored:
        sys.exit(f"torch_compare: could not read tnt-train's output:\n{out[-4000:]}")
    with open(translations, encoding="utf-8") as f:
        hypotheses = [line.rstrip("\n").split("\t")[2] for line in f]
    return {"steps": int(trained.group(1)), "seconds": float(trained.group(2)),
            "tokens_per_s_by_tnt_train": float(trained.group(3)),
            "token_accuracy": float(test.group(1)), "test_tokens": int(test.group(2)),
            "hypotheses": hypotheses, "chrf_by_tnt_train": float(scored.group(2))}


# --- PyTorch -----------------------------------------------------------------------------------

def run_torch(args, info, steps, test, optimizer_settings):
    import torch
    from torch import nn

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    vocab, d_model, length = info["vocab_size"], 64, info["decoder_length"]
    pad, bos, eos = info["pad"], info["bos"], info["eos"]

    def positions(t):
        position = torch.arange(t, dtype=torch.float64).unsqueeze(1)
        rate = torch.pow(10000.0, -(torch.arange(d_model) - torch.arange(d_model) % 2).double() / d_model)
        angle = position * rate
        pe = torch.where(torch.arange(d_model) % 2 == 0, torch.sin(angle), torch.cos(angle))
        return pe.float()

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.source_embedding = nn.Embedding(vocab, d_model)
            self.target_embedding = nn.Embedding(vocab, d_model)
            self.transformer = nn.Transformer(d_model=d_model, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                                              dim_feedforward=256, dropout=0.0, activation="relu",
                                              batch_first=True, norm_first=True)
            self.logits = nn.Linear(d_model, vocab)
            self.register_buffer("pe", positions(length + 1), persistent=False)
            self.scale = math.sqrt(d_model)

        def embed(self, table, x):
            return table(x) * self.scale + self.pe[: x.shape[1]]

        def encode(self, source, source_pad):
            return self.transformer.encoder(self.embed(self.source_embedding, source),
                                            src_key_padding_mask=source_pad)

        def decode(self, memory, source_pad, target_in, target_pad):
            t = target_in.shape[1]
            causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            y = self.transformer.decoder(self.embed(self.target_embedding, target_in), memory, tgt_mask=causal,
                                         tgt_key_padding_mask=target_pad, memory_key_padding_mask=source_pad)
            return self.logits(y)

        def forward(self, source, target_in):
            source_pad, target_pad = source == pad, target_in == pad
            return self.decode(self.encode(source, source_pad), source_pad, target_in, target_pad)

    def tensors(pairs):
        s_len = max(len(s) for s, _ in pairs) + 1
        t_len = max(len(t) for _, t in pairs) + 1
        source = torch.full((len(pairs), s_len), pad, dtype=torch.long)
        target_in = torch.full((len(pairs), t_len), pad, dtype=torch.long)
        labels = torch.full((len(pairs), t_len), -100, dtype=torch.long)
        for i, (s, t) in enumerate(pairs):
            source[i, : len(s) + 1] = torch.tensor(s + [eos])
            target_in[i, : len(t) + 1] = torch.tensor([bos] + t)
            labels[i, : len(t) + 1] = torch.tensor(t + [eos])
        return source, target_in, labels

    model = Seq2Seq()

    def glorot(weight, fan_in, fan_out):
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        nn.init.uniform_(weight, -bound, bound)

    with torch.no_grad():  # the model file's initialisers (conf/models/transformer_en_de.toml)
        for table in (model.source_embedding, model.target_embedding):
            glorot(table.weight, vocab, d_model)
        for module in model.modules():
            if isinstance(module, nn.MultiheadAttention):
                for block in module.in_proj_weight.chunk(3):  # query, key, value: d x d each
                    glorot(block, d_model, d_model)
                glorot(module.out_proj.weight, d_model, d_model)
                module.in_proj_bias.zero_()
                module.out_proj.bias.zero_()
            elif isinstance(module, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
                nn.init.kaiming_uniform_(module.linear1.weight, nonlinearity="relu")  # He uniform
                glorot(module.linear2.weight, module.linear2.in_features, module.linear2.out_features)
                module.linear1.bias.zero_()
                module.linear2.bias.zero_()
        glorot(model.logits.weight, d_model, vocab)
        model.logits.bias.zero_()
    beta1, beta2, epsilon, smoothing = optimizer_settings
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, betas=(beta1, beta2), eps=epsilon)
    warmup = args.warmup
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, 1.0) * math.sqrt(warmup / max(step + 1, warmup)))
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=smoothing)
    batches = [tensors(pairs) for pairs in steps]  # built before the clock starts, as tnt's loader prefetches
    model.train()
    start = time.perf_counter()
    for source, target_in, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        logits = model(source, target_in)
        loss = loss_fn(logits.reshape(-1, vocab), labels.reshape(-1))
        loss.backward()
        optimizer.step()
        schedule.step()
    seconds = time.perf_counter() - start

    model.eval()
    correct = total = 0
    with torch.no_grad():
        for first in range(0, len(test), 256):
            source, target_in, labels = tensors([(s, t) for _, _, s, t in test[first:first + 256]])
            predicted = model(source, target_in).argmax(-1)
            real = labels != -100
            correct += int(((predicted == labels) & real).sum())
            total += int(real.sum())
        hypotheses = []
        chosen = chosen_pairs(test, args.sentences)
        for first in range(0, len(chosen), 64):
            rows = [test[i][2] for i in chosen[first:first + 64]]
            source, _, _ = tensors([(s, [0]) for s in rows])
            source_pad = source == pad
            memory = model.encode(source, source_pad)
            out = torch.full((len(rows), 1), bos, dtype=torch.long)
            done = torch.zeros(len(rows), dtype=torch.bool)
            for _ in range(length):
                nxt = model.decode(memory, source_pad, out, torch.zeros_like(out, dtype=torch.bool))[:, -1].argmax(-1)
                nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
                out = torch.cat([out, nxt.unsqueeze(1)], dim=1)
                done |= nxt == eos
                if bool(done.all()):
                    break
            hypotheses += [out[i, 1:].tolist() for i in range(len(rows))]
    return {"steps": len(batches), "seconds": seconds, "token_accuracy": correct / total, "test_tokens": total,
            "hypothesis_ids": hypotheses, "torch_version": torch.__version__}


def optimizer_settings(config_path):
    """Adam's betas and epsilon and the label smoothing that tnt-train reads from the run file (tnt's
    defaults where it says nothing)."""
    with open(config_path, "rb") as f:
        config = tomllib.load(f)
    optimizer, train = config.get("optimizer", {}), config.get("train", {})
    if optimizer.get("kind", "sgd") != "adam":
        sys.exit(f"torch_compare: {config_path}: optimizer.kind must be \"adam\" for this comparison")
    return (float(optimizer.get("beta1", 0.9)), float(optimizer.get("beta2", 0.999)),
            float(optimizer.get("epsilon", 1e-7)), float(train.get("label_smoothing", 0.0)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--config", default=os.path.join(ROOT, "conf", "transformer_en_de.toml"))
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sentences", type=int, default=500, help="test pairs decoded and scored")
    ap.add_argument("--learning-rate", type=float, default=0.002, help="the peak, after the warm-up")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1, help="PyTorch's initialisation")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.steps < 1 or args.threads < 1 or args.sentences < 1 or args.warmup < 1:
        ap.error("--steps, --threads, --sentences and --warmup must be at least 1")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    settings = optimizer_settings(args.config)
    with tempfile.TemporaryDirectory() as workdir:
        export = os.path.join(workdir, "export")
        run(tnt_command(args, ["--export-pairs", export]), env)
        info, steps, test, tokens = read_export(export)
        if len(steps) < args.steps:
            print(f"torch_compare: the run file trains {len(steps)} steps, fewer than --steps {args.steps}",
                  file=sys.stderr)
        log = (lambda *a: None) if args.json else (lambda *a: print(*a, file=sys.stderr))
        log(f"tnt: training {len(steps)} steps ...")
        tnt = run_tnt(args, workdir, env)
        log(f"PyTorch: training {len(steps)} steps ...")
        torch_side = run_torch(args, info, steps, test, settings)
    chosen = chosen_pairs(test, args.sentences)
    references = [test[i][1] for i in chosen]
    sources = [test[i][0] for i in chosen]
    target_tokens = sum(len(t) + 1 for pairs in steps for _, t in pairs)
    torch_hypotheses = [detokenize(h, tokens, info) for h in torch_side["hypothesis_ids"]]
    if len(tnt["hypotheses"]) != len(references):
        sys.exit(f"torch_compare: tnt-train decoded {len(tnt['hypotheses'])} pairs, expected {len(references)}")

    def scores(side, hypotheses):
        return {"tokens_per_s": target_tokens / side["seconds"], "train_seconds": side["seconds"],
                "token_accuracy": side["token_accuracy"], "exact_match": exact_match(hypotheses, references),
                "chrf": chrf(hypotheses, references)}

    result = {"config": os.path.relpath(args.config, ROOT), "steps": len(steps), "threads": args.threads,
              "global_batch": info["global_batch"], "target_tokens": target_tokens, "sentences": len(references),
              "learning_rate": args.learning_rate, "warmup": args.warmup,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch_version": torch_side["torch_version"],
              "tnt": scores(tnt, tnt["hypotheses"]), "torch": scores(torch_side, torch_hypotheses),
              "copy": {"exact_match": exact_match(sources, references), "chrf": chrf(sources, references)}}
    # tnt-train scores its translations itself (trainer/translation.h): the two chrF must agree.
    result["tnt"]["chrf_by_tnt_train"] = tnt["chrf_by_tnt_train"]
    result["tnt"]["tokens_per_s_by_tnt_train"] = tnt["tokens_per_s_by_tnt_train"]
    if abs(tnt["chrf_by_tnt_train"] - result["tnt"]["chrf"]) > 0.01:
        print(f"torch_compare: warning: tnt-train's chrF {tnt['chrf_by_tnt_train']:.2f} differs from this script's "
              f"{result['tnt']['chrf']:.2f} on the same translations", file=sys.stderr)
    result["tokens_per_s_ratio"] = result["tnt"]["tokens_per_s"] / result["torch"]["tokens_per_s"]
    result["token_accuracy_difference"] = result["tnt"]["token_accuracy"] - result["torch"]["token_accuracy"]
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"\n{result['config']}: {result['steps']} steps of {result['global_batch']} pairs ({target_tokens} target "
          f"tokens), {args.threads} thread(s), Adam with warm-up ({args.warmup}) and inverse-square-root decay from "
          f"{args.learning_rate}; {len(references)} test pairs decoded greedily; PyTorch {result['torch_version']}")
    print(f"{'':<22} {'tokens/s':>9} {'train s':>8} {'token acc':>9} {'exact':>7} {'chrF':>6}")
    for name, key in (("tnt", "tnt"), ("PyTorch nn.Transformer", "torch")):
        r = result[key]
        print(f"{name:<22} {r['tokens_per_s']:>9.0f} {r['train_seconds']:>8.1f} {r['token_accuracy']:>9.4f} "
              f"{r['exact_match']:>7.4f} {r['chrf']:>6.2f}")
    c = result["copy"]
    print(f"{'copying the source':<22} {'':>9} {'':>8} {'':>9} {c['exact_match']:>7.4f} {c['chrf']:>6.2f}")
    print(f"tnt / PyTorch tokens/s: {result['tokens_per_s_ratio']:.2f}; token accuracy tnt - PyTorch: "
          f"{100 * result['token_accuracy_difference']:+.2f} points")


if __name__ == "__main__":
    main()
