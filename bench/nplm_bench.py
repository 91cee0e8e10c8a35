"""Speed of the NPLM's full-softmax training and evaluation, against the measured matmul peak.

Prints, for the MLP1 (n=5, m=60, h=50, direct) and MLP9 (n=5, m=30, h=100, no direct) shapes at
Brown's vocabulary size, tokens/s and achieved GFLOP/s of training (forward, backward and optimizer
step) and evaluation (exact log-probabilities), in fp32 and bf16, and the peak GFLOP/s of one large
torch.mm measured in the same run. Random ids: no corpus needed. Timings are wall-clock and noisy
on a shared machine: run it when `uptime` shows the cores idle.

FLOPs counted per token: the output layer 2 V K (K = h + (n-1)m with direct connections, else h)
and the hidden layer 2 h (n-1)m forward; three times that for training (forward, grad of the
input, grad of the weights).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from neural.lm import score_stream  # noqa: E402
from neural.model import NPLM  # noqa: E402
from neural.train import NPLMConfig, make_optimizer  # noqa: E402

SHAPES = {"MLP1": dict(n=5, m=60, h=50, direct=True), "MLP9": dict(n=5, m=30, h=100, direct=False)}


def flops_per_token(vocab: int, n: int, m: int, h: int, direct: bool) -> float:
    width = (n - 1) * m
    return 2.0 * vocab * (h + (width if direct else 0)) + 2.0 * h * width


def timed(fn, seconds: float) -> tuple[int, float]:
    """Run fn (after one warm-up call) until `seconds` have passed; (calls, elapsed)."""
    fn()
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        fn()
        calls += 1
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return calls, time.perf_counter() - started


def peak_gflops(device: torch.device, dtype: torch.dtype, size: int, seconds: float) -> float:
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    calls, elapsed = timed(lambda: torch.mm(a, b), seconds)
    return 2.0 * size ** 3 * calls / elapsed / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=17907, help="|V| (default Brown's 17,907)")
    parser.add_argument("--batch", type=int, default=512, help="training minibatch (default 512)")
    parser.add_argument("--eval-batch", type=int, default=2048)
    parser.add_argument("--seconds", type=float, default=6.0, help="time per measurement")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args()
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    if device.type == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    figures = {"device": str(device), "threads": torch.get_num_threads(), "load_average_1min": load,
               "peak_fp32_gflops": peak_gflops(device, torch.float32, 2048, args.seconds),
               "peak_bf16_gflops": peak_gflops(device, torch.bfloat16, 2048, args.seconds), "runs": []}
    for name in args.shapes:
        shape = SHAPES[name]
        per_token = flops_per_token(args.vocab, **shape)
        net = NPLM(args.vocab, **shape).to(device)
        optimizer = make_optimizer(net, NPLMConfig(**shape, recipe="fast"))
        contexts = torch.randint(0, args.vocab, (args.batch, shape["n"] - 1), device=device)
        targets = torch.randint(0, args.vocab, (args.batch,), device=device)
        stream = torch.randint(0, args.vocab, (args.eval_batch * 4,)).numpy()
        for bf16 in (False, True):
            def train_step():
                loss = net.loss(contexts, targets, bf16=bf16)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                loss.item()

            calls, elapsed = timed(train_step, args.seconds)
            tokens_per_s = calls * args.batch / elapsed
            peak = figures["peak_bf16_gflops" if bf16 else "peak_fp32_gflops"]
            train_gflops = tokens_per_s * 3 * per_token / 1e9
            calls, elapsed = timed(lambda: score_stream(net, stream, 0, batch_size=args.eval_batch,
                                                        bf16=bf16), args.seconds)
            eval_tokens_per_s = calls * len(stream) / elapsed
            eval_gflops = eval_tokens_per_s * per_token / 1e9
            figures["runs"].append({
                "shape": name, "precision": "bf16" if bf16 else "fp32", "mflop_per_train_token":
                3 * per_token / 1e6, "train_tokens_per_s": tokens_per_s, "train_gflops": train_gflops,
                "train_pct_of_fp32_peak": 100 * train_gflops / figures["peak_fp32_gflops"],
                "train_pct_of_own_peak": 100 * train_gflops / peak,
                "eval_tokens_per_s": eval_tokens_per_s, "eval_gflops": eval_gflops,
                "eval_pct_of_fp32_peak": 100 * eval_gflops / figures["peak_fp32_gflops"]})
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    print(f"device {figures['device']}, {figures['threads']} threads, load average {load:.2f}; "
          f"torch.mm 2048^2 peak: fp32 {figures['peak_fp32_gflops']:.1f} GFLOP/s, "
          f"bf16 {figures['peak_bf16_gflops']:.1f} GFLOP/s; batch {args.batch}, eval batch {args.eval_batch}")
    print(f"{'shape':6} {'prec':5} {'train tok/s':>11} {'GFLOP/s':>8} {'%fp32pk':>8} "
          f"{'eval tok/s':>11} {'GFLOP/s':>8} {'%fp32pk':>8}")
    for r in figures["runs"]:
        print(f"{r['shape']:6} {r['precision']:5} {r['train_tokens_per_s']:11.0f} {r['train_gflops']:8.1f} "
              f"{r['train_pct_of_fp32_peak']:7.1f}% {r['eval_tokens_per_s']:11.0f} {r['eval_gflops']:8.1f} "
              f"{r['eval_pct_of_fp32_peak']:7.1f}%")


if __name__ == "__main__":
    main()
