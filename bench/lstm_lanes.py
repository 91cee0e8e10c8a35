"""How much cutting a split into lanes changes an LSTM's exact scores: a trained LSTM run scored on a
split in lanes (the default: 32, each first warmed on the 2,000 tokens before it) and in one lane
through the whole split (warmed on the 20,000 tokens before it), float32 as in every report.

    python bench/lstm_lanes.py RUN [--corpus brown] [--split test] [--threads 1]
    python bench/lstm_lanes.py --tiny     # a small LSTM trained for it on bench/tiny_corpus.py (the test suite's run)

prints both perplexities, their relative difference and the largest per-token difference (docs/measurements.md,
"LSTM scoring in lanes": 188.8783 both on Brown's test split, 2026-12-01).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch

from corpora.named import load_named
from lmbench.model import perplexity
from neural.networks.stream import EVAL_LANES, EVAL_WARMUP
from neural.training.checkpoint import load_network


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?",
                        help="the folder of a trained LSTM run (lmbench train --model lstm --out RUN)")
    parser.add_argument("--corpus", default="brown", help="the corpus it was trained on: brown, ap (default brown)")
    parser.add_argument("--split", default="test", choices=("valid", "test"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tiny", action="store_true", help="no RUN: an LSTM (1 layer of 16) trained for one epoch "
                        "on the tiny corpus of bench/tiny_corpus.py, scored on it")
    args = parser.parse_args()
    if args.tiny == bool(args.run):
        parser.error("give RUN, the folder of a trained LSTM run, or --tiny")
    if args.tiny:
        from tiny_corpus import tiny_corpus
        from neural.config import RunConfig
        from neural.training.trainer import train_network
        scratch = tempfile.TemporaryDirectory(prefix="lstm-lanes-")  # removed when the script ends
        corpus, args.run = tiny_corpus(), scratch.name
        train_network(corpus, RunConfig(model="lstm", layers=1, m=16, h=16, epochs=1, device="cpu",
                                        threads=args.threads), args.run, progress=False, evaluate=False)
    else:
        corpus = load_named(args.corpus)
    model = load_network(args.run, corpus, device="cpu", threads=args.threads)
    stream, start = corpus.stream_for(args.split)
    scores = {}
    for lanes, warmup in ((EVAL_LANES, EVAL_WARMUP), (1, 10 * EVAL_WARMUP)):
        began = time.perf_counter()
        with torch.no_grad():
            scores[lanes] = model.net.score_stream(stream, start, lanes=lanes, warmup=warmup)
        print(f"{lanes:2d} lane(s), warm-up {warmup:6,d}: {args.split} perplexity {perplexity(scores[lanes]):.4f} "
              f"({len(scores[lanes]):,} tokens, {time.perf_counter() - began:.0f} s)", flush=True)
    lanes, one = perplexity(scores[EVAL_LANES]), perplexity(scores[1])
    print(f"lanes change the perplexity by {100 * (lanes - one) / one:+.5f}%; the largest per-token difference is "
          f"{np.abs(scores[EVAL_LANES] - scores[1]).max():.3g} nats")


if __name__ == "__main__":
    main()
