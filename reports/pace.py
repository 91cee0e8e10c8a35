"""Each network row's pace on this machine, measured at the start of a run, and the seconds it gives.

A comparison's time is mostly its networks', and their pace depends on the machine (its cores, its
instruction set, the threads the run takes, a GPU) far more than anything the committed results can
tell: so every full run measures, on this machine at its own thread count, each network row it is
about to train (half a second of updates to warm up, two seconds of them timed, then the exact
scoring of a slice of valid: seconds in all), before any row runs. The whole run's estimate (`lmbench
reproduce`'s first line, its progress bar) takes each network row's seconds from that pace (`expected_seconds`), and the compute budget
(`reports.budget`) shares a wall time among the rows by it; the rows with no network, which take seconds
to minutes, keep the committed runs' cost model (`reports.estimate`).

A network row's seconds: its updates times the seconds of one, plus the exact scoring of valid and test
(train too for the paper's rows) and the validation after each epoch, at the measured seconds per token.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# A network's speed: at least WARMUP_UPDATES updates and WARMUP_SECONDS run before timing (its first
# updates allocate and set up its kernels), then at least TIMED_UPDATES updates and TIMED_SECONDS timed. A
# window of a count alone was too short for the paper's shapes (3-6 ms an update: 4 updates erred by -15% to
# +29% against the steady pace, bench/pace_check.py, docs/measurements.md).
WARMUP_UPDATES, WARMUP_SECONDS = 2, 0.5
TIMED_UPDATES, TIMED_SECONDS = 4, 2.0
SCORED_TOKENS = 20_000  # a network's exact scoring speed: timed on at most this many valid tokens
REPORT_SECONDS = 60  # the report built after the rows (tables, claims' 10,000 resamples, figures), on 2 cores


@dataclass
class Speed:
    """A network row's measured pace on this machine: seconds per training update, training tokens per
    update, updates per epoch, seconds per exactly scored token."""
    update_seconds: float
    update_tokens: float
    epoch_updates: int
    score_seconds: float


def measure(corpus, config, advice=None) -> Speed:
    """The pace of a network of `config` (a RunConfig) on `corpus`, at config.threads: a few training
    updates in a throw-away folder, then the exact scoring of the first SCORED_TOKENS tokens of valid.
    `advice`: what a refusal of the network's training tells the user to do, in the words of the command
    that will train it (neural.training.checkpoint.Advice; None: `lmbench train`'s)."""
    from neural.training.checkpoint import Advice
    from neural.training.trainer import Trainer, join
    team = join(None, len(corpus.vocab), device=config.device, threads=config.threads)
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(corpus, config, Path(folder), team, resume=False, progress=False, advice=advice or Advice())
        updates = trainer.begin_epoch()

        def run(least: int, seconds: float, end: int) -> tuple[int, int, float]:
            """(updates, tokens, seconds): at least `least` updates and `seconds`, up to position `end`."""
            done, tokens, started = 0, 0, time.perf_counter()
            while trainer.state.position < end and (done < least or time.perf_counter() - started < seconds):
                tokens += trainer.update()[1]
                trainer.state.position += 1
                done += 1
            return done, tokens, time.perf_counter() - started

        run(WARMUP_UPDATES, WARMUP_SECONDS, updates - 1)  # (one update left to time at least)
        timed, tokens, seconds = run(TIMED_UPDATES, TIMED_SECONDS, updates)
        update_seconds = seconds / timed
        stream, start = corpus.stream_for("valid", history=trainer.net.history)
        stream = stream[:start + SCORED_TOKENS]
        started = time.perf_counter()
        team.score_stream(trainer.net, stream, start, batch_size=config.eval_batch)
        score_seconds = (time.perf_counter() - started) / (len(stream) - start)
    return Speed(update_seconds, tokens / timed, trainer.batches.updates_per_epoch, score_seconds)


def network_seconds_apart(config, speed: Speed, updates: int, tokens: dict, paper_model: bool) -> float:
    """The seconds a network row spends besides its updates: the exact scoring of valid and test (and
    train for the paper's rows) and the validation after each epoch of its `updates`."""
    scored = tokens["valid"] + tokens["test"] + (tokens["train"] if paper_model else 0)
    validated = min(tokens["valid"], config.valid_tokens or tokens["valid"])
    return speed.score_seconds * (scored + math.ceil(updates / speed.epoch_updates) * validated)


def expected_seconds(config, speed: Speed, updates: int, tokens: dict, paper_model: bool) -> float:
    """One run of a network row of `updates` updates at `speed`: the updates and the rest (module docstring)."""
    return updates * speed.update_seconds + network_seconds_apart(config, speed, updates, tokens, paper_model)


def recipe_updates(config, epoch_updates: int) -> int:
    """The updates of a network's recipe run to its end: its epochs, or for the halving rule (which stops on
    a plateau of its own) the median epochs the committed runs of that rule took (reports.estimate)."""
    from reports.estimate import CostModel, committed_results
    return math.ceil(CostModel(committed_results()).epochs(config) * epoch_updates)
