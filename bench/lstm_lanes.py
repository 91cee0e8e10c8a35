"""How much cutting a split into lanes changes an LSTM's exact scores: a trained LSTM run scored on a
split in lanes (the default: 32, each first warmed on the 2,000 tokens before it) and in one lane
through the whole split (warmed on the 20,000 tokens before it), float32 as in every report.

    python bench/lstm_lanes.py RUN [--corpus brown] [--split test] [--threads 1]

prints both perplexities, their relative difference and the largest per-token difference (docs/measurements.md,
"LSTM scoring in lanes": 188.8783 both on Brown's test split, 2026-12-01).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from corpora.named import load_named
from lmbench.model import perplexity
from neural.networks.stream import EVAL_LANES, EVAL_WARMUP
from neural.training.checkpoint import load_network


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="the folder of a trained LSTM run (lmbench train --model lstm --out RUN)")
    parser.add_argument("--corpus", default="brown", help="the corpus it was trained on: brown, ap (default brown)")
    parser.add_argument("--split", default="test", choices=("valid", "test"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
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
