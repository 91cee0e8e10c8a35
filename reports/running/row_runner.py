"""Running one row of a comparison: an n-gram model fitted, a network trained, or a mixture of rows' saved
log-probabilities, scored on the corpus's splits.

A row is handed over as a `RowJob` (the row, its fingerprint, a network's training configuration), and
`RowRunner.run` gives its record (perplexities, `<unk>` figures, bootstrap intervals, what the row's kind adds)
and its per-token log-probabilities by split. The runner knows nothing of schedules: a scheduler
(reports.running.schedule, reports.running.cluster) decides which rows run where and when, and the work folder
(reports.work_folder) keeps what they give. What the runner writes itself is a row's own working state in
the work folder: a network's training folder (resumed from its checkpoint when the row runs again) and an
n-gram row's kept model. Each kind of row runs through its entry of RUNNERS (its stage, and its method).
"""

from __future__ import annotations

import json
import logging
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from corpora.corpus import SPLITS, Corpus
from lmbench import bootstrap
from lmbench.errors import LMBenchError
from lmbench.files import read_checked
from lmbench.model import perplexity, split_perplexity
from mixing import saved
from reports.experiments import WITH_COUNTS, Row
from reports.work_folder import WorkFolder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowJob:
    """A row as its runner needs it: the row, its fingerprint (its cache entry and training folder), a network's
    training configuration (neural.config.RunConfig), a mixture's parts' fingerprints (in `row.parts`'s order),
    and for a network that keeps its word features the (classes, passes) of the class-based row whose word classes
    colour their figure."""
    row: Row
    fingerprint: str
    config: object | None = None
    parts: tuple[str, ...] = ()
    clustering: tuple[int, int] | None = None


@dataclass
class RowRun:
    """What running a row gives (its kind's runner, RUNNERS): the per-token log-probabilities of each split
    it scores, the figures it adds to its record (a network's curve and config, a mixture's weights, the
    ∞-gram's tokens by effective n, ...), and the seconds of its work done before this run (a network
    resumed, or trained apart and found at its path)."""
    logprobs: dict[str, np.ndarray]
    figures: dict = field(default_factory=dict)
    seconds_apart: float = 0.0


@dataclass
class RowRunner:
    """Runs rows on `corpus`, keeping their working state in `work`. `digest`: the corpus's digest (what a
    network's best model records); `threads`: a network's CPU threads (None: the free cores); `bounded`: the
    memory cap of the n-gram methods that can estimate in bounded memory (`memory`, `tmp_dir`; none: in memory)."""
    corpus: Corpus | None
    work: WorkFolder
    digest: str
    threads: int | None = None
    bounded: dict = field(default_factory=dict)
    _blocks: dict = field(default_factory=dict, init=False, repr=False)  # split: its bootstrap blocks (ends, rule)

    def run(self, job: RowJob) -> tuple[dict, dict[str, np.ndarray]]:
        """(the row's record, its log-probabilities by split): its runner's `RowRun`, its perplexities, `<unk>`
        figures and intervals, and the machine that ran it (`node`: its host name; a Ray task adds Ray's node
        id, reports.running.cluster). Nothing is written but the row's working state: the row cache is the scheduler's."""
        started = time.perf_counter()
        ran = runner(job.row).run(self, job)
        logprobs = ran.logprobs
        seconds = time.perf_counter() - started + ran.seconds_apart  # the row's whole run
        record = {**job.row.to_dict(), "fingerprint": job.fingerprint, "seconds": seconds,
                  "node": {"host": platform.node()}, **ran.figures}
        for split in SPLITS:
            record[f"{split}_ppl"] = perplexity(logprobs[split]) if split in logprobs else None
        record.update(unk_figures(logprobs, self.corpus))
        record.update(self.intervals(logprobs))
        log.info("row %s: valid %.1f test %.1f (%.0f s)", job.row.id, record["valid_ppl"], record["test_ppl"],
                 record["seconds"])
        return record, logprobs

    def intervals(self, logprobs: dict) -> dict:
        """`{split}_ppl_ci95` of valid and test (those scored), and `blocks`, each split's block sums
        from which they are computed."""
        for split in ("valid", "test"):
            if split not in self._blocks:
                self._blocks[split] = split_blocks(self.corpus, split)
        blocks = {split: bootstrap.row_blocks(logprobs[split], self._blocks[split][0])
                  for split in ("valid", "test") if split in logprobs}
        return {**bootstrap.intervals(blocks), "blocks": blocks}

    def fitted(self, row: Row):
        """The n-gram row's model, fitted on the corpus (under the run's memory cap, where its method has one)."""
        from baselines.methods import METHODS, NGramOptions, make_ngram
        bounded = self.bounded if METHODS[row.method].bounded else {}
        return make_ngram(NGramOptions(row.method, row.n, row.classes, row.min_ngram_count, row.cluster_passes,
                                       **bounded)).fit(self.corpus)

    def keep_model(self, job: RowJob, model=None) -> None:
        """Keep an n-gram row's model in the work folder (fitted again when not given: a row cached before
        folders kept models)."""
        self.work.keep_model(job.row.id, job.fingerprint, model or self.fitted(job.row), self.corpus.vocab)

    def _run_ngram(self, job: RowJob) -> RowRun:
        row = job.row
        model = self.fitted(row)
        self.keep_model(job, model)
        figures = {"effective_n": model.profile(self.corpus, "test")} if row.method == "infini-gram" else {}
        # (test tokens by effective n, for the report's figure) with the context buckets of deleted
        # interpolation, the effective n of the infini-gram (whose train contexts occur in train itself: not scored)
        splits = SPLITS if row.method != "infini-gram" else ("valid", "test")
        return RowRun(saved.scored_splits(model, self.corpus, splits), figures)

    def _run_network(self, job: RowJob) -> RowRun:
        from neural.scoring import score_split
        from neural.training.checkpoint import load_network
        from neural.training.trainer import train_network
        row, config = job.row, job.config
        out = self.work.network_folder(row.id, job.fingerprint)  # a changed row trains afresh
        started = time.perf_counter()
        summary = train_network(self.corpus, config, out, resume=True, evaluate=False,  # scored below
                                advice=network_advice(job, self.work))
        trained_here = time.perf_counter() - started  # (0 for a run finished before: resumed, or trained apart)
        # the file checked to be this row's network (another row's best model copied there: refused)
        own = dict(expected={**asdict(config), "corpus": self.digest}, fix=f"delete {out} and run the same command "
                   f"again, which trains row {row.id} again")
        model = load_network(out, self.corpus, threads=self.threads, progress=True, **own)  # the exact scoring's bar
        splits = SPLITS if row.paper_model else ("valid", "test")  # our extra rows: no train column
        logprobs = {split: score_split(model, self.corpus, split) for split in splits}
        curve = read_checked(out / "log.jsonl", _read_curve, what="training log",
                             fix=f"delete the run folder {out} to train this network again")
        _best_in_curve(curve, out, own["fix"])
        figures = dict(curve=curve, epochs=summary.get("epochs"), best_epoch=summary.get("best_epoch"),
                       tokens_per_s=summary.get("tokens_per_s"), train_seconds=summary.get("seconds"),
                       updates=summary.get("updates"), stopped=summary.get("stopped"),
                       train_tokens=summary.get("tokens"), train_flops=training_flops(config, self.corpus, summary),
                       config=asdict(config))
        if model.net.num_classes:  # the same network scored by the full softmax of y, beside its own
            plain = load_network(out, self.corpus, factored=False, threads=self.threads, **own)
            figures["full_softmax_ppl"] = {split: split_perplexity(plain, self.corpus, split)
                                           for split in ("valid", "test")}
        if row.word_vectors:
            figures["embedding"] = self._embedding(model, job)
        # training this invocation did not see (a run resumed, or trained apart and found at its path)
        return RowRun(logprobs, figures, seconds_apart=max(0.0, (summary.get("seconds") or 0.0) - trained_here))

    def _embedding(self, model, job: RowJob, words: int = 300, queries: int = 12, near: int = 8) -> dict:
        """The word features C of the most frequent words, and nearest neighbours of a few of them."""
        vocab = self.corpus.vocab
        counts = np.bincount(self.corpus.train, minlength=len(vocab))
        frequent = np.argsort(-counts, kind="stable")[:words]
        chosen = [int(i) for i in frequent[10:10 + 4 * queries:4]]  # words of varied frequency
        neighbors = {vocab.word(i): [[vocab.word(j), s] for j, s in model.neighbors(i, near)] for i in chosen}
        table = model.word_features()  # (V, m)
        result = {"row": job.row.id, "words": vocab.decode(frequent.tolist()), "vectors": table[frequent].tolist(),
                  "neighbors": neighbors}
        if job.clustering is not None:  # the word classes of its exchange clustering, to colour the figure
            from baselines.clustering import cached_clustering
            clustering = cached_clustering(self.corpus, *job.clustering)
            if clustering is not None:  # cached by the class-based row, which runs before the networks
                result["classes"] = clustering.word_class[frequent].tolist()
        return result

    def _run_mix(self, job: RowJob) -> RowRun:
        row = job.row
        parts = [self.work.logprobs(part, fingerprint, self.corpus) for part, fingerprint in zip(row.parts, job.parts)]
        if row.mix == WITH_COUNTS:  # network, KN 5 and the ∞-gram row's P∞, weights per effective n
            from baselines.infinigram import bucket_means
            mixed, weights = saved.mix_with_counts(parts[:-1], parts[-1], list(row.parts[:-1]), row.parts[-1])
            bucket = parts[-1]["buckets_test"]  # per bucket, the network's and the mixture's (the report's figure)
            return RowRun(mixed, {"weights": weights.tolist(), "effective_n": {
                "network_mean_logprob": bucket_means(bucket, parts[0]["test"]),
                "mixed_mean_logprob": bucket_means(bucket, mixed["test"])}})
        method = {"0.5/0.5": "fixed", "EM": "em", "EM per bucket": "bucketed"}[row.mix]
        buckets = next((part for part in parts if "buckets_valid" in part), None)  # deleted interpolation's
        mixed, weights = saved.mix_saved(parts, method, [1 / len(parts)] * len(parts), buckets, list(row.parts))
        return RowRun(mixed, {"weights": weights.tolist()})


def network_advice(job: RowJob, work: WorkFolder):
    """What the line of a network row's training stopped or refused tells the user to do, in `reproduce`'s
    words (neural.training.checkpoint.Advice: `lmbench train`'s options are not this command's)."""
    from neural.training.checkpoint import Advice
    row_id = job.row.id
    return Advice(resume="run the same command again: the rows finished are cached, and this network "
                         "continues from its last good checkpoint",
                  diverged=f"row {row_id} diverged on this corpus: leave it out (--networks naming the others)"
                           + (", or train it in fp32 (--precision fp32)" if job.config.precision != "fp32" else ""),
                  lanes=f"give a longer training text, or leave row {row_id} out (--networks naming the others, "
                        "or --skip network for none)",
                  other=f"it is not row {row_id}'s (another row's file copied there?): delete "
                        f"{work.network_folder(row_id, job.fingerprint)} and run the same command "
                        f"again, which trains row {row_id} again")


def split_blocks(corpus: Corpus, split: str) -> tuple[np.ndarray, str]:
    """The bootstrap blocks of a split of the corpus (lmbench.bootstrap.block_ends) and their rule: documents
    where the vocabulary has `</d>`."""
    vocab = corpus.vocab
    end_id = vocab.id(bootstrap.DOCUMENT_END) if bootstrap.DOCUMENT_END in vocab else None
    return bootstrap.block_ends(corpus.split(split), end_id)


def training_flops(config, corpus, summary: dict) -> float | None:
    """The training FLOPs a network row spent: its family's analytic count per training token
    (`NetworkShape.training_flops`) times the tokens it trained on."""
    tokens = summary.get("tokens")
    if tokens is None:
        return None
    return config.shape.training_flops(len(corpus.vocab), config) * tokens


def unk_figures(logprobs: dict, corpus: Corpus) -> dict:
    """valid_ppl_no_unk and test_ppl_no_unk: the perplexity of the tokens that are not <unk> (scored as
    in valid_ppl and test_ppl, their contexts unchanged), beside that of every token; None for a
    split of <unk> only."""
    figures = {}
    for split in ("valid", "test"):
        known = corpus.split(split) != corpus.vocab.unk_id
        figures[f"{split}_ppl_no_unk"] = perplexity(logprobs[split][known]) if known.any() else None
    return figures


class Runner(NamedTuple):
    stage: int  # rows run in order of stage: n-grams first (quick), networks, then mixtures of them
    run: Callable[[RowRunner, RowJob], RowRun]  # (runner, job) -> what running the row gives


RUNNERS = {"ngram": Runner(0, RowRunner._run_ngram), "network": Runner(1, RowRunner._run_network),
           "mix": Runner(2, RowRunner._run_mix)}


def runner(row: Row) -> Runner:
    if row.kind not in RUNNERS:
        raise LMBenchError(f"row {row.id!r} is of kind {row.kind!r}, which nothing runs: give it one of "
                           f"{', '.join(RUNNERS)} (reports.running.row_runner.RUNNERS)")
    return RUNNERS[row.kind]


def _read_curve(path: Path) -> list[dict]:
    """A network's log.jsonl: one JSON record per epoch (a finished run has at least one)."""
    curve = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if not curve:
        raise ValueError("it holds no epoch's record")
    return curve


def _best_in_curve(curve: list[dict], out: Path, fix: str) -> None:
    """Refuse, in one line ending `fix`, a training log (log.jsonl) that is not the log of the best model beside it
    (another run's, seed's or row's, copied there): the epoch best.safetensors records, with its validation
    perplexity, is not in it (a best model of an older format, which records neither, is not compared)."""
    from neural.training.checkpoint import BEST, read_state
    best = read_state(out / BEST)
    if "valid_perplexity" not in best:
        return
    logged = next((record.get("valid_perplexity") for record in curve if record.get("epoch") == best.get("epoch")),
                  None)
    if logged != best["valid_perplexity"]:
        raise LMBenchError(f"{out / 'log.jsonl'} is not the training log of {out / BEST} (its epoch {best.get('epoch')}"
                           f" has valid perplexity {logged}, the model's {best['valid_perplexity']}): {fix}")
