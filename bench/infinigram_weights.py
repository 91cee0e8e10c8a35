"""The ∞-gram + KN 5 mixture under other weightings than the model's (baselines/infinigram.py, (2)):
valid and test perplexity of each, beside KN 5 alone, on a corpus of three text files.

The model's weighting is one weight pair per effective-n bucket fitted by EM on valid, shrunk toward
1/2 by one pseudo-token a part. The others: unshrunk; one pair for every token; per bucket shrunk
toward the pooled pair by S pseudo-tokens; the buckets from n = TOP on merged into one. Choose by
valid; test is printed to report, never to choose.

    python bench/infinigram_weights.py DIR              # DIR/train.txt, valid.txt, test.txt
    python bench/infinigram_weights.py DIR --min-count 1 --vocab-size 10000
"""

from __future__ import annotations

import argparse

import numpy as np

from baselines.infinigram import BUCKETS, InfiniGram, effective_n_bucket
from corpora.text import load_text
from lmbench.interpolation import fit_weights, mix_logprobs, shrunk
from lmbench.model import split_logprobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the folder of train.txt, valid.txt and test.txt")
    parser.add_argument("--min-count", type=int, default=None)
    parser.add_argument("--vocab-size", type=int, default=None)
    args = parser.parse_args()
    corpus = load_text(*(f"{args.folder}/{split}.txt" for split in ("train", "valid", "test")),
                       min_count=args.min_count, max_vocab=args.vocab_size)
    model = InfiniGram(5)
    model.fit(corpus)
    scored = {}  # split: (effective n (T,), log-probabilities of the ∞-gram and KN 5 (2, T))
    for split in ("valid", "test"):
        n, sparse = model.split_infinigram(corpus, split)
        scored[split] = n, np.stack([sparse, split_logprobs(model.kn, corpus, split)])
    valid_n, valid = scored["valid"]
    buckets = effective_n_bucket(valid_n)
    tokens = np.bincount(buckets, minlength=BUCKETS)[:, None]
    per_bucket, pooled = fit_weights(valid, buckets, BUCKETS), fit_weights(valid)[0]
    kn = {split: float(np.exp(-scored[split][1][1].mean())) for split in scored}
    print(f"{'weighting':40s} {'valid':>9s} {'vs KN 5':>9s} {'test':>9s} {'vs KN 5':>9s}")

    def report(label: str, weights_of) -> None:
        """weights_of: effective n (T,) -> weights (T, 2)."""
        ppl = {split: float(np.exp(-mix_logprobs(lp, weights_of(n).T).mean())) for split, (n, lp) in scored.items()}
        print(f"{label:40s} {ppl['valid']:9.3f} {100 * (ppl['valid'] / kn['valid'] - 1):+8.3f}% "
              f"{ppl['test']:9.3f} {100 * (ppl['test'] / kn['test'] - 1):+8.3f}%")

    print(f"{'KN 5 alone':40s} {kn['valid']:9.3f} {0:+8.3f}% {kn['test']:9.3f} {0:+8.3f}%")
    report("per bucket, shrunk toward 1/2 (model)", lambda n: shrunk(per_bucket, tokens[:, 0])[effective_n_bucket(n)])
    report("per bucket, unshrunk", lambda n: per_bucket[effective_n_bucket(n)])
    report("one pair", lambda n: np.tile(pooled, (len(n), 1)))
    for strength in (2, 20, 200, 2000):
        toward = (per_bucket * tokens + strength * pooled) / (tokens + strength)
        report(f"per bucket, toward the pooled pair ({strength})", lambda n, w=toward: w[effective_n_bucket(n)])
    for top in (6, 8, 10):
        merged = np.minimum(valid_n, top) - 1
        weights = shrunk(fit_weights(valid, merged, top), np.bincount(merged, minlength=top))
        report(f"buckets n < {top}, n >= {top} one", lambda n, w=weights, top=top: w[np.minimum(n, top) - 1])


if __name__ == "__main__":
    main()
