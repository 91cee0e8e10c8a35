"""`lmbench reproduce brown|ap|text`: prepare the corpus, run every row, write results.json, build the report.

Each finished row is cached in the work folder (runs/<corpus>/rows/<id>.json, its per-token
log-probabilities in runs/<corpus>/logprobs/<id>.npz), keyed by a fingerprint of the row, the settings
and the corpus's content: a re-run skips finished rows, an edited corpus file re-runs them all, and an
interrupted NPLM resumes from its checkpoint. A row is looked up and run under a lock on its cache
entry (lmbench.files.locked, as the corpus cache is), so that two runs sharing a work folder run each
row once, and share the work: each passes over the rows the other holds, runs the rest, then waits for
the ones it passed and reads them (`run_or_read`). With `--jobs K` or `--cluster ADDRESS` the rows run
as tasks of Ray instead (reports.cluster), this process alone writing the row cache.
Mixture rows read the saved log-probabilities of their parts, so nothing is retrained.
With `--seeds K` (K > 1) every row with a network in it (or those `--seeds-for` names, and the mixtures
of them) runs under K seeds (`seed_copies`: the run's seed, then one more each): the first seed's work is the row itself, cached as with one seed, each
further seed's a row of its own (`<id>-seed<s>`: its own fingerprint, cache entry and training folder),
a mixture of seed s mixing seed s's network; the row then gives the geometric mean of the seeds' perplexities,
their standard deviation and every seed's (`over_seeds`).
Every row keeps the bootstrap blocks of valid and test (lmbench.bootstrap: per-block sums of
log-probabilities and token counts) and the 95% interval of each perplexity, over the grouping of
consecutive blocks chosen on valid once every row has run (reports.records.grouped, recorded in
`bootstrap.grouping`); a row cached before rows kept them gets them from its saved log-probabilities.
Each kind of row runs through its entry of RUNNERS (the order of the stages, and the method), which
returns a `RowRun` (the log-probabilities, the figures the record adds).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from corpora.corpus import SPLITS, Corpus, slice_corpus, unk_warning
from corpora.record import corpus_digest, write_record  # (corpus_digest: what every row depends on)
from lmbench import __version__, bootstrap, threads
from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, atomic_write_text, locked, read_checked, set_aside, write_checked
from lmbench.model import perplexity, split_perplexity
from lmbench.schema import check
from mixing import saved
from neural.config import TIME_TO_QUALITY
from reports.estimate import (REPORT_SECONDS, CostModel, RunProgress, committed_results, expected_seconds,
                              recipe_updates, wall_seconds)
from reports.experiments import (DEFAULT, EXTRA_ROWS, NETWORK_CHOICES, OURS, PAPER_FAMILY, QUICK_CLASSES, ROWS,
                                 WITH_COUNTS, Row,
                                 every_default, ours_rows, text_rows)
from reports.provenance import checked_state, code_state
from reports.records import grouped, seeds_centre

if TYPE_CHECKING:  # for the annotations only: the trainer loads torch, imported where a network is timed or trained
    from neural.training.trainer import Pace

log = logging.getLogger(__name__)


@dataclass
class Settings:
    """What a reproduction run does besides the rows themselves; part of every row's fingerprint."""
    corpus: str = "brown"
    quick: bool = False                # a small slice of the corpus, for a run of a few minutes
    seed: int = 0
    nplm: dict = field(default_factory=dict)   # options of neural.training.trainer.RunConfig for every network
    slice: dict | None = None          # quick: tokens per split and min count of the sliced vocabulary


USER_REPORTS = Path("runs") / "reports"  # a run's report by default, ignored by git (the committed ones: results/)
# results.json's samples (`Reproduction.samples`): continuations of the first tokens of test, from the best n-gram
# row and the best row of each network family
SAMPLES = {"count": 3, "words": 20, "seed_words": 8}
QUICK_SLICE = {"train": 10_000, "valid": 2_000, "test": 2_000, "min_count": 3}


# NPLM training for the tables: the default recipe and objective of neural/config.py; see docs/reproducing.md
# ("Table 2" for AP). AP: the paper's weight decay for AP (1e-5) and at most 8 epochs (the paper ran
# 5; 8 keep `make reproduce-ap` within 90 minutes on 2 cores); the schedule is every corpus's
# (neural.training.recipe: the halving starts once an epoch gains less than 0.3% per million training tokens).
NPLM_OPTIONS = {
    "brown": {},
    "ap": {"epochs": 8, "weight_decay": 1e-5},
}
QUICK_NPLM_OPTIONS = {"epochs": 1, "batch_size": 128}
QUICK_IGNORED = ("epochs", "valid_tokens")  # a row's own budget, which a quick run replaces by its own


@dataclass(frozen=True)
class TextCorpus:
    """A user's corpus for `lmbench reproduce text`: three files of whitespace-separated tokens (or one,
    `corpus_file`, cut by lines into `corpus_split`), the vocabulary options of corpora/text.py, which rows
    to run (see reports.experiments.text_rows), and the memory cap of the n-gram rows that can estimate
    in bounded memory (those registered `bounded`, baselines.methods.METHODS; `--memory`), which is no part of a row's
    fingerprint: both paths give the same model bit for bit (tests/test_disk_counts.py), so a row
    cached by either is the other's result."""
    train: Path | None = None
    valid: Path | None = None
    test: Path | None = None
    corpus_file: Path | None = None
    corpus_split: tuple[float, float, float] = (0.8, 0.1, 0.1)
    name: str = "text"                # the report's folder, reports/NAME
    min_count: int | None = None      # None: corpora.text.default_min_count (2, or 1 where train has <unk>)
    vocab_size: int | None = None     # keep at most this many words (specials included)
    networks: tuple[str, ...] | None = None
    only: str | None = None           # "ngram" or "nplm"
    memory: int | None = None         # bytes: the n-gram rows' cap (None: in memory)
    tmp_dir: Path | None = None       # the bounded path's temporary files (None: the system's folder)


def default_settings(corpus: str, quick: bool) -> Settings:
    nplm = QUICK_NPLM_OPTIONS if quick else NPLM_OPTIONS.get(corpus, {})  # a user's corpus: the defaults
    return Settings(corpus=corpus, quick=quick, nplm=nplm, slice=QUICK_SLICE if quick else None)


@dataclass
class RowRun:
    """What running a row gives (its kind's runner, RUNNERS): the per-token log-probabilities of each split
    it scores, the figures it adds to its record (a network's curve and config, a mixture's weights, the
    ∞-gram's tokens by effective n, ...), and the seconds of its work done before this run (a network
    resumed, or trained apart and found at its path)."""
    logprobs: dict[str, np.ndarray]
    figures: dict = field(default_factory=dict)
    seconds_apart: float = 0.0


class Reproduction:
    def __init__(self, settings: Settings, work_dir: Path, report_dir: Path, text: TextCorpus | None = None,
                 extra: tuple[str, ...] = (), code: dict | None = None, threads: int | None = None, seeds: int = 1,
                 seeds_for: tuple[str, ...] = (), budget: str | None = None, budget_flops: float | None = None,
                 budget_rule: str = "complete", networks: tuple[str, ...] | None = None, jobs: int = 1,
                 precision: str = "auto", cluster: str | None = None):
        self.jobs = jobs  # rows at once on an embedded Ray of this machine (reports.cluster; 1: one after the other)
        self.cluster = cluster  # the address of a running Ray cluster that runs the rows (reports.cluster; None: none)
        self.settings = settings
        # the paper's tables (a user's corpus: TextCorpus.networks): the network rows to train, by id ("ours": NPLM
        # (ours), a family beyond 2003 by its name, which adds its row group); the table's other network rows and
        # the mixtures of them are listed as not run (None: every one)
        self.networks = networks
        self.left_out: set[str] = set()  # the ids of the network rows `networks` leaves out
        # the compute budget asked (a wall time or a recorded budget; FLOPs per network row), and once the rows
        # are known its record (reports.budget.resolve): each network row's updates; None: the recipes' lengths
        self.budget_asked, self.budget_flops, self.budget_rule, self.budget = budget, budget_flops, budget_rule, None
        self.original: dict[str, str] = {}  # a seed copy's id: the id of the row it copies
        self.started = time.time()  # (set again when the run starts: the budget counts from there)
        # the seeds of the rows with a network in them: the settings' seed, then one more each (`seed_copies`)
        self.seeds = [settings.seed + i for i in range(seeds)]
        self.seeds_for = seeds_for  # the network rows that take the further seeds (empty: every one)
        self.precision = precision  # the network rows' training products (neural.precision; auto: per family)
        self.threads = threads  # network rows' CPU threads (None: neural.training.recipe.default_threads): how fast
        self.code = code or code_state(report_dir)  # the commit that runs, reports.provenance
        self.extra = extra  # the optional row groups to add (EXTRA_ROWS of the corpus)
        self.work = work_dir
        self.report_dir = report_dir
        self.write_results_file = True  # False: results.json is left to the report (`reproduce`), in results_text
        self.text = text
        # every row run, set once the corpus is loaded (a user's class counts follow its |V|): the table's rows,
        # then the copies for the further seeds of those with a network in them (`seeded`, by the id of the row copied)
        self.rows: list[Row] = []
        self.seeded: dict[str, list[Row]] = {}
        self.corpus: Corpus | None = None
        self.digest = ""
        self._blocks: dict[str, tuple[np.ndarray, str]] = {}  # split: its bootstrap blocks (ends, rule)
        self.rows_run = 0  # the rows this run computed (the others came from the row cache)
        self._speeds: dict[str, Pace] = {}  # a network row's pace here, by its id (`speed`)
        self.estimate: dict = {}  # the run's expected seconds, said at its start (`progress`), in results.json

    def table_rows(self) -> list[Row]:
        """The table's rows (NPLM (ours) among them) and the optional groups asked for; on a user's corpus,
        NPLM (ours) unless --only ngram or a --networks list without it leaves it out."""
        if self.text is not None:
            rows = text_rows(len(self.corpus.vocab), self.text.networks, self.text.only)
            if self.text.only == "ngram" or not (every_default(self.text.networks) or OURS in self.text.networks):
                return rows
            return rows + ours_rows(self.corpus)
        groups = EXTRA_ROWS.get(self.settings.corpus, {})
        named = tuple(name for name in self.networks or () if name in groups and name not in self.extra)
        rows = ROWS[self.settings.corpus](self.corpus) + [row for name in self.extra + named for row in groups[name]()]
        return [self._scaled(row) for row in rows]

    def chosen(self, row: Row) -> bool:
        """Whether a network row is one `networks` names (every one when it names none)."""
        return (every_default(self.networks) or row.id in self.networks
                or (row.id == "nplm-ours" and OURS in self.networks))

    def _scaled(self, row: Row) -> Row:
        if self.settings.quick and row.classes:
            return Row(**{**row.to_dict(), "classes": QUICK_CLASSES[row.classes]})
        return row

    def load_corpus(self) -> Corpus:
        if self.text is not None and self.text.corpus_file is not None:
            from corpora.text import load_text_file
            corpus = load_text_file(self.text.corpus_file, self.text.corpus_split, min_count=self.text.min_count,
                                    max_vocab=self.text.vocab_size)
        elif self.text is not None:
            from corpora.text import load_text
            corpus = load_text(self.text.train, self.text.valid, self.text.test, min_count=self.text.min_count,
                               max_vocab=self.text.vocab_size)
        else:
            from corpora.named import load_named
            corpus = load_named(self.settings.corpus)
        if self.settings.quick:
            s = self.settings.slice
            cut = corpus.info.get("cut")  # one file's lines cut into the splits (corpora.text.load_text_file)
            corpus = slice_corpus(corpus, s["train"], s["valid"], s["test"], min_count=s["min_count"])
            if cut:
                corpus.info["cut"] = cut
        return corpus

    def corpus_options(self) -> dict:
        """The options naming the corpus `load_corpus` loads, as `corpora.record.write_record` records them in
        the work folder (corpus.json, with a quick run's slice): how `reports.api.load` finds a row's
        corpus and vocabulary again."""
        text = self.text
        if text is None:
            options = {"corpus": self.settings.corpus}
            if self.settings.corpus == "ap" and os.environ.get("AP_DIR"):
                options["ap_dir"] = Path(os.environ["AP_DIR"])
        elif text.corpus_file is not None:
            options = {"corpus": "text", "corpus_file": text.corpus_file, "corpus_split": text.corpus_split}
        else:
            options = {"corpus": "text", "train": text.train, "valid": text.valid, "test": text.test}
        if text is not None:
            options.update({k: v for k, v in (("min_count", text.min_count), ("vocab_size", text.vocab_size))
                            if v is not None})
        return {**options, **({"slice": self.settings.slice} if self.settings.quick else {})}

    def fingerprint(self, row: Row) -> str:
        """What a row's result depends on: the row, the settings, the corpus's content, for a network its
        whole training configuration (so that a changed default re-trains it), for a mixture its parts'."""
        key = {"row": row.to_dict(), "settings": asdict(self.settings), "corpus": self.digest}
        if row.family:  # (the thread count changes how fast a network trains, not what: left out)
            key["training"] = {**asdict(self.training_config(row)), "threads": None}
        if row.parts:  # a mixture is stale when one of its parts is
            by_id = {r.id: r for r in self.rows}
            key["parts"] = [self.fingerprint(by_id[part]) for part in row.parts]
        blob = json.dumps(key, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def training_config(self, row: Row, budgeted: bool = True):
        """The training configuration of a network row: its family, the settings' options, the row's own
        config (its budget, `QUICK_IGNORED`, left to the settings in a quick run). The settings' options
        are the recipe of the networks `neural.training.trainer` trains (the window families: AP's decay and epoch
        budget are the paper's network's); a stream family keeps its own recipe, but in a quick run (which narrows its shape too,
        its family's `quick` shape)."""
        from neural.config import RunConfig
        from neural.families import family
        own = {key: value for key, value in row.config.items() if not (self.settings.quick and key in QUICK_IGNORED)}
        common = self.settings.nplm if self.settings.quick or family(row.family).context == "window" else {}
        # A quick run narrows a family to its `quick` shape (`neural.families`; as QUICK_CLASSES shrinks C): at
        # their own widths one update of the stream networks takes seconds on a core, and a quick run only
        # checks that every row runs, scores and mixes. The window networks keep their shapes.
        narrowed = family(row.family).quick if self.settings.quick else {}
        config = RunConfig(model=row.family, threads=self.threads, precision=self.precision,  # (a seed copy's config names its seed)
                           **{"seed": self.settings.seed, **common, **self.time_to_quality(row), **narrowed, **own})
        planned = self.budget["rows"].get(self.original.get(row.id, row.id)) if self.budget is not None else None
        if budgeted and planned is not None and not planned.get("complete"):
            # its updates (a seed copy: its row's), the rate decaying to the last; a row the budget brings to its
            # recipe's end trains as the converged row does (its configuration, its cache entry)
            updates = planned["updates"]
            schedule = "linear" if config.schedule == "halving" and config.recipe == "sgd" else config.schedule
            config = replace(config, budget_updates=updates, schedule=schedule)
        return config

    def time_to_quality(self, row: Row) -> dict:
        """The sgd recipe's time-to-quality settings (neural.config.TIME_TO_QUALITY) where a row takes them: a
        paper shape on a user's corpus (`make compare`), not in a quick run. The paper's tables keep the halving
        rule their committed figures were made with, NPLM (ours) its own budget (neural.ours), and the other
        families their recipes; those rows' configurations, so their cache entries, are unchanged (issue 66)."""
        paper_shape = row.family == PAPER_FAMILY and not row.ours
        return TIME_TO_QUALITY if paper_shape and self.settings.corpus == "text" and not self.settings.quick else {}

    def seconds_without_networks(self) -> float:
        """The expected seconds of the rows with no network (reports.estimate's cost model; 0 for a kind
        no committed row has)."""
        model = CostModel(committed_results())
        tokens = {split: len(self.corpus.split(split)) for split in SPLITS}
        return sum(model.seconds(row.to_dict(), None, tokens) or 0.0 for row in self.rows if not row.family)

    def _row_path(self, row: Row) -> Path:
        return self.work / "rows" / f"{row.id}.json"

    def _logprobs_path(self, row_id: str) -> Path:
        return self.work / "logprobs" / f"{row_id}.npz"

    def cached_result(self, row: Row) -> dict | None:
        """The row's cached result, when it and its saved log-probabilities are there, intact and of this
        fingerprint; a damaged one is set aside with a warning, so that the row runs again."""
        path, logprobs = self._row_path(row), self._logprobs_path(row.id)
        if not (path.exists() and logprobs.exists()):
            return None
        try:
            result = read_checked(path, lambda p: dict(json.loads(p.read_text(encoding="utf-8"))), what="cached row",
                                  fix="delete it to run the row again")
            if result.get("id", row.id) != row.id:
                log.warning("%s is the record of row %s, not of row %s: row %s runs again", path, result.get("id"),
                            row.id, row.id)
                return None
            if result.get("fingerprint") != self.fingerprint(row):
                return None
            arrays = saved.load(logprobs)  # every byte checked, since mixtures read it
            made = self.made_for(row, arrays)
            if made:
                log.warning("%s holds %s: row %s runs again", logprobs, made, row.id)
                return None
            if row.method == "infini-gram" and "p_inf_valid" not in arrays:  # saved before files kept P∞
                return None
        except DamagedFile as damage:
            set_aside(damage.path, damage)
            return None
        return result if "blocks" in result else {**result, **self.intervals(arrays)}

    def run(self, skip: frozenset[str] = frozenset()) -> dict:
        """Run every row not cached, except the rows of the kinds in `skip` (and mixtures of them),
        which the results list as not run."""
        started = self.started = time.time()
        table, results = self.run_rows(skip)
        return self.write_results([over_seeds(self.seeds, results[row.id], *(results[copy.id] for copy in
                                                                           self.seeded.get(row.id, ()))) for row in table],
                                  time.time() - started)

    def run_rows(self, skip: frozenset[str] = frozenset()) -> tuple[list[Row], dict[str, dict]]:
        """(the table's rows, every row's result by id): each row run or read from the row cache, under its
        lock, so that two runs sharing a work folder run each row once (`run_or_read`). With `jobs` > 1 or a
        `cluster`, the rows run as tasks of Ray instead (reports.cluster.run_on_ray), this process alone
        writing the row cache; the figures are those of a sequential run wherever a row ran."""
        self.corpus = self.load_corpus()
        warning = unk_warning(self.corpus.summary())
        if warning:
            log.warning(warning)
        self.digest = corpus_digest(self.corpus)
        table = self.table_rows()
        self.left_out = {row.id for row in table if row.family and not self.chosen(row)}
        trained = tuple(row.id for row in table if row.family and row.id not in self.left_out)
        unknown = [name for name in self.networks or () if name not in (OURS, DEFAULT) and name not in trained]
        if unknown or (self.networks is not None and not trained):
            raise LMBenchError(f"--networks {','.join(unknown or self.networks)}: no network row of that id in the "
                               f"{self.settings.corpus} table; its networks: "
                               f"{','.join(row.id for row in table if row.family)}, ours, or a family of --extra")
        # (once the rows asked for are known to be there; with the digest of the corpus they run on, which a
        # reader of the record compares: corpora.record.load_recorded)
        write_record(self.work, {**self.corpus_options(), "digest": self.digest})
        self.keep_vocabulary()
        self.seeded = seed_copies(table, self.seeds[1:], self.seeds_for or (trained if self.left_out else ()))
        self.rows = table + [copy for copies in self.seeded.values() for copy in copies]
        self.original = {copy.id: row_id for row_id, copies in self.seeded.items() for copy in copies}
        if not self.settings.quick:  # (a quick run trains one epoch a network: what a budget would cut)
            from reports.budget import resolve
            self.budget = resolve(self, self.budget_asked, self.budget_flops, self.budget_rule)
        results = {}
        progress = self.progress(skip)
        log.info("reproduce %s: %s", self.settings.corpus, progress.summary(len(self.rows)))
        if self.jobs > 1 or self.cluster is not None:  # (the one place Ray is imported)
            from reports.cluster import run_on_ray
            run_on_ray(self, skip, results, progress)
        else:
            # two passes: the first runs or reads every row no other run of this work folder holds, leaving
            # those (and the rows made of them) for the second, which waits for each in turn and reads it
            later = [row for row in self.staged_rows()
                     if not self.run_or_read(row, skip, results, progress, wait=False)]
            for row in later:
                self.run_or_read(row, skip, results, progress, wait=True)
        progress.close()
        return table, results

    def staged_rows(self) -> list[Row]:
        """The rows in the order their stages run (a mixture after its parts)."""
        return sorted(self.rows, key=lambda r: runner(r).stage)

    def run_or_read(self, row: Row, skip: frozenset[str], results: dict, progress: RunProgress, wait: bool) -> bool:
        """Put `row`'s result into `results`: read from its cache entry, else run (listed as not run when
        its kind is skipped or a part was not run). With `wait=False`, where another run of the work folder
        holds the row, or a part is not in `results` yet, do nothing and return False."""
        if self.list_not_run(row, skip, results, progress):
            return True
        if any(part not in results for part in row.parts):
            return False  # a part another run holds: after it
        with locked(self._row_path(row), wait=wait) as held:
            if not held:
                return False
            result = self.read_cached(row, progress)
            if result is not None and row.kind == "ngram" and not self.model_kept(row):
                log.info("row %s: fitted again to keep its model (the folder was made before models were kept)", row.id)
                self.keep_model(row, self.fitted(row))
            if result is None:
                log.info("row %s: running", row.id)
                progress.running(row.id)
                result = self.store_row(row, *self.run_row(row))
                progress.ran(row.id)
        results[row.id] = result
        return True

    def list_not_run(self, row: Row, skip: frozenset[str], results: dict, progress: RunProgress) -> bool:
        """Whether `row` is left out (its kind in `skip`, a network `networks` leaves out, a part not run);
        if so its record, listed as not run, is put into `results`."""
        if not (row.kind in skip or row.id in self.left_out
                or any(results.get(part, {}).get("status") == "not run" for part in row.parts)):
            return False
        results[row.id] = {**row.to_dict(), "status": "not run", "train_ppl": None, "valid_ppl": None,
                           "test_ppl": None, "seconds": None}
        progress.passed(row.id)
        return True

    def read_cached(self, row: Row, progress: RunProgress) -> dict | None:
        """The row's result from the row cache (`cached_result`), counted as passed; None: it is to run."""
        result = self.cached_result(row)
        if result is not None:
            progress.passed(row.id)
            log.info("row %s: cached (test perplexity %.1f)", row.id, result["test_ppl"])
            if "test_ppl_no_unk" not in result:  # cached before rows recorded it
                result.update(unk_figures(saved.load(self._logprobs_path(row.id)), self.corpus))
        return result

    def store_row(self, row: Row, result: dict, logprobs: dict[str, np.ndarray]) -> dict:
        """Write a row just run into the row cache (its log-probabilities, then its record); returns the record."""
        self._save_row_logprobs(row, logprobs)
        self.rows_run += 1
        text = json.dumps(result, indent=1)
        write_checked(self._row_path(row), lambda path: path.write_text(text, encoding="utf-8"))
        return result

    def row_threads(self) -> int | None:
        """Each row's CPU threads: --threads; under --jobs K this machine's cores shared among the K rows; on a
        cluster (whose nodes may differ) one; else None (lmbench.threads.default_threads)."""
        if self.threads or (self.jobs <= 1 and self.cluster is None):
            return self.threads
        if self.cluster is None:
            return max(1, threads.cores() // self.jobs)
        return 1

    def lanes(self) -> int:
        """The rows that run at once on this machine at their pace timed alone: --jobs K, at most as many as
        this machine's cores hold at each row's threads (K rows beyond them share the cores, each the slower);
        one where the rows run on a cluster, whose nodes this process cannot time."""
        if self.cluster is not None:
            return 1
        return max(1, min(self.jobs, threads.cores() // (self.row_threads() or threads.cores())))

    def speed(self, row: Row) -> Pace:
        """A network row's pace on this machine at the threads each row takes (`measure_pace`), measured once a
        run (a seed copy's is its row's)."""
        original = self.original.get(row.id, row.id)
        if original not in self._speeds:
            log.info("measuring %s's pace here", original)
            by_id = {r.id: r for r in self.rows}
            config = replace(self.training_config(by_id[original], budgeted=False), threads=self.row_threads())
            from neural.training.trainer import measure_pace
            self._speeds[original] = measure_pace(self.corpus, config, self.advice(by_id[original], config))
        return self._speeds[original]

    def expected_seconds(self, row: Row, model: CostModel) -> float | None:
        """A row's expected seconds here: a network's from its pace measured now (a full run's) and its updates
        (the budget's, else its recipe's); a row with no network, or any row of a quick run, by the committed
        runs' cost model (None: no committed row of its kind)."""
        tokens = {split: len(self.corpus.split(split)) for split in SPLITS}
        if not row.family or self.settings.quick:
            return model.seconds(row.to_dict(), self.training_config(row) if row.family else None, tokens)
        if row.id in self.left_out:
            return 0.0
        if self.budget is not None:
            return self.budget["rows"][self.original.get(row.id, row.id)]["expected_seconds"]
        config, speed = self.training_config(row), self.speed(row)
        return expected_seconds(config, speed, recipe_updates(config, speed.epoch_updates), tokens,
                                bool(row.paper_model))

    def not_run(self, skip: frozenset[str]) -> set[str]:
        """The rows this run lists as not run (`run_or_read`): of a kind in `skip`, left out by `networks`,
        or a mixture of such a row."""
        left: set[str] = set()
        for row in self.staged_rows():
            if row.kind in skip or row.id in self.left_out or any(part in left for part in row.parts):
                left.add(row.id)
        return left

    def progress(self, skip: frozenset[str] = frozenset()) -> RunProgress:
        """The whole run's bar: every row's expected seconds (`expected_seconds`; a row cached already, or not
        run: none), and the estimate results.json records (`self.estimate`)."""
        model = CostModel(committed_results())
        absent = self.not_run(skip)
        cached = {row.id for row in self.rows if row.id not in absent and self.cache_holds(row)}
        costs = {row.id: 0.0 if row.id in cached | absent else self.expected_seconds(row, model) for row in self.rows}
        kinds = {row.id: row.kind for row in self.rows}
        to_run = {row_id: cost for row_id, cost in costs.items() if row_id not in cached | absent}
        wall = None
        if None not in to_run.values():  # the mixtures run in this process, beside the rows' tasks (reports.cluster)
            wall = (wall_seconds([cost for row_id, cost in to_run.items() if kinds[row_id] != "mix"], self.lanes())
                    + sum(cost for row_id, cost in to_run.items() if kinds[row_id] == "mix"))
        spent = time.time() - self.started  # the corpus loaded (and the paces measured): in the wall time too
        self.estimate = {"seconds": round(spent + wall + REPORT_SECONDS, 1) if wall is not None else None,
                         "networks": "committed runs' pace" if self.settings.quick else "pace measured here",
                         "rows": {row_id: round(cost, 1) for row_id, cost in to_run.items() if cost is not None},
                         **({"rows_at_once": self.lanes()} if self.lanes() > 1 else {})}
        return RunProgress(costs, f"reproduce {self.settings.corpus}", cached, measured=not self.settings.quick,
                           not_run=absent, overhead=spent + REPORT_SECONDS, wall=wall, at_once=self.lanes())

    def cache_holds(self, row: Row) -> bool:
        """Whether the row cache has an entry of the row's fingerprint (read again, whole, when the row's turn
        comes: `cached_result`)."""
        try:
            return json.loads(self._row_path(row).read_text(encoding="utf-8")).get("fingerprint") == self.fingerprint(row)
        except (OSError, ValueError, AttributeError):
            return False

    def run_row(self, row: Row) -> tuple[dict, dict[str, np.ndarray]]:
        """(the row's record, its log-probabilities by split): its runner's `RowRun`, its perplexities, `<unk>`
        figures and intervals, and the machine that ran it (`node`: its host name; a Ray task adds Ray's node
        id, reports.cluster). Nothing is written but a network's training folder: the row cache is `store_row`'s."""
        started = time.perf_counter()
        ran = runner(row).run(self, row)
        logprobs = ran.logprobs
        seconds = time.perf_counter() - started + ran.seconds_apart  # the row's whole run
        result = {**row.to_dict(), "fingerprint": self.fingerprint(row), "seconds": seconds,
                  "node": {"host": platform.node()}, **ran.figures}
        for split in SPLITS:
            result[f"{split}_ppl"] = perplexity(logprobs[split]) if split in logprobs else None
        result.update(unk_figures(logprobs, self.corpus))
        result.update(self.intervals(logprobs))
        log.info("row %s: valid %.1f test %.1f (%.0f s)", row.id, result["valid_ppl"], result["test_ppl"],
                 result["seconds"])
        return result, logprobs

    def block_ends(self, split: str) -> tuple[np.ndarray, str]:
        """The bootstrap blocks of a split of the corpus (lmbench.bootstrap.block_ends): documents where
        the vocabulary has `</d>`."""
        if split not in self._blocks:
            vocab = self.corpus.vocab
            end_id = vocab.id(bootstrap.DOCUMENT_END) if bootstrap.DOCUMENT_END in vocab else None
            self._blocks[split] = bootstrap.block_ends(self.corpus.split(split), end_id)
        return self._blocks[split]

    def intervals(self, logprobs: dict) -> dict:
        """`{split}_ppl_ci95` of valid and test (those scored), and `blocks`, each split's block sums
        from which they are computed."""
        blocks = {split: bootstrap.row_blocks(logprobs[split], self.block_ends(split)[0])
                  for split in ("valid", "test") if split in logprobs}
        return {**bootstrap.intervals(blocks), "blocks": blocks}

    def _save_row_logprobs(self, row: Row, logprobs: dict) -> None:
        saved.save(self._logprobs_path(row.id), {k: v for k, v in logprobs.items() if not k.endswith("train")},
                   self.corpus, checked=True, row=(row.id, self.fingerprint(row)))

    def made_for(self, row: Row, arrays: dict) -> str | None:
        """What is wrong with saved log-probabilities `arrays` read as row `row`'s: those of another row or of
        another fingerprint of it (the row and fingerprint it records, `mixing.saved.save`), or of another corpus
        (its stream fingerprint); None where they are the row's (a file written before files recorded their row:
        its stream alone checked)."""
        made = arrays.get("row"), arrays.get("row_fingerprint")
        if made[0] is not None and made != (row.id, self.fingerprint(row)):
            return f"the log-probabilities of row {made[0]} (fingerprint {made[1]}), not of row {row.id}'s " \
                   f"(fingerprint {self.fingerprint(row)})"
        if "stream" in arrays and saved.fingerprints(self.corpus) != {k: arrays[k] for k in saved.FINGERPRINTS}:
            return f"the log-probabilities of another corpus (stream {arrays['stream']}), not of this one's"
        return None

    def row_logprobs(self, row_id: str) -> dict:
        """Row `row_id`'s saved log-probabilities, refused in one line when they are another row's (`made_for`)."""
        arrays = saved.load(self._logprobs_path(row_id))
        made = self.made_for(next(r for r in self.rows if r.id == row_id), arrays)
        if made:
            raise LMBenchError(f"{self._logprobs_path(row_id)} holds {made}: delete it and rows/{row_id}.json in "
                               f"{self.work} and run the same command again, which runs row {row_id} again")
        return arrays

    def fitted(self, row: Row):
        """The n-gram row's model, fitted on the corpus (under the run's memory cap, where it has one)."""
        from baselines.methods import METHODS, NGramOptions, make_ngram
        bounded = {"memory": self.text.memory, "tmp_dir": self.text.tmp_dir} if (
            self.text is not None and METHODS[row.method].bounded) else {}
        return make_ngram(NGramOptions(row.method, row.n, row.classes, row.min_ngram_count, row.cluster_passes,
                                       **bounded)).fit(self.corpus)

    def keep_vocabulary(self) -> None:
        """The corpus's vocabulary, kept in the work folder (reports.api.kept_vocabulary): what a network row is
        read over without its corpus files."""
        from reports.api import kept_vocabulary
        write_checked(kept_vocabulary(self.work), self.corpus.vocab.save)

    def model_kept(self, row: Row) -> bool:
        """Whether the work folder keeps row `row`'s model: its file there, written for this row (another row's
        model copied there is fitted again, saying so)."""
        from baselines.binary import kept_row
        from reports.api import kept_model
        path = kept_model(self.work, row.id, self.fingerprint(row))
        if not path.is_file():
            return False
        try:
            made = read_checked(path, kept_row, what="binary model file", fix="it is fitted again")
        except DamagedFile as damage:
            set_aside(damage.path, damage)
            return False
        if made is not None and (made["id"], made["fingerprint"]) != (row.id, self.fingerprint(row)):
            log.warning("%s holds the model of row %s (fingerprint %s), not of row %s: it is fitted again", path,
                        made["id"], made["fingerprint"], row.id)
            return False
        return True

    def keep_model(self, row: Row, model) -> None:
        """An n-gram row's fitted model, kept in the work folder as a binary model file of float64 values
        (reports.api.kept_model, baselines.binary), so that `lmbench.load(work, row=ID)` reads it, its corpus
        files not needed: the figures it gives are the row's."""
        from baselines.binary import write_binary
        from reports.api import kept_model
        path = kept_model(self.work, row.id, self.fingerprint(row))
        write_checked(path, lambda target: write_binary(model, self.corpus.vocab, target, "float64",
                                                        row={"id": row.id, "fingerprint": self.fingerprint(row)}))

    def _run_ngram(self, row: Row) -> RowRun:
        model = self.fitted(row)
        self.keep_model(row, model)
        figures = {"effective_n": model.profile(self.corpus, "test")} if row.method == "infini-gram" else {}
        # (test tokens by effective n, for the report's figure) with the context buckets of deleted
        # interpolation, the effective n of the infini-gram (whose train contexts occur in train itself: not scored)
        splits = SPLITS if row.method != "infini-gram" else ("valid", "test")
        return RowRun(saved.scored_splits(model, self.corpus, splits), figures)

    def advice(self, row: Row, config):
        """What the line of network row `row`'s training stopped or refused tells the user to do, in
        `reproduce`'s words (neural.training.checkpoint.Advice: `lmbench train`'s options are not this command's)."""
        from neural.training.checkpoint import Advice
        return Advice(resume="run the same command again: the rows finished are cached, and this network "
                             "continues from its last good checkpoint",
                      diverged=f"row {row.id} diverged on this corpus: leave it out (--networks naming the others)"
                               + (", or train it in fp32 (--precision fp32)" if config.precision != "fp32" else ""),
                      lanes=f"give a longer training text, or leave row {row.id} out (--networks naming the others, "
                            "or --skip network for none)",
                      other=f"it is not row {row.id}'s (another row's file copied there?): delete "
                            f"{self.work / 'nplm' / f'{row.id}-{self.fingerprint(row)}'} and run the same command "
                            f"again, which trains row {row.id} again")

    def _run_network(self, row: Row) -> RowRun:
        from neural.scoring import score_split
        from neural.training.checkpoint import load_network
        from neural.training.trainer import train_network
        config = self.training_config(row)
        out = self.work / "nplm" / f"{row.id}-{self.fingerprint(row)}"  # a changed row trains afresh
        started = time.perf_counter()
        summary = train_network(self.corpus, config, out, resume=True, evaluate=False,  # scored below
                                advice=self.advice(row, config))
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
            figures["embedding"] = self._embedding(model, row.id)
        # training this invocation did not see (a run resumed, or trained apart and found at its path)
        return RowRun(logprobs, figures, seconds_apart=max(0.0, (summary.get("seconds") or 0.0) - trained_here))

    def _embedding(self, model, row_id: str, words: int = 300, queries: int = 12, near: int = 8) -> dict:
        """The word features C of the most frequent words, and nearest neighbours of a few of them."""
        vocab = self.corpus.vocab
        counts = np.bincount(self.corpus.train, minlength=len(vocab))
        frequent = np.argsort(-counts, kind="stable")[:words]
        chosen = [int(i) for i in frequent[10:10 + 4 * queries:4]]  # words of varied frequency
        neighbors = {vocab.word(i): [[vocab.word(j), s] for j, s in model.neighbors(i, near)] for i in chosen}
        table = model.word_features()  # (V, m)
        result = {"row": row_id, "words": vocab.decode(frequent.tolist()), "vectors": table[frequent].tolist(),
                  "neighbors": neighbors}
        clustered = next((row for row in self.rows if row.id == "class-3-500"), None)  # scaled when quick
        if clustered is not None:  # the word classes of its exchange clustering, to colour the figure
            from baselines.clustering import cached_clustering
            clustering = cached_clustering(self.corpus, clustered.classes, clustered.cluster_passes)
            if clustering is not None:  # cached by the class-3-500 row, which runs before the networks
                result["classes"] = clustering.word_class[frequent].tolist()
        return result

    def _run_mix(self, row: Row) -> RowRun:
        parts = [self.row_logprobs(part) for part in row.parts]
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

    def training_run(self, seconds: float) -> dict:
        """The run that computed the rows, for what a report cost: this run, where it computed any; else (every
        row from the row cache: a rebuilt report) the one the report it replaces recorded, or none known."""
        if self.rows_run:
            return {"trained": {"wall_seconds": round(seconds, 1), "peak_memory_gb": round(peak_memory_bytes() / 1e9, 2),
                                "commit": self.code.get("commit"), **({"estimate": self.estimate} if self.estimate else {})}}
        try:
            before = json.loads((Path(self.report_dir) / "results.json").read_text(encoding="utf-8"))["meta"]
        except (OSError, ValueError, KeyError, TypeError):
            before = {}
        return {"rebuilt": True, **({"trained": before["trained"]} if isinstance(before.get("trained"), dict) else {})}

    def samples(self, rows: list[dict]) -> dict | None:
        """results.json's `samples`: SAMPLES["count"] continuations of the same seed text (the first
        SAMPLES["seed_words"] tokens of test) from the best n-gram row and the best row of each network
        family, on valid, each drawn with the run's seed plus its number (`reports.api.TextModel.generate`);
        kept in the work folder (samples/ID.json) under the row's fingerprint and what was drawn, so that a
        re-run draws nothing again. None when no such row ran."""
        from reports.api import row_model
        scored = [row for row in rows if row["kind"] in ("ngram", "network") and "fingerprint" in row
                  and row.get("valid_ppl") is not None]  # (a row of this work folder's cache, run)
        groups = {}
        for row in sorted(scored, key=lambda r: (r["valid_ppl"], r["id"])):
            groups.setdefault("ngram" if row["kind"] == "ngram" else row["family"], row)
        if not groups:
            return None
        seed_text = " ".join(self.corpus.vocab.decode(self.corpus.split("test")[:SAMPLES["seed_words"]]))
        drawn = []
        for row in groups.values():
            key = {"fingerprint": row["fingerprint"], "seed_text": seed_text, "seed": self.settings.seed, **SAMPLES}
            path = self.work / "samples" / f"{row['id']}.json"
            kept = read_checked(path, lambda p: json.loads(p.read_text(encoding="utf-8")), what="kept samples",
                                fix="delete it to draw them again") if path.exists() else None
            if kept is not None and kept["key"] != key:  # (another row's or run's copied there, or the row run again)
                log.info("%s holds samples of another model or seed text than row %s's: drawn again", path, row["id"])
            if kept is None or kept["key"] != key:
                model = row_model(self.work, row, self.corpus, threads=self.threads)
                texts = [" ".join(model.sample(SAMPLES["words"], seed_text, self.settings.seed + i))
                         for i in range(SAMPLES["count"])]
                kept = {"key": key, "continuations": texts}
                text = json.dumps(kept, indent=1)
                write_checked(path, lambda target: target.write_text(text, encoding="utf-8"))
            drawn.append({"row": row["id"], "model": row["model"], "test_ppl": row["test_ppl"],
                          "continuations": kept["continuations"]})
        return {"seed_text": seed_text, "seed": self.settings.seed, "words": SAMPLES["words"], "rows": drawn}

    def write_results(self, rows: list[dict], seconds: float) -> dict:
        embedding = next((r.pop("embedding") for r in rows if "embedding" in r), None)
        results = {
            "corpus": self.settings.corpus,
            "name": self.text.name if self.text else self.settings.corpus,
            "settings": asdict(self.settings),
            "corpus_summary": self.corpus.summary(),
            "meta": {**run_metadata(seconds, self.code),
                     "rows_seconds": round(sum(r["seconds"] or 0 for r in rows), 1), **self.training_run(seconds)},
            "rows": rows,
            **({"budget": self.budget} if self.budget is not None else {}),
            "bootstrap": {"resamples": bootstrap.RESAMPLES, "seed": bootstrap.SEED, "interval": "95% percentile",
                          "blocks": {split: self.block_ends(split)[1] for split in ("valid", "test")}},
        }
        if embedding:
            results["neighbors"] = {"row": embedding["row"], "words": embedding.pop("neighbors")}
            results["embedding"] = embedding
        choice = grouped(results)  # the grouping of the blocks, chosen on valid, and the intervals it gives
        if "grouping" in choice["bootstrap"]:
            results["bootstrap"]["grouping"] = choice["bootstrap"]["grouping"]
            for row, regrouped in zip(rows, choice["rows"]):
                row.update({key: regrouped[key] for key in ("valid_ppl_ci95", "test_ppl_ci95") if key in regrouped})
        text = json.dumps(results, indent=1, default=str)
        check("results", json.loads(text), fix=f"nothing was written to {self.report_dir}: a row's runner gave "
              f"a value that is no number (a network that diverged?); delete {self.work / 'rows'}/ID.json of "
              "that row to run it again, or report the bug")
        samples = self.samples(rows)  # (drawn once the rows are known to be sound)
        if samples is not None:
            results["samples"] = samples
            text = json.dumps(results, indent=1, default=str)
            check("results", json.loads(text), fix=f"nothing was written to {self.report_dir}: a bug of "
                  "reports.pipeline.Reproduction.samples, report it")
        self.results_text = text  # results.json, written with the report (`reproduce`), or here alone
        if self.write_results_file:
            self.report_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.report_dir / "results.json", text)
        return results


def training_flops(config, corpus, summary: dict) -> float | None:
    """The training FLOPs a network row spent: its family's analytic count per training token
    (`NetworkShape.training_flops`) times the tokens it trained on."""
    tokens = summary.get("tokens")
    if tokens is None:
        return None
    return config.shape.training_flops(len(corpus.vocab), config) * tokens


def seed_copies(rows: list[Row], seeds: list[int], networks: tuple[str, ...] = ()) -> dict[str, list[Row]]:
    """The copies of each row with a network in it (of those whose ids `networks` names, when it names
    any) for `seeds` (the seeds after the run's first), by the row's id: a network's copy `<id>-seed<s>`
    names its seed in its config (neural.config.RunConfig.seed) and keeps no word features; a mixture's
    mixes the copies of its network parts of the same seed (and the one run of a part not copied)."""
    unknown = [name for name in networks if name not in [row.id for row in rows if row.family]]
    if unknown:
        raise LMBenchError(f"--seeds-for {','.join(unknown)}: no network row of that id in this table; its network "
                           f"rows: {','.join(row.id for row in rows if row.family)}")
    copies: dict[str, list[Row]] = {}
    for row in sorted(rows, key=lambda r: runner(r).stage):  # networks before the mixtures of them
        if row.family and (not networks or row.id in networks):
            copies[row.id] = [replace(row, id=f"{row.id}-seed{seed}", config={**row.config, "seed": seed},
                                      word_vectors=False) for seed in seeds]
        elif any(part in copies for part in row.parts):
            copies[row.id] = [replace(row, id=f"{row.id}-seed{seed}",
                                      parts=tuple(copies[part][i].id if part in copies else part for part in row.parts))
                              for i, seed in enumerate(seeds)]
    return copies


PERPLEXITIES = tuple(f"{split}_ppl{suffix}" for split in SPLITS for suffix in ("", "_no_unk"))


def over_seeds(seeds: list[int], *runs: dict) -> dict:
    """A row from its runs under `seeds` (the row's own result, then its seed copies'): the first seed's
    record (fingerprint, configuration, curve, weights), each perplexity the geometric mean of the seeds'
    perplexities (the centre of its blocks' interval and of the claims on it: one centre) with their
    sample standard deviation beside it (`test_ppl_sd`, ...), every seed's
    figures in `seeds` ([{seed, valid_ppl, test_ppl, ..., seconds}]), seconds those of all the runs,
    and the blocks of the seeds' mean log-probabilities with their intervals (`bootstrap.mean_blocks`:
    a claim on the row tests the seeds' mean, not the first seed). One run (one seed, or a row without
    a network) is the row as it is."""
    first = runs[0]
    if len(runs) == 1 or first.get("status") == "not run":
        return first
    figures = [key for key in PERPLEXITIES if first.get(key) is not None]
    combined = {**first, "seconds": sum(run["seconds"] for run in runs),
                "seeds": [{"seed": seed, **{key: run[key] for key in figures}, "seconds": run["seconds"],
                           **({"weights": run["weights"]} if "weights" in run else {})}
                          for seed, run in zip(seeds, runs)]}
    for key in figures:  # one centre: the geometric mean, the perplexity of the seeds' mean log-probability
        combined[key] = seeds_centre(combined["seeds"], key)
        combined[f"{key}_sd"] = float(np.std([run[key] for run in runs], ddof=1))
    if all("blocks" in run for run in runs):  # the interval and the paired tests of the seeds' mean
        combined["blocks"] = {split: bootstrap.mean_blocks([run["blocks"][split] for run in runs])
                              for split in first["blocks"]}
        combined.update(bootstrap.intervals(combined["blocks"]))
    return combined


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
    run: Callable[[Reproduction, Row], RowRun]  # (reproduction, row) -> what running the row gives


RUNNERS = {"ngram": Runner(0, Reproduction._run_ngram), "network": Runner(1, Reproduction._run_network),
           "mix": Runner(2, Reproduction._run_mix)}


def runner(row: Row) -> Runner:
    if row.kind not in RUNNERS:
        raise LMBenchError(f"row {row.id!r} is of kind {row.kind!r}, which nothing runs: give it one of "
                           f"{', '.join(RUNNERS)} (reports.pipeline.RUNNERS)")
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


def run_metadata(seconds: float, code: dict) -> dict:
    """Commit (and whether the tree was clean: `code`, reports.provenance), versions, machine and wall
    time, to stamp the results."""
    import torch

    return {
        "lmbench": __version__, **code,
        "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
                   f"{'CUDA ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}",
        "wall_seconds": round(seconds, 1),
        "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "threads": {"threads": torch.get_num_threads(), **threads.machine_now()},
        "peak_memory_gb": round(peak_memory_bytes() / 1e9, 2),
    }


def peak_memory_bytes() -> int:
    """The run's peak resident memory so far: the process's high-water mark (Linux: kilobytes; macOS: bytes)."""
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def reproduce(corpus: str, quick: bool, work_dir: Path | None = None, report_dir: Path | None = None,
              skip: frozenset[str] = frozenset(), text: TextCorpus | None = None, extra: tuple[str, ...] = (),
              allow_dirty: bool = False, threads: int | None = None, seeds: int = 1,
              seeds_for: tuple[str, ...] = (), budget: str | None = None, budget_flops: float | None = None,
              results_dir: Path | None = None, budget_rule: str = "complete",
              networks: tuple[str, ...] | None = None, jobs: int = 1, precision: str = "auto",
              cluster: str | None = None) -> dict:
    """Run (or resume) the whole table and build the report; returns the report's summary.
    `skip`: kinds of rows (keys of RUNNERS) to leave out; `text`: the user's corpus when `corpus` is
    "text"; `extra`: names of the corpus's optional row groups to add (EXTRA_ROWS); `allow_dirty`: write
    into a committed report folder from a tree with uncommitted changes (reports.provenance); `threads`:
    CPU threads of the network rows (None: OMP_NUM_THREADS when set, else the free cores, lmbench.threads);
    `seeds`: the seeds each row with a network in it runs under (module docstring); `seeds_for`: the ids of
    the network rows that take them (empty: every one); `budget`, `budget_flops`: the network rows' compute
    budget (reports.budget; None: each recipe's own length) and `budget_rule` how the rows share it; `networks`:
    the paper's tables' network rows to train (Reproduction; a user's corpus: `text.networks`); `results_dir`: the committed reports the
    report's cross-corpus summary gathers (default: results/ in the working directory, reports.summary); `jobs`:
    rows at once on an embedded Ray of this machine (reports.cluster; 1: one after the other, no Ray); `cluster`:
    the address of a running Ray cluster that runs the rows instead ("auto": RAY_ADDRESS's); `precision`: the
    network rows' training products (neural.precision: fp32, bf16 or auto; recorded in each row's config and cache
    key)."""
    from reports.build import build_report
    from reports.significance import seeds_advice
    from reports.summary import RESULTS

    if corpus not in ROWS and not (corpus == "text" and text is not None):
        raise LMBenchError(f"no table for corpus {corpus!r}: use one of {', '.join(ROWS)}, or text with "
                           "--train, --valid and --test")
    groups = EXTRA_ROWS.get(corpus, {})
    for name in extra:
        if corpus == "text" and name in NETWORK_CHOICES:
            raise LMBenchError(f"--extra {name}: a text corpus's networks are chosen with --networks: give "
                               f"--networks {DEFAULT},{name} (the default networks and {name}) instead")
        if name not in groups:
            having = [table for table, named in EXTRA_ROWS.items() if name in named]
            raise LMBenchError(f"--extra {name}: the {corpus} table has no such row group (it is "
                               f"{' or '.join(having)}'s); {corpus}'s groups: {', '.join(groups) or 'none'}")
    if seeds_for and seeds == 1:
        raise LMBenchError(f"--seeds-for {','.join(seeds_for)} names the rows that take --seeds K, and --seeds "
                           "is 1: give --seeds 3 (say), or drop --seeds-for")
    name = report_name(corpus, quick, text.name if text else None)
    work_dir = work_dir or Path("runs") / name
    report_dir = report_dir or USER_REPORTS / name
    code = checked_state(report_dir, allow_dirty)  # before any row runs
    reproduction = Reproduction(default_settings(corpus, quick), work_dir, report_dir, text, extra, code,
                                threads, seeds, seeds_for, budget, budget_flops, budget_rule, networks, jobs,
                                precision, cluster)
    reproduction.write_results_file = False  # written with the report: the folder is replaced whole
    results = reproduction.run(skip)
    built = build_report(report_dir, code, reproduction.results_text, results_dir or RESULTS)
    advice = seeds_advice(built["claims"])
    if advice and not quick:
        log.warning(advice)
    return {"report_dir": str(report_dir), "wall_seconds": results["meta"]["wall_seconds"], **built,
            **({"seeds_advice": advice} if advice else {})}


def report_name(corpus: str, quick: bool, name: str | None = None) -> str:
    """The folder name of a run's report and work: the corpus (a user's: its --name), `-quick` when quick."""
    name = name or corpus
    return f"{name}-quick" if quick else name
