"""Training tokens/s of a network through the one trainer (`neural.training.trainer.train_network`: its
batches, objective, optimizer, loss sums and checkpoints), in each precision asked (`--precision fp32 bf16`:
neural/precision.py), on a synthetic corpus of Zipf-distributed words over --vocab words (Brown's 17,907
by default): no corpus needed. `--shape` names a Table 1 network (default MLP1's: n=5, h=50, m=60, direct);
`--model` any registered family at its own shape (lstm, gru, transformer, rnn, ...). Prints, per precision,
the run's training tokens/s (validation and scoring excluded: the trainer's own `tokens_per_s`), the seconds
of the whole call and its tokens per CPU second of this process (the whole call's: steadier than wall time
where other work shares the cores), then each precision's tokens/s and tokens per CPU second against the first's (after a warm-up run of the first). The
update is the recipe's (the objective's default k); `--device cuda` measures the GPU path (the issue 51
target: MLP1 >= 10x 48.7k tokens/s on an H200). `--batch-size 128 512` measures each batch (windows or lanes
an update) in each precision, the same training tokens each (the first's updates): how much more an update
of more windows costs where a small one waits on latency (issue 66). Wall-clock timings on a shared machine
are noisy; tokens per CPU second are steadier.

    PYTHONPATH=. python bench/train_speed.py [--shape MLP1] [--updates 400] [--device cpu] [--threads 1]
    PYTHONPATH=. python bench/train_speed.py --model transformer --updates 30 --precision fp32 bf16
    PYTHONPATH=. python bench/train_speed.py --vocab 10000 --batch-size 128 512 --threads 1
    PYTHONPATH=. python bench/train_speed.py --tiny        # the test suite's seconds-long run
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from corpora.corpus import Corpus  # noqa: E402
from corpora.vocab import Vocabulary, count_types  # noqa: E402
from neural.config import RunConfig  # noqa: E402
from neural.training.trainer import train_network  # noqa: E402
from reports.experiments import TABLE1_NETWORKS  # noqa: E402


def zipf_corpus(vocab: int, tokens: int, seed: int = 0) -> Corpus:
    """Train, valid and test drawn from Zipf's law over `vocab` word types (every type in train)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    words = np.array([f"w{i}" for i in range(vocab)], dtype=object)
    splits = {"train": np.concatenate([words, words[rng.choice(vocab, tokens, p=p)]]),
              "valid": words[rng.choice(vocab, max(tokens // 50, 64), p=p)],
              "test": words[rng.choice(vocab, 64, p=p)]}
    vocabulary = Vocabulary.from_counts(*count_types(splits["train"]))
    return Corpus("zipf", vocabulary, **{name: vocabulary.encode(list(t)) for name, t in splits.items()})


def main() -> None:
    from neural.families import FAMILIES
    from neural.precision import CHOICES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="MLP1", choices=list(TABLE1_NETWORKS), help="an NPLM of Table 1")
    parser.add_argument("--model", default="nplm", choices=list(FAMILIES),
                        help="the family (default nplm, in --shape; another: its own shape)")
    parser.add_argument("--vocab", type=int, default=17907, help="|V| (default Brown's 17,907)")
    parser.add_argument("--updates", type=int, default=400, help="training updates measured (one epoch's part)")
    parser.add_argument("--objective", default=None, help="default: the family's")
    parser.add_argument("--precision", nargs="+", default=["fp32"], choices=CHOICES)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, auto")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[None],
                        help="windows (or lanes) an update, each measured (default: the recipe's)")
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run (|V| 300, 30 updates): the tests'")
    args = parser.parse_args()
    if args.tiny:
        args.vocab, args.updates = 300, 30
    shape = {}
    if args.model == "nplm":
        n, h, m, direct = TABLE1_NETWORKS[args.shape]
        shape = dict(n=n, h=h, m=m, direct=direct)
    elif args.tiny:
        shape = FAMILIES[args.model].quick
    first = None
    variants = [(precision, batch) for precision in args.precision for batch in args.batch_size]
    for precision, batch in [variants[0], *variants]:  # the first twice: a warm-up run, not printed
        config = RunConfig(model=args.model, **shape, **({"objective": args.objective} if args.objective else {}),
                           device=args.device, threads=args.threads, epochs=1, precision=precision,
                           batch_size=batch)
        per_update = config.batch * (1 if FAMILIES[args.model].context == "window" else config.steps or 512)
        if first is None:
            tokens = args.updates * per_update  # every variant trains as many tokens as the first's updates
        config = replace(config, max_steps=math.ceil(tokens / per_update))
        corpus = zipf_corpus(args.vocab, tokens + 2 * per_update)
        with tempfile.TemporaryDirectory() as out:
            started, cpu = time.perf_counter(), time.process_time()
            result = train_network(corpus, config, out, progress=False, evaluate=False)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        figures = {"model": args.model, **({"shape": args.shape} if args.model == "nplm" else {}),
                   "precision": config.precision, "asked": precision, "batch": config.batch, "vocab": args.vocab,
                   "objective": config.objective, "device": args.device, "threads": args.threads,
                   "updates": result["updates"], "tokens": result["tokens"],
                   "train_tokens_per_s": round(result["tokens_per_s"]), "wall_seconds": round(wall, 2),
                   "tokens_per_cpu_second": round(result["tokens"] / cpu)}
        if first is None:
            first = {}  # (the warm-up)
            continue
        first = first or figures
        if figures is not first:
            figures["speedup"] = round(figures["train_tokens_per_s"] / first["train_tokens_per_s"], 2)
            figures["speedup_per_cpu_second"] = round(figures["tokens_per_cpu_second"] / first["tokens_per_cpu_second"], 2)
        print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
