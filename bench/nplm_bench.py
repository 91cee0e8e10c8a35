"""Speed of the networks' training per objective and of their exact evaluation, against the matmul peak.

Prints, for the MLP1 (n=5, m=60, h=50, direct) and MLP9 (n=5, m=30, h=100, no direct) shapes at
Brown's vocabulary size, training tokens/s of each objective (full softmax in fp32 and bf16,
importance sampling and NCE with k samples (default the config's), the class-factored softmax with sqrt(V) frequency
classes, the tree softmax over the Huffman tree of the unigram; `--objectives` picks some) with the default sgd
recipe's minibatch and update
(forward, backward, the sparse SGD step and its amortised weight decay), the full-softmax training's
achieved GFLOP/s, and the evaluation's (exact log-probabilities, fp32), beside the peak GFLOP/s of one
large torch.mm measured in the same run. Random ids drawn from a Zipf unigram: no corpus needed. Timings are wall-clock and
noisy on a shared machine: run it when `uptime` shows the cores idle.

The other families (`--families`, default every registered family but the NPLM), each in its default
shape: a window network (the energy network, ...) with the sgd recipe's update for each of `--objectives`
it takes (its output layers; a bf16 variant unless its shape refuses bf16) and its exact evaluation; a
stream network (`--families lstm transformer`) with its recipe's update (`neural.training.trainer`:
lanes x steps positions, AdamW, clipping) with the full softmax (fp32, and bf16 on CUDA) and importance
sampling, and its exact scoring (`score_stream`: the LSTM in lanes warmed on the tokens before them, the
Transformer's sliding window).

FLOPs counted per token for the full softmax: the output layer 2 V K (K = h + (n-1)m with direct
connections, else h) and the hidden layer 2 h (n-1)m forward; three times that for training (forward,
grad of the input, grad of the weights).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lmbench.errors import LMBenchError  # noqa: E402
from neural.outputs.classes import frequency_classes  # noqa: E402
from neural.config import OBJECTIVES, RunConfig  # noqa: E402
from neural.scoring import score_stream  # noqa: E402
from neural.outputs.objectives import make_objective  # noqa: E402
from neural.training.recipe import make_optimizer  # noqa: E402
from neural.training.trainer import TrainState  # noqa: E402
from neural.outputs.tree import huffman_tree  # noqa: E402
from neural.families import FAMILIES  # noqa: E402
from neural.training.batches import steps_of  # noqa: E402
from neural.training.team import build_network  # noqa: E402

VARIANTS = {"softmax": ("softmax", False), "softmax-bf16": ("softmax", True), "importance": ("importance", False),
            "nce": ("nce", False), "class": ("class", False), "tree": ("tree", False)}  # objective, bf16
SHAPES = {"MLP1": dict(n=5, m=60, h=50, direct=True), "MLP9": dict(n=5, m=30, h=100, direct=False),
          "AP": dict(n=6, m=100, h=60, direct=True)}  # AP: the paper's AP News network (Table 2)


def label(variant: str) -> str:
    """A variant as the figures name it: its objective, "bf16" after it where it runs so."""
    objective, bf16 = VARIANTS[variant]
    return objective + (" bf16" if bf16 else "")


def flops_per_token(vocab: int, n: int, m: int, h: int, direct: bool) -> float:
    width = (n - 1) * m
    return 2.0 * vocab * (h + (width if direct else 0)) + 2.0 * h * width


STEPS = None  # --steps: each measurement runs this many calls instead of `seconds`


def timed(fn, seconds: float) -> tuple[int, float]:
    """Run fn (after one warm-up call) until `seconds` have passed, or STEPS times; (calls, elapsed)."""
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    calls, started = 0, time.perf_counter()
    while (calls < STEPS) if STEPS else (time.perf_counter() - started < seconds):
        fn()
        calls += 1
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return calls, time.perf_counter() - started


def timed_in_turn(fns: list, seconds: float) -> list[float]:
    """Run the functions one after another, in rounds (after one warm-up call each), until each has
    had about `seconds`: the seconds per call of each. Taking turns, they share a shared machine's
    changing load alike, so their ratios hold when the absolute figures do not."""
    for fn in fns:
        fn()
    spent, rounds = [0.0] * len(fns), 0
    while sum(spent) < seconds * len(fns):
        for i, fn in enumerate(fns):
            started = time.perf_counter()
            fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            spent[i] += time.perf_counter() - started
        rounds += 1
    return [t / rounds for t in spent]


def peak_gflops(device: torch.device, dtype: torch.dtype, size: int, seconds: float) -> float:
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    calls, elapsed = timed(lambda: torch.mm(a, b), seconds)
    return 2.0 * size ** 3 * calls / elapsed / 1e9


def train_step(variant, config, args, structures, unigram, contexts, targets, device):
    """One sgd update of a fresh window network of `config` with the variant's (objective, bf16): forward,
    backward, the sparse SGD step and the weight decay every `decay_every` updates."""
    objective_name, bf16 = variant
    output = OBJECTIVES[objective_name].output
    net = build_network(FAMILIES[config.model], config.shape, args.vocab, output=output,
                        structure=structures.get(output)).to(device)
    optimizer = make_optimizer(net, config)
    objective = make_objective(objective_name, unigram, args.samples, torch.Generator(device=device))
    state = TrainState()  # the run's state that the optimizer's coupled decay counts in

    def step():
        loss = objective.loss(net, net.features(contexts), targets, bf16=bf16)
        optimizer.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step(state, 1e-3)  # the trainer's step: the decay every `decay_every` updates, the SGD step
    return step


def arguments() -> argparse.Namespace:
    """The command line's options; `--families` offers every registered family but the NPLM."""
    others = [name for name in FAMILIES if name != "nplm"]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=17907, help="|V| (default Brown's 17,907)")
    parser.add_argument("--batch", type=int, default=RunConfig().batch, help="training minibatch")
    parser.add_argument("--samples", type=int, default=RunConfig().samples, help="k of the sampled objectives")
    parser.add_argument("--eval-batch", type=int, default=2048)
    parser.add_argument("--seconds", type=float, default=6.0, help="time per measurement (the training "
                                                                     "variants take turns)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--objectives", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                        help="the training variants to time (default: all)")
    parser.add_argument("--steps", type=int, default=None, help="calls per measurement instead of --seconds")
    parser.add_argument("--families", nargs="*", default=others, choices=others,
                        help="the other families to time, window or stream (default all; none: --families with "
                             "no name)")
    parser.add_argument("--eval-tokens", type=int, default=8192, help="tokens scored by another family's timing")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run (|V| 300, 2 calls a measurement, "
                        "the first shape and the first two other families, their quick shapes): the test suite's")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.tiny:
        args.vocab, args.steps, args.seconds, args.eval_batch, args.eval_tokens, args.samples = 300, 2, 0.05, 256, 512, 20
        args.batch, args.shapes, args.families = 16, args.shapes[:1], args.families[:2]
    global STEPS
    STEPS = args.steps
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    if device.type == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    figures = {"device": str(device), "threads": torch.get_num_threads(), "load_average_1min": load,
               "batch": args.batch, "samples": args.samples,
               "peak_fp32_gflops": peak_gflops(device, torch.float32, 256 if args.tiny else 2048, args.seconds), "runs": []}
    unigram = 1.0 / torch.arange(1, args.vocab + 1, dtype=torch.float64)  # Zipf's law, as in text
    unigram = (unigram / unigram.sum()).float().to(device)
    counts = (unigram.cpu().numpy() * 1e7).astype(np.int64)  # a corpus's counts, from the unigram
    structures = {"class": torch.from_numpy(frequency_classes(counts, round(math.sqrt(args.vocab)))),
                  "tree": torch.from_numpy(huffman_tree(counts + 1.0))}  # word_tree's Huffman tree
    for name in args.shapes:
        shape = SHAPES[name]
        per_token = flops_per_token(args.vocab, **shape)
        config = RunConfig(**shape)
        contexts = torch.multinomial(unigram, args.batch * (shape["n"] - 1), replacement=True)
        contexts = contexts.view(args.batch, shape["n"] - 1)  # ids drawn from the unigram, like a corpus's
        targets = torch.multinomial(unigram, args.batch, replacement=True)
        steps = [train_step(VARIANTS[variant], config, args, structures, unigram, contexts, targets, device)
                 for variant in args.objectives]
        for variant, seconds in zip(args.objectives, timed_in_turn(steps, args.seconds)):
            tokens_per_s = args.batch / seconds
            run = {"shape": name, "objective": label(variant), "train_tokens_per_s": tokens_per_s}
            if variant == "softmax":
                run["train_gflops"] = tokens_per_s * 3 * per_token / 1e9
                run["train_pct_of_fp32_peak"] = 100 * run["train_gflops"] / figures["peak_fp32_gflops"]
            figures["runs"].append(run)
        eval_tokens_per_s = evaluation_speed(config, args, device)
        figures["runs"].append({"shape": name, "objective": "evaluation (exact)",
                                "eval_tokens_per_s": eval_tokens_per_s,
                                "eval_gflops": eval_tokens_per_s * per_token / 1e9,
                                "eval_pct_of_fp32_peak": 100 * eval_tokens_per_s * per_token / 1e9
                                / figures["peak_fp32_gflops"]})
    for family in args.families:
        runs = stream_runs if FAMILIES[family].context == "stream" else window_runs
        figures["runs"].extend(runs(family, args, unigram, structures, device))
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    print(f"device {figures['device']}, {figures['threads']} threads, load average {load:.2f}; "
          f"torch.mm 2048^2 fp32 peak {figures['peak_fp32_gflops']:.1f} GFLOP/s; batch {args.batch}, "
          f"k = {args.samples}, eval batch {args.eval_batch}")
    print(f"{'shape':6} {'objective':20} {'tokens/s':>10} {'GFLOP/s':>8} {'%fp32pk':>8} {'x softmax':>9}")
    softmax = {r["shape"]: r["train_tokens_per_s"] for r in figures["runs"] if r["objective"] == "softmax"}
    for r in figures["runs"]:
        speed = r.get("train_tokens_per_s", r.get("eval_tokens_per_s"))
        gflops = r.get("train_gflops", r.get("eval_gflops"))
        pct = r.get("train_pct_of_fp32_peak", r.get("eval_pct_of_fp32_peak"))
        ratio = f"{speed / softmax[r['shape']]:9.1f}" if "train_tokens_per_s" in r and r["shape"] in softmax else ""
        print(f"{r['shape']:6} {r['objective']:20} {speed:10.0f} "
              f"{'' if gflops is None else f'{gflops:8.1f}':>8} {'' if pct is None else f'{pct:7.1f}%':>8} "
              f"{ratio}")
    for shape in args.shapes:  # the tree against the class-factored softmax, both exact
        speed = {r["objective"]: r["train_tokens_per_s"] for r in figures["runs"] if r["shape"] == shape
                 and "train_tokens_per_s" in r}
        if "tree" in speed and "class" in speed:
            print(f"{shape}: tree / class training speed {speed['tree'] / speed['class']:.2f}")


def evaluation_speed(config, args, device: torch.device) -> float:
    """Tokens/s of the exact scoring (its full distribution over all |V| words) of a window network of
    `config` over a stream of random ids."""
    stream = torch.randint(0, args.vocab, (args.eval_batch * 4,)).numpy()
    plain = build_network(FAMILIES[config.model], config.shape, args.vocab).to(device)
    calls, elapsed = timed(lambda: score_stream(plain, stream, 0, batch_size=args.eval_batch), args.seconds)
    return calls * len(stream) / elapsed


def takes(family: str, shape, variant: str) -> bool:
    """Whether a window network of `family` in `shape` trains with the variant (objective, bf16): its
    output layers have the objective's, and its shape does not refuse the precision."""
    objective, bf16 = VARIANTS[variant]
    try:
        RunConfig(model=family, shape=shape, objective=objective, precision="bf16" if bf16 else "fp32")
    except LMBenchError:
        return False
    return True


def window_runs(family: str, args, unigram: torch.Tensor, structures: dict, device: torch.device) -> list[dict]:
    """Training tokens/s of one window network's sgd update for each of `--objectives` it takes, and its
    exact scoring's."""
    entry = FAMILIES[family]
    config = RunConfig(model=family, shape=entry.shape(**entry.quick) if args.tiny else entry.shape())
    history = build_network(entry, config.shape, args.vocab).history
    contexts = torch.multinomial(unigram, args.batch * history, replacement=True).view(args.batch, history)
    targets = torch.multinomial(unigram, args.batch, replacement=True)
    variants = [variant for variant in args.objectives if takes(family, config.shape, variant)]
    steps = [train_step(VARIANTS[variant], config, args, structures, unigram, contexts, targets, device)
             for variant in variants]
    runs = [{"shape": family, "objective": label(variant), "train_tokens_per_s": args.batch / seconds}
            for variant, seconds in zip(variants, timed_in_turn(steps, args.seconds))]
    return runs + [{"shape": family, "objective": "evaluation (exact)",
                    "eval_tokens_per_s": evaluation_speed(config, args, device)}]


def stream_runs(family: str, args, unigram: torch.Tensor, structures: dict, device: torch.device) -> list[dict]:
    """Training tokens/s of one stream network's update per objective, and its exact scoring's (`structures`:
    none of its output layers has one)."""
    runs = []
    config = RunConfig(model=family, samples=args.samples,  # the family's own recipe (--tiny: 4 lanes of 8 steps)
                       **({"batch_size": 4, "steps": 8} if args.tiny else {}))
    precisions = (False, True) if device.type == "cuda" else (False,)  # bf16 (autocast): oneDNN's CPU LSTM has none
    for objective_name, bf16 in [(name, bf16) for name in ("softmax", "importance") for bf16 in precisions]:
        torch.manual_seed(0)
        entry = FAMILIES[family]
        shape = entry.shape(**entry.quick) if args.tiny else entry.shape()  # --tiny: a quick run's narrower shape
        net = build_network(entry, shape, args.vocab).to(device)
        steps = steps_of(net.shape, config.steps)
        inputs = torch.multinomial(unigram, config.batch * (steps + 1), replacement=True).view(config.batch, -1)
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
        objective = make_objective(objective_name, unigram, args.samples, torch.Generator(device=device))
        carried = [None]

        def train_step():
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                z, state = net.encode(inputs[:, :-1], carried[0])
            loss = objective.loss(net, z.reshape(-1, z.shape[-1]).float(), inputs[:, 1:].reshape(-1), bf16=bf16)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), config.clip)
            optimizer.step()
            carried[0] = None if state is None else tuple(s.detach() for s in state)
            loss.item()

        calls, elapsed = timed(train_step, args.seconds)
        runs.append({"shape": family, "objective": objective_name + (" bf16" if bf16 else ""),
                     "train_tokens_per_s": calls * inputs[:, 1:].numel() / elapsed})
    stream = torch.multinomial(unigram, args.eval_tokens, replacement=True).cpu().numpy()
    for bf16 in precisions:
        calls, elapsed = timed(lambda: net.score_stream(stream, len(stream) // 2, bf16=bf16), args.seconds)
        runs.append({"shape": family, "objective": "evaluation (exact)" + (" bf16" if bf16 else ""),
                     "eval_tokens_per_s": calls * (len(stream) - len(stream) // 2) / elapsed})
    return runs


if __name__ == "__main__":
    main()
