"""`lmbench reproduce brown|ap|text`: prepare the corpus, run every row, write results.json, build the report.

Each finished row is cached in the work folder (runs/<corpus>/rows/<id>.json, its per-token
log-probabilities in runs/<corpus>/logprobs/<id>.npz), keyed by a fingerprint of the row, the settings
and the corpus's content: a re-run skips finished rows, an edited corpus file re-runs them all, and an
interrupted NPLM resumes from its checkpoint. A row is looked up and run under a lock on its cache
entry (lmbench.files.locked, as the corpus cache is), so that two runs sharing a work folder run each
row once, and share the work: each passes over the rows the other holds, runs the rest, then waits for
the ones it passed and reads them (reports.running.schedule). With `--jobs K` or `--cluster ADDRESS` the rows run
as tasks of Ray instead (reports.running.cluster), this process alone writing the row cache.
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
The rooms: the work folder's layout and row cache (reports.work_folder), one row's run
(reports.running.row_runner, whose RUNNERS give each kind of row its stage and method), the schedulers
(reports.running.schedule: one after the other; reports.running.cluster: Ray), the settings and the corpus
(reports.running.settings), the seeds (reports.running.seeds) and what results.json records beside the rows
(reports.running.results_file). `Reproduction` plans the rows (which, each one's fingerprint and training
configuration, their budget and expected time), hands them to a scheduler and writes results.json.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from corpora.corpus import SPLITS, Corpus, unk_warning
from corpora.record import corpus_digest, write_record  # (corpus_digest: what every row depends on)
from lmbench import bootstrap, threads
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text
from lmbench.schema import check
from neural.config import TIME_TO_QUALITY
from reports.running import settings as run_settings
from reports.running.estimate import (REPORT_SECONDS, CostModel, RunProgress, committed_results, expected_seconds,
                              recipe_updates, wall_seconds)
from reports.experiments import (DEFAULT, EXTRA_ROWS, NETWORK_CHOICES, OURS, PAPER_FAMILY, QUICK_CLASSES, ROWS, Row,
                                 every_default, ours_rows, text_rows)
from reports.provenance import checked_state, code_state
from reports.records import grouped
from reports.running.results_file import run_metadata, samples, training_run
from reports.running.row_runner import RowJob, RowRunner, network_advice, runner, split_blocks
from reports.running.schedule import RowCache, Scheduler, Sequential
from reports.running.seeds import over_seeds, seed_copies
from reports.running.settings import QUICK_IGNORED, USER_REPORTS, Settings, TextCorpus, default_settings, report_name
from reports.work_folder import WorkFolder

if TYPE_CHECKING:  # for the annotations only: the trainer loads torch, imported where a network is timed or trained
    from neural.training.trainer import Pace

log = logging.getLogger(__name__)

CLUSTERED_ROW = "class-3-500"  # the class-based row whose word classes colour the word-feature figure (scaled when quick)


class Reproduction:
    def __init__(self, settings: Settings, work_dir: Path, report_dir: Path, text: TextCorpus | None = None,
                 extra: tuple[str, ...] = (), code: dict | None = None, threads: int | None = None, seeds: int = 1,
                 seeds_for: tuple[str, ...] = (), budget: str | None = None, budget_flops: float | None = None,
                 budget_rule: str = "complete", networks: tuple[str, ...] | None = None, jobs: int = 1,
                 precision: str = "auto", cluster: str | None = None):
        self.jobs = jobs  # rows at once on an embedded Ray of this machine (reports.running.cluster; 1: one after the other)
        self.cluster = cluster  # the address of a running Ray cluster that runs the rows (reports.running.cluster; None: none)
        self.settings = settings
        # the paper's tables (a user's corpus: TextCorpus.networks): the network rows to train, by id ("ours": NPLM
        # (ours), a family beyond 2003 by its name, which adds its row group); the table's other network rows and
        # the mixtures of them are listed as not run (None: every one)
        self.networks = networks
        self.left_out: set[str] = set()  # the ids of the network rows `networks` leaves out
        # the compute budget asked (a wall time or a recorded budget; FLOPs per network row), and once the rows
        # are known its record (reports.running.budget.resolve): each network row's updates; None: the recipes' lengths
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
        self.work = WorkFolder(Path(work_dir))
        self.report_dir = report_dir
        self.write_results_file = True  # False: results.json is left to the report (`reproduce`), in results_text
        self.text = text
        # every row run, set once the corpus is loaded (a user's class counts follow its |V|): the table's rows,
        # then the copies for the further seeds of those with a network in them (`seeded`, by the id of the row copied)
        self.rows: list[Row] = []
        self.seeded: dict[str, list[Row]] = {}
        self.corpus: Corpus | None = None
        self.digest = ""
        self.runner: RowRunner | None = None  # runs a row (reports.running.row_runner), once the corpus is loaded
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
        if self.settings.quick:  # a class-based row's classes scaled to the slice
            rows = [Row(**{**row.to_dict(), "classes": QUICK_CLASSES[row.classes]}) if row.classes else row
                    for row in rows]
        return rows

    def chosen(self, row: Row) -> bool:
        """Whether a network row is one `networks` names (every one when it names none)."""
        return (every_default(self.networks) or row.id in self.networks
                or (row.id == "nplm-ours" and OURS in self.networks))

    def load_corpus(self) -> Corpus:
        return run_settings.load_corpus(self.settings, self.text)

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

    def budget_plan(self):
        """What a compute budget is shared over (reports.running.budget.NetworkPlan): the network rows to budget (no seed
        copy, none left out), and the expected seconds of the rows with no network (reports.running.estimate's cost
        model; 0 for a kind no committed row has)."""
        from reports.running.budget import NetworkPlan
        model = CostModel(committed_results())
        tokens = {split: len(self.corpus.split(split)) for split in SPLITS}
        others = sum(model.seconds(row.to_dict(), None, tokens) or 0.0 for row in self.rows if not row.family)
        networks = [row for row in self.rows if row.family and row.id not in self.original
                    and row.id not in self.left_out]
        return NetworkPlan(networks, {row.id: 1 + len(self.seeded.get(row.id, ())) for row in networks},
                           lambda row: self.training_config(row, budgeted=False), self.speed, self.corpus,
                           self.work.budget_path, self.lanes(), self.started, others)

    def job(self, row: Row) -> RowJob:
        """Row `row` as its runner needs it (reports.running.row_runner.RowJob)."""
        by_id = {r.id: r for r in self.rows}
        clustered = by_id.get(CLUSTERED_ROW) if row.word_vectors else None
        return RowJob(row, self.fingerprint(row), self.training_config(row) if row.family else None,
                      tuple(self.fingerprint(by_id[part]) for part in row.parts),
                      (clustered.classes, clustered.cluster_passes) if clustered is not None else None)

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
        lock, so that two runs sharing a work folder run each row once (reports.running.schedule.Sequential). With
        `jobs` > 1 or a `cluster`, the rows run as tasks of Ray instead (reports.running.cluster.OnRay), this process
        alone writing the row cache; the figures are those of a sequential run wherever a row ran."""
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
        write_record(self.work.path, {**run_settings.corpus_options(self.settings, self.text), "digest": self.digest})
        self.work.keep_vocabulary(self.corpus.vocab)
        bounded = {"memory": self.text.memory, "tmp_dir": self.text.tmp_dir} if self.text is not None else {}
        self.runner = RowRunner(self.corpus, self.work, self.digest, self.threads, bounded)
        self.seeded = seed_copies(table, self.seeds[1:], self.seeds_for or (trained if self.left_out else ()))
        self.rows = table + [copy for copies in self.seeded.values() for copy in copies]
        self.original = {copy.id: row_id for row_id, copies in self.seeded.items() for copy in copies}
        if not self.settings.quick and (self.budget_asked, self.budget_flops) != (None, None):
            # (a quick run trains one epoch a network: what a budget would cut)
            from reports.running.budget import resolve
            self.budget = resolve(self.budget_plan(), self.budget_asked, self.budget_flops, self.budget_rule)
        progress = self.progress(skip)
        log.info("reproduce %s: %s", self.settings.corpus, progress.summary(len(self.rows)))
        absent = self.not_run(skip)
        results = {row.id: {**row.to_dict(), "status": "not run", "train_ppl": None, "valid_ppl": None,
                            "test_ppl": None, "seconds": None} for row in self.rows if row.id in absent}
        for row_id in results:
            progress.passed(row_id)
        rows = RowCache(self.runner, progress)
        self.scheduler().run([self.job(row) for row in self.staged_rows() if row.id not in absent], rows, results)
        self.rows_run = rows.ran
        progress.close()
        return table, results

    def scheduler(self) -> Scheduler:
        """One row after the other here (reports.running.schedule.Sequential), or with `jobs` > 1 or a `cluster`, the rows
        as tasks of Ray (reports.running.cluster.OnRay: the one place Ray is imported)."""
        if self.jobs <= 1 and self.cluster is None:
            return Sequential()
        from reports.running.cluster import OnRay
        return OnRay(self.jobs, self.cluster, self.row_threads(), self.estimate.get("rows", {}))

    def staged_rows(self) -> list[Row]:
        """The rows in the order their stages run (a mixture after its parts)."""
        return sorted(self.rows, key=lambda r: runner(r).stage)

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
            job = replace(self.job(by_id[original]), config=config)
            self._speeds[original] = measure_pace(self.corpus, config, network_advice(job, self.work))
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
        """The rows this run lists as not run: of a kind in `skip`, left out by `networks`, or a mixture of such
        a row."""
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
        cached = {row.id for row in self.rows if row.id not in absent and self.work.holds(row.id, self.fingerprint(row))}
        costs = {row.id: 0.0 if row.id in cached | absent else self.expected_seconds(row, model) for row in self.rows}
        kinds = {row.id: row.kind for row in self.rows}
        to_run = {row_id: cost for row_id, cost in costs.items() if row_id not in cached | absent}
        wall = None
        if None not in to_run.values():  # the mixtures run in this process, beside the rows' tasks (reports.running.cluster)
            wall = (wall_seconds([cost for row_id, cost in to_run.items() if kinds[row_id] != "mix"], self.lanes())
                    + sum(cost for row_id, cost in to_run.items() if kinds[row_id] == "mix"))
        spent = time.time() - self.started  # the corpus loaded (and the paces measured): in the wall time too
        self.estimate = {"seconds": round(spent + wall + REPORT_SECONDS, 1) if wall is not None else None,
                         "networks": "committed runs' pace" if self.settings.quick else "pace measured here",
                         "rows": {row_id: round(cost, 1) for row_id, cost in to_run.items() if cost is not None},
                         **({"rows_at_once": self.lanes()} if self.lanes() > 1 else {})}
        return RunProgress(costs, f"reproduce {self.settings.corpus}", cached, measured=not self.settings.quick,
                           not_run=absent, overhead=spent + REPORT_SECONDS, wall=wall, at_once=self.lanes())

    def write_results(self, rows: list[dict], seconds: float) -> dict:
        embedding = next((r.pop("embedding") for r in rows if "embedding" in r), None)
        results = {
            "corpus": self.settings.corpus,
            "name": self.text.name if self.text else self.settings.corpus,
            "settings": asdict(self.settings),
            "corpus_summary": self.corpus.summary(),
            "meta": {**run_metadata(seconds, self.code),
                     "rows_seconds": round(sum(r["seconds"] or 0 for r in rows), 1), 
                     **training_run(self.rows_run, seconds, self.code, self.estimate, self.report_dir)},
            "rows": rows,
            **({"budget": self.budget} if self.budget is not None else {}),
            "bootstrap": {"resamples": bootstrap.RESAMPLES, "seed": bootstrap.SEED, "interval": "95% percentile",
                          "blocks": {split: split_blocks(self.corpus, split)[1] for split in ("valid", "test")}},
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
              f"a value that is no number (a network that diverged?); delete {self.work.path / 'rows'}/ID.json of "
              "that row to run it again, or report the bug")
        drawn = samples(rows, self.corpus, self.work, self.settings.seed, self.threads)  # (once the rows are sound)
        if drawn is not None:
            results["samples"] = drawn
            text = json.dumps(results, indent=1, default=str)
            check("results", json.loads(text), fix=f"nothing was written to {self.report_dir}: a bug of "
                  "reports.running.results_file.samples, report it")
        self.results_text = text  # results.json, written with the report (`reproduce`), or here alone
        if self.write_results_file:
            self.report_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.report_dir / "results.json", text)
        return results


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
    budget (reports.running.budget; None: each recipe's own length) and `budget_rule` how the rows share it; `networks`:
    the paper's tables' network rows to train (Reproduction; a user's corpus: `text.networks`); `results_dir`: the committed reports the
    report's cross-corpus summary gathers (default: results/ in the working directory, reports.building.summary); `jobs`:
    rows at once on an embedded Ray of this machine (reports.running.cluster; 1: one after the other, no Ray); `cluster`:
    the address of a running Ray cluster that runs the rows instead ("auto": RAY_ADDRESS's); `precision`: the
    network rows' training products (neural.precision: fp32, bf16 or auto; recorded in each row's config and cache
    key)."""
    from reports.building.build import build_report
    from reports.building.significance import seeds_advice
    from reports.building.summary import RESULTS

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



