"""Which row runs when: the schedulers of a comparison, behind one narrow interface.

A scheduler is handed the rows to compute, in the order of their stages (a mixture after its parts), as
`RowJob`s, and a `RowCache` (the runner and the work folder), and puts each row's record into `results`,
read from the cache or run. Two implement it:
- `Sequential` (the default): one row after the other in this process, each under the lock of its cache entry,
  so that two runs sharing a work folder run each row once and share the work: each passes over the rows the
  other holds, runs the rest, then waits for the ones it passed and reads them;
- `reports.running.cluster.OnRay` (`--jobs K`, `--cluster ADDRESS`): the rows as tasks of Ray, this process alone
  writing the cache.
The rows listed as not run (a kind skipped, a network left out, a mixture of such a row) are the pipeline's,
before any scheduler sees the rows: a scheduler runs or reads every row it is given.
"""

from __future__ import annotations

import logging
from typing import Protocol

from reports.running.estimate import RunProgress
from reports.running.row_runner import RowJob, RowRunner, unk_figures

log = logging.getLogger(__name__)


class RowCache:
    """A row's way through the work folder: read from its cache entry, or run by `runner` and stored; `progress`
    counts both, `ran` the rows this run computed."""

    def __init__(self, runner: RowRunner, progress: RunProgress):
        self.runner, self.work, self.progress = runner, runner.work, progress
        self.ran = 0

    def read(self, job: RowJob) -> dict | None:
        """The row's record from the cache (its log-probabilities checked to be its own and of this corpus),
        counted as passed, and brought up to date where it was cached by an older version (intervals, `<unk>`
        figures, an n-gram row's kept model); None: the row is to run."""
        row = job.row
        cached = self.work.cached(row.id, job.fingerprint, self.runner.corpus)
        if cached is None:
            return None
        record, arrays = cached
        if row.method == "infini-gram" and "p_inf_valid" not in arrays:  # saved before files kept P∞
            return None
        if "blocks" not in record:
            record = {**record, **self.runner.intervals(arrays)}
        if "test_ppl_no_unk" not in record:
            record.update(unk_figures(arrays, self.runner.corpus))
        self.progress.passed(row.id)
        log.info("row %s: cached (test perplexity %.1f)", row.id, record["test_ppl"])
        return record

    def store(self, job: RowJob, record: dict, logprobs: dict) -> dict:
        """Write a row just run (here or on another node) into the cache; returns its record."""
        self.ran += 1
        return self.work.store(job.row.id, job.fingerprint, record, logprobs, self.runner.corpus)

    def run_or_read(self, job: RowJob, results: dict, wait: bool) -> bool:
        """Put the row's record into `results`, read from the cache or run here, under the lock of its entry.
        With `wait=False`, where another run of the work folder holds the row, or a part is not in `results`
        yet, do nothing and return False."""
        row = job.row
        if any(part not in results for part in row.parts):
            return False  # a part another run holds: after it
        with self.work.lock(row.id, wait=wait) as held:
            if not held:
                return False
            record = self.read(job)
            if record is not None and row.kind == "ngram" and not self.work.model_kept(row.id, job.fingerprint):
                log.info("row %s: fitted again to keep its model (the folder was made before models were kept)", row.id)
                self.runner.keep_model(job)
            if record is None:
                log.info("row %s: running", row.id)
                self.progress.running(row.id)
                record = self.store(job, *self.runner.run(job))
                self.progress.ran(row.id)
        results[row.id] = record
        return True


class Scheduler(Protocol):
    def run(self, jobs: list[RowJob], rows: RowCache, results: dict) -> None:
        """Put every job's record into `results` (which holds the rows listed as not run already), by row id."""


class Sequential:
    """One row after the other, in this process (module docstring)."""

    def run(self, jobs: list[RowJob], rows: RowCache, results: dict) -> None:
        # two passes: the first runs or reads every row no other run of this work folder holds, leaving those
        # (and the rows made of them) for the second, which waits for each in turn and reads it
        later = [job for job in jobs if not rows.run_or_read(job, results, wait=False)]
        for job in later:
            rows.run_or_read(job, results, wait=True)
