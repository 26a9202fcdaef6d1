#!/usr/bin/env python3
"""The Python eager PyTorch reference for scripts/bench/gpu_step.sh: one GPU, the same models as mgtrain's configs.

  --model cnn: configs/fashion_mnist_cnn.yaml's CNN (conv3x3 32, BN, ReLU, maxpool; conv3x3 64, BN, ReLU, maxpool;
               Flatten, Linear 128, ReLU, Linear 10) on synthetic 1x28x28 inputs, SGD momentum 0.9.
  --model gpt: configs/tokens_gpt.yaml's GPT (4 pre-LN blocks, 4 heads, d_model 128, context 128, dropout 0.1, bias-free
               LM head) on a uint16 token file (--tokens, vocabulary --vocab), AdamW, gradient clipping 1.0;
               --layers/--heads/--d-model/--context make it larger (the compute-bound row of gpu_step.sh).
--precision fp32 | bf16 (torch.autocast) | fp16 (torch.autocast + GradScaler), the loss in fp32 as mgtrain does.
--ddp wraps the model in DistributedDataParallel over NCCL (run under torchrun --nproc_per_node 1: world 1).
Input pipeline like mgtrain's: CPU tensors, a DataLoader with pinned memory, non_blocking copies. Every step reads
loss.item() (mgtrain does too), so step times are synchronised. A step is timed as mgtrain times it: from fetching
its batch to the end of the optimizer step. Prints one line like mgtrain's summary:
{"summary": {"samples_per_s": ..., "step_time_ms": ...}} (median after 10 warm-up steps).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def cnn():
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2)),
        nn.Sequential(nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)))


class Attention(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x):  # the same operations as lib/train/models/gpt_model.cpp (no fused attention)
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, 2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        y = self.attn_dropout(F.softmax(scores, -1)) @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d)))


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, dropout)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, context=128, layers=4, heads=4, d=128, dropout=0.1):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.drop = nn.Dropout(dropout)
        self.h = nn.Sequential(*[Block(d, heads, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.size(1), device=tokens.device)
        return self.lm_head(self.ln_f(self.h(self.drop(self.wte(tokens) + self.wpe(positions)))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["cnn", "gpt"], required=True)
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--tokens", help="gpt: uint16 token file")
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--ddp", action="store_true")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--for-loop", action="store_true",
                        help="optimizer and clipping one parameter at a time (foreach=False), as LibTorch's C++ API")
    parser.add_argument("--sync-clip", action="store_true",
                        help="read the gradient norm back to the host each step, as LibTorch's C++ clip_grad_norm_")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_step_reference.py: no GPU visible to torch; this reference needs one")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    torch.manual_seed(0)

    if args.model == "cnn":
        inputs = torch.randn(max(args.batch * 50, 10000), 1, 28, 28)
        targets = torch.randint(0, 10, (inputs.size(0),))
        model = cnn().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4,
                                    foreach=not args.for_loop)
        clip = 0.0
    else:
        tokens = torch.from_numpy(np.fromfile(args.tokens, dtype=np.uint16).astype(np.int64))
        c = args.context
        windows = (tokens.numel() - 1) // c
        inputs = tokens[: windows * c].view(windows, c)
        targets = tokens[1 : windows * c + 1].view(windows, c)
        model = Gpt(args.vocab, context=c, layers=args.layers, heads=args.heads, d=args.d_model).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=not args.for_loop)
        clip = 1.0
    if args.ddp:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        dist.init_process_group("nccl")
        model = DistributedDataParallel(model, device_ids=[device.index])
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=args.batch, shuffle=True, drop_last=True,
                        num_workers=2, pin_memory=True, persistent_workers=True)
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    scaler = torch.cuda.amp.GradScaler(enabled=args.precision == "fp16")

    times = []
    step = 0
    while step < args.steps:
        batches = iter(loader)
        while step < args.steps:
            start = time.perf_counter()  # before the batch is fetched, as mgtrain's step time
            try:
                x, y = next(batches)
            except StopIteration:
                break
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                logits = model(x)
            loss = F.cross_entropy(logits.float().flatten(0, -2) if logits.dim() > 2 else logits.float(), y.flatten())
            scaler.scale(loss).backward()
            if clip > 0:
                scaler.unscale_(optimizer)
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=not args.for_loop)
                if args.sync_clip:
                    norm.item()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            loss.item()
            times.append(time.perf_counter() - start)
            step += 1
    timed = times[10:] or times
    step_s = statistics.median(timed)
    print(json.dumps({"summary": {"samples_per_s": args.batch / step_s, "step_time_ms": step_s * 1000.0,
                                  "steps": step, "precision": args.precision, "ddp": args.ddp}}))


if __name__ == "__main__":
    main()
