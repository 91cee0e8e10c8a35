"""A reproduction's work folder (`runs/NAME`): the one place that knows its layout.

    corpus.json                    how to load the corpus again (corpora.record), with its digest
    vocab.json                     the corpus's vocabulary, what a network row is read over
    rows/ID.json                   a finished row's record, keyed by its fingerprint (and ID.json.lock beside it)
    logprobs/ID.npz                its per-token log-probabilities of valid and test (mixing.saved)
    nplm/ID-FINGERPRINT/           a network row's training folder (checkpoints, best model, log.jsonl)
    ngram/ID-FINGERPRINT.lmb       an n-gram row's fitted model (baselines.binary, float64)
    samples/ID.json                the continuations results.json shows of a row, with what they were drawn from
    budget.json                    a compute budget's updates per network row (reports.running.budget)

A row's fingerprint (what its result depends on) is the pipeline's to compute; the folder files every row under
it, and reads a row back only where the fingerprint, the row's id and the corpus its log-probabilities record
all match. The pipeline, the schedulers and `lmbench.load` (reports.api) all reach the folder through
`WorkFolder`.
"""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, locked, read_checked, set_aside, write_checked

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkFolder:
    """The work folder at `path`: where each of its files is, and the row cache's reads and writes."""
    path: Path

    # -- where things are ------------------------------------------------------------------------------------
    def is_work_folder(self) -> bool:
        """Whether the folder holds a row cache (what tells a work folder from a network run folder)."""
        return (self.path / "rows").is_dir()

    def record_path(self, row_id: str) -> Path:
        return self.path / "rows" / f"{row_id}.json"

    def logprobs_path(self, row_id: str) -> Path:
        return self.path / "logprobs" / f"{row_id}.npz"

    def network_folder(self, row_id: str, fingerprint: str) -> Path:
        """A network row's training folder: a changed row (another fingerprint) trains afresh in its own."""
        return self.path / "nplm" / f"{row_id}-{fingerprint}"

    def model_path(self, row_id: str, fingerprint: str) -> Path:
        """An n-gram row's kept model, under its fingerprint as a network's training folder is."""
        return self.path / "ngram" / f"{row_id}-{fingerprint}.lmb"

    @property
    def vocabulary_path(self) -> Path:
        return self.path / "vocab.json"

    def samples_path(self, row_id: str) -> Path:
        return self.path / "samples" / f"{row_id}.json"

    @property
    def budget_path(self) -> Path:
        return self.path / "budget.json"

    def row_ids(self) -> list[str]:
        """The ids of the rows the folder holds a record of, sorted."""
        return sorted(path.name[:-len(".json")] for path in (self.path / "rows").glob("*.json"))

    def row_kind(self, row_id: str) -> str | None:
        """The kind of row `row_id`'s record (None: no readable record)."""
        try:
            return json.loads(self.record_path(row_id).read_text(encoding="utf-8")).get("kind")
        except (OSError, ValueError, AttributeError, TypeError):
            return None

    # -- the row cache ---------------------------------------------------------------------------------------
    def lock(self, row_id: str, wait: bool = True) -> AbstractContextManager[bool]:
        """The lock on row `row_id`'s cache entry (lmbench.files.locked): two runs sharing the folder run a row once."""
        return locked(self.record_path(row_id), wait=wait)

    def record(self, row_id: str, fix: str) -> dict:
        """Row `row_id`'s record as `lmbench.load` reads it (`checked_record`); a damaged one refused in one line
        ending `fix`."""
        return read_checked(self.record_path(row_id), checked_record, what="cached row", fix=fix)

    def holds(self, row_id: str, fingerprint: str) -> bool:
        """Whether the cache has an entry of row `row_id` of this fingerprint (read whole, and checked, when the
        row's turn comes: `cached`)."""
        try:
            return json.loads(self.record_path(row_id).read_text(encoding="utf-8")).get("fingerprint") == fingerprint
        except (OSError, ValueError, AttributeError):
            return False

    def cached(self, row_id: str, fingerprint: str, corpus) -> tuple[dict, dict[str, np.ndarray]] | None:
        """(record, saved log-probabilities) of row `row_id` when both are there, intact, of this fingerprint and
        of `corpus`; None where the row is to run (a damaged file is set aside with a warning)."""
        path, logprobs = self.record_path(row_id), self.logprobs_path(row_id)
        if not (path.exists() and logprobs.exists()):
            return None
        try:
            record = read_checked(path, lambda p: dict(json.loads(p.read_text(encoding="utf-8"))), what="cached row",
                                  fix="delete it to run the row again")
            if record.get("id", row_id) != row_id:
                log.warning("%s is the record of row %s, not of row %s: row %s runs again", path, record.get("id"),
                            row_id, row_id)
                return None
            if record.get("fingerprint") != fingerprint:
                return None
            from mixing import saved
            arrays = saved.load(logprobs)  # every byte checked, since mixtures read it
            made = made_for(row_id, fingerprint, arrays, corpus)
            if made:
                log.warning("%s holds %s: row %s runs again", logprobs, made, row_id)
                return None
        except DamagedFile as damage:
            set_aside(damage.path, damage)
            return None
        return record, arrays

    def store(self, row_id: str, fingerprint: str, record: dict, logprobs: dict[str, np.ndarray], corpus) -> dict:
        """Write a row just run into the cache: its log-probabilities of valid and test, then its record."""
        from mixing import saved
        saved.save(self.logprobs_path(row_id), {k: v for k, v in logprobs.items() if not k.endswith("train")},
                   corpus, checked=True, row=(row_id, fingerprint))
        text = json.dumps(record, indent=1)
        write_checked(self.record_path(row_id), lambda path: path.write_text(text, encoding="utf-8"))
        return record

    def logprobs(self, row_id: str, fingerprint: str, corpus) -> dict[str, np.ndarray]:
        """Row `row_id`'s saved log-probabilities (a mixture's part), refused in one line where they are another
        row's, fingerprint's or corpus's (`made_for`)."""
        from mixing import saved
        path = self.logprobs_path(row_id)
        arrays = saved.load(path)
        made = made_for(row_id, fingerprint, arrays, corpus)
        if made:
            raise LMBenchError(f"{path} holds {made}: delete it and rows/{row_id}.json in {self.path} and run the "
                               f"same command again, which runs row {row_id} again")
        return arrays

    # -- kept models and the vocabulary ----------------------------------------------------------------------
    def model_kept(self, row_id: str, fingerprint: str) -> bool:
        """Whether the folder keeps row `row_id`'s model, written for this row and fingerprint (another row's
        model copied there is not, and the caller fits it again)."""
        from baselines.binary import kept_row
        path = self.model_path(row_id, fingerprint)
        if not path.is_file():
            return False
        try:
            made = read_checked(path, kept_row, what="binary model file", fix="it is fitted again")
        except DamagedFile as damage:
            set_aside(damage.path, damage)
            return False
        if made is not None and (made["id"], made["fingerprint"]) != (row_id, fingerprint):
            log.warning("%s holds the model of row %s (fingerprint %s), not of row %s: it is fitted again", path,
                        made["id"], made["fingerprint"], row_id)
            return False
        return True

    def keep_model(self, row_id: str, fingerprint: str, model, vocab) -> None:
        """An n-gram row's fitted model, kept as a binary model file of float64 values (baselines.binary), so
        that `lmbench.load(work, row=ID)` reads it without the corpus files: the figures it gives are the row's."""
        from baselines.binary import write_binary
        write_checked(self.model_path(row_id, fingerprint), lambda target: write_binary(
            model, vocab, target, "float64", row={"id": row_id, "fingerprint": fingerprint}))

    def keep_vocabulary(self, vocab) -> None:
        """The corpus's vocabulary, what a network row is read over without its corpus files."""
        write_checked(self.vocabulary_path, vocab.save)


def made_for(row_id: str, fingerprint: str, arrays: dict, corpus) -> str | None:
    """What is wrong with saved log-probabilities `arrays` read as row `row_id`'s of `fingerprint`: those of
    another row or of another fingerprint of it (the row and fingerprint they record, `mixing.saved.save`), or
    of another corpus (its stream fingerprint); None where they are the row's (a file written before files
    recorded their row: its stream alone checked)."""
    from mixing import saved
    made = arrays.get("row"), arrays.get("row_fingerprint")
    if made[0] is not None and made != (row_id, fingerprint):
        return f"the log-probabilities of row {made[0]} (fingerprint {made[1]}), not of row {row_id}'s " \
               f"(fingerprint {fingerprint})"
    if "stream" in arrays and saved.fingerprints(corpus) != {k: arrays[k] for k in saved.FINGERPRINTS}:
        return f"the log-probabilities of another corpus (stream {arrays['stream']}), not of this one's"
    return None


NGRAM_RECORD = ("method", "n", "classes", "min_ngram_count", "cluster_passes")  # refits an n-gram row (NGramOptions)


def checked_record(path: Path) -> dict:
    """A work folder's rows/ID.json as `lmbench.load` reads it: an object with the id, kind and fingerprint
    that every row's record holds, a mixture's parts; ValueError naming what is missing or of the wrong type (read_checked
    makes it one line)."""
    record = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(record, dict):
        raise ValueError(f"it holds a JSON {type(record).__name__}, not a row's record (an object)")
    for key in ("id", "kind", "fingerprint"):
        if key not in record:
            raise ValueError(f"it has no {key}")
        if not isinstance(record[key], str):
            raise ValueError(f"its {key} is {record[key]!r:.40}, not a string")
    if record["kind"] not in ("ngram", "network", "mix"):
        raise ValueError(f"its kind {record['kind']!r:.40} is none of a row's (ngram, network, mix)")
    if path.name.endswith(".json") and record["id"] != path.name[:-len(".json")]:  # (another row's, copied here)
        raise ValueError(f"it is the record of row {record['id']!r:.40}, not of row {path.name[:-len('.json')]!r}")
    missing = [key for key in NGRAM_RECORD if key not in record] if record["kind"] == "ngram" else []
    if missing:
        raise ValueError(f"it is an n-gram row's without its {', '.join(missing)}")
    parts = record.get("parts")
    if record["kind"] == "mix" and not (isinstance(parts, list) and parts and all(isinstance(p, str) for p in parts)):
        raise ValueError(f"it is a mixture whose parts are {parts!r:.60}, not a list of row ids")
    return record
