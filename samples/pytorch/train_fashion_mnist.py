#!/usr/bin/env python3
"""The PyTorch program that `ember train` mirrors: the same four models, the same
Fashion-MNIST data (read from the same IDX files), the same batch size, optimizer and
precision, with the performance-tuning canon applied (GPU-resident data, cudnn.benchmark,
AMP, zero_grad(set_to_none=True), fused optimizers, channels-last optional), with and
without torch.compile. It prints images/s so it can run side by side with
`ember bench train` on a GPU machine:

    python3 samples/pytorch/train_fashion_mnist.py --model cnn --batch-size 512 --steps 300
    python3 samples/pytorch/train_fashion_mnist.py --model cnn --batch-size 512 --steps 300 --compile

Only PyTorch and NumPy are needed (no torchvision): the IDX reader is below.
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST pixel/255 statistics, as ember uses


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit(f"{path}: not an IDX ubyte file")
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(root, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - MEAN) / STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride, bias):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=bias)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=bias)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=bias), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class TransformerBlock(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self, patch=7, dim=64, heads=4, hidden=128, blocks=1):
        super().__init__()
        self.patch = patch
        tokens = (28 // patch) ** 2
        self.embed = nn.Linear(patch * patch, dim)
        self.positions = nn.Parameter(torch.zeros(1, tokens, dim))
        self.blocks = nn.Sequential(*[TransformerBlock(dim, heads, hidden) for _ in range(blocks)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        p = self.patch
        x = x.unfold(2, p, p).unfold(3, p, p).reshape(x.shape[0], -1, p * p)
        x = self.blocks(self.embed(x) + self.positions)
        return self.head(self.norm(x).mean(dim=1))


def make_model(name, conv_bias):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, 1, 1, bias=conv_bias), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, 1, 1, bias=conv_bias), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "resnet":
        layers = [nn.Conv2d(1, 16, 3, 1, 1, bias=conv_bias), nn.BatchNorm2d(16), nn.ReLU()]
        cin = 16
        for stage, width in enumerate([16, 32, 64]):
            for block in range(2):
                layers.append(BasicBlock(cin, width, 2 if stage > 0 and block == 0 else 1, conv_bias))
                cin = width
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
        return nn.Sequential(*layers)
    if name == "transformer":
        return Transformer()
    sys.exit(f"--model {name}: expected mlp, cnn, resnet or transformer")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=300, help="timed steps (after --warmup)")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--precision", default="bf16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--conv-bias", action="store_true", help="keep conv bias before BatchNorm")
    ap.add_argument("--data-root", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--evaluate", action="store_true", help="report test accuracy after the timed steps")
    args = ap.parse_args()

    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this comparison is meant for a GPU machine")
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    # GPU-resident data, as `ember train --data-source gpu`.
    x_train, y_train = (t.to(device) for t in load(args.data_root, "train"))
    model = make_model(args.model, args.conv_bias).to(device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, fused=True)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=True)
    dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[args.precision]
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    step_fn_model = torch.compile(model) if args.compile else model

    def step(xb, yb):
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = F.cross_entropy(step_fn_model(xb), yb)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss

    n = x_train.shape[0]
    generator = torch.Generator(device=device).manual_seed(0)
    order = torch.randperm(n, device=device, generator=generator)
    position = 0

    def next_batch():
        nonlocal order, position
        if position + args.batch_size > n:
            order = torch.randperm(n, device=device, generator=generator)
            position = 0
        idx = order[position:position + args.batch_size]
        position += args.batch_size
        return x_train[idx].contiguous(memory_format=memory_format), y_train[idx]

    model.train()
    for _ in range(args.warmup):
        step(*next_batch())
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step(*next_batch())
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    images_per_second = args.steps * args.batch_size / seconds
    print(f"pytorch {torch.__version__} {args.model} batch {args.batch_size} {args.precision} "
          f"{'compiled' if args.compile else 'eager'}: {images_per_second:.0f} images/s "
          f"({seconds / args.steps * 1e3:.3f} ms/step), last loss {loss.item():.4f}")

    if args.evaluate:
        x_test, y_test = (t.to(device) for t in load(args.data_root, "test"))
        model.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            correct = sum((model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum().item()
                          for i in range(0, x_test.shape[0], 1000))
        print(f"test accuracy {correct / x_test.shape[0]:.4f}")


if __name__ == "__main__":
    main()
