#!/usr/bin/env python3
"""ember's CPU backend against PyTorch on the CPU, model by model, measured in one run.
bench/cpu_vs_pytorch.sh runs it (and installs Debian's python3-torch when it is missing):

    python3 bench/cpu_vs_pytorch.py compare --ember build/release/bin/ember --rounds 3
    python3 bench/cpu_vs_pytorch.py pytorch --model resnet --batch-size 128 --threads 2

`compare` trains each model with `ember train` and with the PyTorch mirror below, back to
back in every round (the order alternating between rounds so drift cancels), and prints
steady-state training images/s per framework (median and range over the rounds) and
the ratio ember / PyTorch (median of the per-round ratios, and its range); with
--with-reference also ember's reference loops (EMBER_CPU_REFERENCE=1: the CPU backend
without its fast paths). `pytorch` trains one model in this process and prints one JSON
line.

What is mirrored, so both frameworks do the same work per step:
  * the models of engine/nn/models.cpp: the same layers, widths, strides, padding and
    conv bias settings (no bias on a conv that feeds BatchNorm; the transformer's 7x7/7
    patch conv has one), BatchNorm (momentum 0.1, eps 1e-5), LayerNorm eps 1e-5, GELU
    with the tanh approximation, attention as ember computes it (one qkv Linear,
    softmax(Q K^T / sqrt(d)) V per head, one output Linear), mean over tokens; the
    parameter counts are compared before anything is timed;
  * the step: fp32, cross-entropy averaged over the batch, backward, SGD with lr 0.05
    and momentum 0.9 (ember's defaults), gradients set to None, the loss read back;
  * the data: Fashion-MNIST from the same IDX files, normalized with ember's mean and
    std, batches drawn by a random permutation in the training thread (ember runs with
    `--workers 0`, so its loader also works in the training thread);
  * threads: torch.set_num_threads(N); both programs run with OMP_NUM_THREADS=N and
    OPENBLAS_NUM_THREADS=N (ember's oneDNN/OpenMP team follows its OpenBLAS count);
  * the layout: nchw, or channels-last in both with --channels-last.

Images/s count the timed steps only (after the warm-up steps, in which oneDNN creates
its primitives and allocators warm up): PyTorch times them with perf_counter; ember's
per-step metrics (`ember train --metrics`) give the epoch's images/s after each step,
from which the time between the last warm-up step and the last step follows.
"""
import argparse
import gzip
import json
import math
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The IDX reader and the convolutional models are the PyTorch sample's, one definition
# for both programs.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples", "pytorch"))
from train_fashion_mnist import MEAN, STD, read_idx  # noqa: E402
from train_fashion_mnist import make_model as sample_model  # noqa: E402


def load_train(root):
    images = read_idx(os.path.join(root, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(root, "train-labels-idx1-ubyte.gz"))
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


# ---- the models of engine/nn/models.cpp -------------------------------------------------

class SelfAttention(nn.Module):
    """engine/nn/transformer_layers.cpp SelfAttention: qkv Linear, per-head
    softmax(Q K^T / sqrt(dh)) V, heads merged, output Linear."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        batch, tokens, dim = x.shape
        head_dim = dim // self.heads
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        out = torch.matmul(scores.softmax(dim=-1), v)
        return self.proj(out.transpose(1, 2).reshape(batch, tokens, dim))


class TransformerBlock(nn.Module):
    """Pre-norm: x + attention(LN(x)), then + fc2(GELU(fc1(LN(.))))."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attention = SelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Transformer(nn.Module):
    """PatchEmbedding (conv 7x7 stride 7 with bias + learned positions), blocks,
    LayerNorm, mean over tokens, Linear head."""

    def __init__(self, patch=7, dim=64, heads=4, hidden=128, blocks=1, image=28, classes=10):
        super().__init__()
        tokens = (image // patch) ** 2
        self.proj = nn.Conv2d(1, dim, patch, patch, 0, bias=True)
        self.position = nn.Parameter(torch.empty(tokens, dim).uniform_(-0.02 * math.sqrt(3), 0.02 * math.sqrt(3)))
        self.blocks = nn.Sequential(*[TransformerBlock(dim, heads, hidden) for _ in range(blocks)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        tokens = self.proj(x).flatten(2).transpose(1, 2)  # [B, tokens, dim], token-major as ember's rows
        x = self.blocks(tokens + self.position)
        return self.head(self.norm(x).mean(dim=1))


def make_model(name):
    """The MLP, CNN and ResNet are the PyTorch sample's (its BasicBlock is ember's),
    without conv bias before BatchNorm (conv_bias_before_bn = false: ember's default);
    the transformer is the mirror above."""
    if name == "transformer":
        return Transformer()
    return sample_model(name, conv_bias=False)


# ---- the PyTorch side -------------------------------------------------------------------

def train_pytorch(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = make_model(args.model)
    parameters = sum(p.numel() for p in model.parameters())
    if args.parameters_only:
        print(json.dumps({"framework": "pytorch", "model": args.model, "parameters": parameters}))
        return
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    images, labels = load_train(args.data_root)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(args.seed)
    order, position = torch.randperm(images.shape[0], generator=generator), 0

    def next_batch():
        # As ember's loader: gather the batch's uint8 images, normalize to fp32.
        nonlocal order, position
        if position + args.batch_size > images.shape[0]:
            order, position = torch.randperm(images.shape[0], generator=generator), 0
        index = order[position:position + args.batch_size]
        position += args.batch_size
        x = images[index].to(torch.float32).div_(255.0).sub_(MEAN).div_(STD).unsqueeze(1)
        return x.contiguous(memory_format=memory_format), labels[index]

    def step():
        x, y = next_batch()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    model.train()
    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    seconds = time.perf_counter() - start
    print(json.dumps({"framework": "pytorch", "version": torch.__version__, "model": args.model,
                      "parameters": parameters, "batch_size": args.batch_size, "threads": torch.get_num_threads(),
                      "steps": args.steps, "images_per_second": args.steps * args.batch_size / seconds,
                      "loss": loss}))


# ---- the comparison -------------------------------------------------------------------

MODELS = ["mlp", "cnn", "resnet", "transformer"]
# Timed steps and warm-up steps per model: about 5 seconds per measurement on 2 cores
# (a longer window evens out the other work on a shared machine), all within ember's
# first epoch (468 steps of 128), where its per-step metrics apply.
DEFAULT_STEPS = {"mlp": (200, 20), "cnn": (80, 10), "resnet": (60, 10), "transformer": (150, 20)}


def ember_images_per_second(ember, model, batch_size, steps, warmup, channels_last, data_root, reference=False):
    environment = dict(os.environ)
    if reference:
        environment["EMBER_CPU_REFERENCE"] = "1"  # the plain loops, as before the fast paths
    with tempfile.TemporaryDirectory() as folder:
        metrics = os.path.join(folder, "metrics.jsonl")
        command = [ember, "train", "--model", model, "--backend", "cpu", "--workers", "0",
                   "--batch-size", str(batch_size), "--max-steps", str(warmup + steps), "--test-limit", "100",
                   "--seed", "0", "--data-root", data_root, "--metrics", metrics, "--no-progress",
                   "--set", f"switches.channels_last={'true' if channels_last else 'false'}"]
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
        if run.returncode != 0:
            sys.exit(f"{' '.join(command)} failed ({run.returncode}):\n{run.stdout}")
        records = [json.loads(line) for line in open(metrics)]
    config = next(r for r in records if r["type"] == "config")
    steps_seen = {r["step"]: r for r in records if r["type"] == "step"}
    for needed in (warmup, warmup + steps):
        if needed not in steps_seen or steps_seen[needed]["epoch"] != 0:
            sys.exit(f"ember: no first-epoch metrics for step {needed} of {model} (is the batch too large?)")
    # images/s over the epoch so far: step k ends at k * batch / rate_k seconds into it.
    def seconds_at(step):
        return step * config["batch_size"] / steps_seen[step]["images_per_second"]
    seconds = seconds_at(warmup + steps) - seconds_at(warmup)
    return steps * config["batch_size"] / seconds, config["parameters"], steps_seen[warmup + steps]["loss"]


def pytorch_images_per_second(model, batch_size, steps, warmup, threads, channels_last, data_root):
    command = [sys.executable, os.path.abspath(__file__), "pytorch", "--model", model, "--batch-size",
               str(batch_size), "--threads", str(threads), "--steps", str(steps), "--warmup", str(warmup),
               "--data-root", data_root] + (["--channels-last"] if channels_last else [])
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({run.returncode}):\n{run.stdout}")
    result = json.loads(run.stdout.strip().splitlines()[-1])
    return result["images_per_second"], result["parameters"], result["loss"]


def load_average():
    """The 1/5/15-minute load average, and the share of the last 10 s in which some
    runnable task waited for a CPU (/proc/pressure/cpu): other work on the machine."""
    with open("/proc/loadavg") as f:
        text = " ".join(f.read().split()[:3])
    try:
        with open("/proc/pressure/cpu") as f:
            text += f", cpu pressure {f.readline().split()[1].split('=')[1]}%"
    except (OSError, IndexError):
        pass
    return text


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def compare(args):
    models = args.models.split(",")
    for model in models:
        if model not in MODELS:
            sys.exit(f"--models: unknown model {model} (expected {', '.join(MODELS)})")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    layout = "channels-last" if args.channels_last else "nchw"
    print(f"ember vs PyTorch {torch.__version__} on the CPU: fp32, batch {args.batch_size}, {args.threads} threads, "
          f"{layout}, {args.rounds} rounds (each model: ember and PyTorch back to back, order alternating)")
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; load average before: {load_average()}")
    ember_rates = {m: [] for m in models}
    pytorch_rates = {m: [] for m in models}
    reference_rates = {m: [] for m in models}
    parameters = {}
    for round_index in range(args.rounds):
        for model in models:
            steps, warmup = DEFAULT_STEPS[model]
            steps, warmup = args.steps or steps, args.warmup if args.warmup is not None else warmup
            run_ember = lambda: ember_images_per_second(args.ember, model, args.batch_size, steps, warmup,
                                                        args.channels_last, args.data_root)
            run_pytorch = lambda: pytorch_images_per_second(model, args.batch_size, steps, warmup, args.threads,
                                                            args.channels_last, args.data_root)
            if round_index % 2 == 0:
                ember_result, pytorch_result = run_ember(), run_pytorch()
            else:
                pytorch_result, ember_result = run_pytorch(), run_ember()
            if ember_result[1] != pytorch_result[1]:
                sys.exit(f"{model}: ember has {ember_result[1]:,} parameters, the PyTorch mirror "
                         f"{pytorch_result[1]:,}: the models differ")
            parameters[model] = ember_result[1]
            ember_rates[model].append(ember_result[0])
            pytorch_rates[model].append(pytorch_result[0])
            line = (f"  round {round_index + 1} {model:<12} ember {ember_result[0]:8.0f} img/s (loss {ember_result[2]:.3f})"
                    f"   PyTorch {pytorch_result[0]:8.0f} img/s (loss {pytorch_result[2]:.3f})")
            if args.with_reference:
                reference_result = ember_images_per_second(args.ember, model, args.batch_size, steps, warmup,
                                                           args.channels_last, args.data_root, reference=True)
                reference_rates[model].append(reference_result[0])
                line += f"   ember reference loops {reference_result[0]:8.0f} img/s"
            print(f"{line}   load {load_average()}", flush=True)
    print(f"load average after: {load_average()}")
    print()
    def summary(values):
        text = f"{statistics.median(values):,.0f}"
        if len(values) > 1:
            text += f" ({min(values):,.0f}-{max(values):,.0f})"
        return text

    reference_header = " ember reference loops img/s |" if args.with_reference else ""
    print(f"| model | parameters | ember img/s | PyTorch img/s | ember / PyTorch |{reference_header}")
    print("|---|---:|---:|---:|---:|" + ("---:|" if args.with_reference else ""))
    for model in models:
        ratios = [e / p for e, p in zip(ember_rates[model], pytorch_rates[model])]
        row = (f"| {model} | {parameters[model]:,} | {summary(ember_rates[model])} | {summary(pytorch_rates[model])} | "
               f"**{statistics.median(ratios):.2f}x** ({min(ratios):.2f}-{max(ratios):.2f}) |")
        if args.with_reference:
            row += f" {summary(reference_rates[model])} |"
        print(row)
    print()
    print("img/s: median over the rounds (range); ratio: median of the per-round ratios (range)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    one = sub.add_parser("pytorch", help="train one model with PyTorch, print one JSON line")
    one.add_argument("--model", required=True, choices=MODELS)
    one.add_argument("--batch-size", type=int, default=128)
    one.add_argument("--threads", type=int, default=2)
    one.add_argument("--steps", type=int, default=40, help="timed steps (after --warmup)")
    one.add_argument("--warmup", type=int, default=10)
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--channels-last", action="store_true")
    one.add_argument("--data-root", default="/usr/share/datasets/fashion-mnist")
    one.add_argument("--parameters-only", action="store_true", help="print the parameter count and exit")
    both = sub.add_parser("compare", help="ember against PyTorch, every model, in one run")
    both.add_argument("--ember", required=True, help="the ember program")
    both.add_argument("--models", default=",".join(MODELS))
    both.add_argument("--rounds", type=int, default=3)
    both.add_argument("--batch-size", type=int, default=128)
    both.add_argument("--threads", type=int, default=2)
    both.add_argument("--steps", type=int, default=0, help="timed steps (0: per-model default)")
    both.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: per model)")
    both.add_argument("--channels-last", action="store_true")
    both.add_argument("--with-reference", action="store_true",
                      help="also time ember with EMBER_CPU_REFERENCE=1 (the plain loops: the CPU backend before its "
                           "fast paths)")
    both.add_argument("--data-root", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    if args.command == "pytorch":
        train_pytorch(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
