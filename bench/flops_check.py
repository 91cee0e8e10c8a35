"""Each family's analytic count of training FLOPs per token (`NetworkShape.training_flops`, in the family's
file) against torch's count of one update's forward and backward passes (`neural.training.measured_flops`),
for every registered family in its default shape and run (its recipe, objective, minibatch and sampled
words: the window networks' importance sampling with k = 400 over 128 windows, the stream networks' k =
1,000 over 32 lanes) over a vocabulary of `--vocab` words (a Zipf stream in which every word occurs).
`--all-objectives` adds a row for every other objective a family's output layer takes. Prints a table:
analytic and measured FLOPs per token and their ratio; the tests hold the ratio within 5%
(tests/test_flops.py, on smaller shapes).

    PYTHONPATH=. python bench/flops_check.py
    PYTHONPATH=. python bench/flops_check.py --all-objectives --vocab 2000
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import torch

from corpora.corpus import Corpus
from corpora.vocab import Vocabulary, count_types
from neural.config import OBJECTIVES, RunConfig
from neural.families import FAMILIES
from neural.training.measured_flops import factored_rows, measured_training_flops
from neural.training.team import Team
from neural.training.trainer import Trainer


def zipf_corpus(vocab: int, tokens: int, seed: int = 0) -> Corpus:
    """A training stream over vocab - 1 words (and <unk>): each word once, then `tokens` drawn from a Zipf law."""
    words = np.array([f"w{i}" for i in range(vocab - 1)])
    weights = 1 / np.arange(1, vocab)
    draws = np.random.default_rng(seed).choice(vocab - 1, size=tokens, p=weights / weights.sum())
    train = np.concatenate([words, words[draws]]).tolist()
    dictionary = Vocabulary.from_counts(*count_types(train))
    valid = words[draws[:1000]].tolist()
    return Corpus("zipf", dictionary, train=dictionary.encode(train), valid=dictionary.encode(valid),
                  test=dictionary.encode(valid))


def check(corpus: Corpus, config: RunConfig) -> tuple[float, float]:
    """(analytic, measured) FLOPs per token of the first update of `config` on `corpus`."""
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(corpus, config, Path(folder), Team(device=torch.device("cpu")), resume=False, progress=False)
        trainer.begin_epoch()
        if config.objective == "class":  # the classes frequency binning kept
            config = dataclasses.replace(config, classes=trainer.net.num_classes)
        analytic = config.shape.training_flops(len(corpus.vocab), config, factored_rows(trainer))
        measured, _ = measured_training_flops(trainer)
    return analytic, measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=10_000, help="|V|, <unk> included")
    parser.add_argument("--tokens", type=int, default=200_000, help="tokens of the training stream")
    parser.add_argument("--all-objectives", action="store_true", help="every objective of each family, not only its default")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    corpus = zipf_corpus(args.vocab, args.tokens)
    print(f"|V| = {len(corpus.vocab):,}; torch {torch.__version__}, {args.threads} thread(s)")
    print(f"{'family':12} {'objective':10} {'k':>5} {'B':>4} {'shape':70} {'analytic':>13} {'measured':>13} {'ratio':>7}")
    for name, entry in FAMILIES.items():
        default = RunConfig(model=name, device="cpu", threads=args.threads)
        outputs = entry.shape.outputs
        objectives = [o for o, objective in OBJECTIVES.items() if outputs is None or objective.output in outputs]
        for objective in objectives if args.all_objectives else [default.objective]:
            config = dataclasses.replace(default, objective=objective)
            analytic, measured = check(corpus, config)
            shape = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(config.shape).items())
            samples = config.samples if OBJECTIVES[objective].sampled else "-"
            print(f"{name:12} {objective:10} {samples:>5} {config.batch:4} {shape:70} {analytic:13,.0f} "
                  f"{measured:13,.0f} {analytic / measured:7.4f}")


if __name__ == "__main__":
    main()
