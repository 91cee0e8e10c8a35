"""Saved per-token log-probabilities, the input of mixing, and the mixture fitted on valid, applied to test.

A file (.npz) holds `valid` and `test`: the natural-log probability of every token of the split; a
deleted-interpolation file also holds `buckets_valid` and `buckets_test`, the frequency buckets of
the contexts, for context-conditional weights; an infini-gram file holds `effective_n_valid` and
`effective_n_test`, the effective n of every token, as buckets their weight buckets (n = 1 .. 15,
16 and more), and `p_inf_valid` and `p_inf_test`, the log-probability of the ∞-gram alone (log P∞,
-inf where the continuation was never seen after the matched suffix), a part of `mix_with_counts`.
It also holds the fingerprints of what it scores:
`vocabulary` (the word list's, Vocabulary.fingerprint) and `stream` (a hash of the vocabulary and
the token ids of valid and test), so that `mix_saved` refuses files that score different streams,
however equal their lengths. A work folder's row file (reports.running.pipeline) also holds `row` and
`row_fingerprint`, the id and fingerprint of the row it was written for, so that a file copied over another
row's is not read as that row's (`reports.work_folder.made_for`).

Reading checks the file is what it says: an .npz archive (not a text file named .npz, nor Python
objects numpy would only read with allow_pickle), one finite log-probability <= 0 per token (and
where there are, one bucket from 0 to MAX_BUCKETS - 1, one effective n >= 1 and one log P∞ <= 0 or -inf
per token). A file holding one fingerprint without the other is damaged; one written before the
fingerprints is read with one warning line (it cannot be checked against the
others; scoring the model again writes a checked one).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np

from lmbench.errors import LMBenchError
from lmbench.files import atomic_write, read_checked, write_checked
from lmbench.model import LanguageModel, split_logprobs
from lmbench.interpolation import fit_weights, mix_logprobs, shrunk

log = logging.getLogger(__name__)

FINGERPRINTS = ("vocabulary", "stream")
ROW_MARKS = ("row", "row_fingerprint")  # the row a work folder's file was written for (`save`'s row)
ZIP_MAGIC = b"PK\x03\x04"
ABOVE_ZERO = 1e-6  # a log-probability above this is no rounding of log 1


def scored_splits(model: LanguageModel, corpus, splits=("valid", "test")) -> dict[str, np.ndarray]:
    """The model's log-probabilities of each split of `corpus`, and its context buckets when it has them."""
    arrays = {split: split_logprobs(model, corpus, split) for split in splits}
    if hasattr(model, "split_infinigram"):
        for split in splits:
            arrays[f"effective_n_{split}"], arrays[f"p_inf_{split}"] = model.split_infinigram(corpus, split)
            arrays[f"buckets_{split}"] = model.bucket_of(arrays[f"effective_n_{split}"])
    elif hasattr(model, "split_buckets"):
        arrays.update({f"buckets_{split}": model.split_buckets(corpus, split) for split in splits})
    return arrays


def fingerprints(corpus) -> dict[str, str]:
    """What a file of `corpus`'s valid and test log-probabilities records of them."""
    vocabulary = corpus.vocab.fingerprint()
    digest = hashlib.sha256(vocabulary.encode())
    for split in ("valid", "test"):
        digest.update(np.ascontiguousarray(corpus.split(split), dtype=np.int32).tobytes())
    return {"vocabulary": vocabulary, "stream": digest.hexdigest()[:16]}


def save(path: Path, arrays: dict[str, np.ndarray], corpus, *, checked: bool = False,
         row: tuple[str, str] | None = None) -> None:
    """Write the arrays, with the fingerprints of `corpus` (the one they score), as an .npz archive at
    `path`, whatever its suffix (np.savez given a file name would append .npz); `checked`: with a
    record of its content that `load` compares (a cache file); `row`: the (id, fingerprint) of the work
    folder's row they are (ROW_MARKS)."""
    marks = {**fingerprints(corpus), **(dict(zip(ROW_MARKS, row)) if row is not None else {})}

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            np.savez(out, **arrays, **{key: np.str_(value) for key, value in marks.items()})

    (write_checked if checked else atomic_write)(Path(path), write)


MAX_BUCKETS = 1024  # bucket numbers of a file: deleted interpolation's are 0 .. ceil(ln T) (under 30 for any corpus)


def _read(path: Path) -> dict:
    with open(path, "rb") as f:
        if f.read(4) != ZIP_MAGIC:
            raise ValueError("it is not an .npz archive of per-token log-probabilities")
    with np.load(path, allow_pickle=False) as data:
        missing = {"valid", "test"} - set(data.files)
        if missing:
            raise ValueError(f"it lacks the arrays {sorted(missing)} (per-token log-probabilities of valid and test)")
        try:
            arrays = {key: data[key] for key in data.files}  # reads every byte: a damaged member fails its CRC
        except ValueError as err:
            if "allow_pickle" in str(err):  # numpy's advice to trust the file: not ours to take
                raise ValueError("it holds Python objects, not arrays of numbers") from None
            raise
    for split in ("valid", "test"):
        values = arrays[split]
        if values.ndim != 1 or not np.issubdtype(values.dtype, np.floating):
            raise ValueError(f"its {split} array is not one log-probability per token")
        bad = np.flatnonzero(~np.isfinite(values) | (values > ABOVE_ZERO))
        if len(bad):
            raise ValueError(f"its {split} log-probability of token {bad[0]} is {values[bad[0]]}, where every "
                             "one is finite and <= 0")
        buckets = arrays.get(f"buckets_{split}")
        if buckets is not None and (buckets.shape != values.shape or not np.issubdtype(buckets.dtype, np.integer)
                                    or (len(buckets) and (buckets.min() < 0 or buckets.max() >= MAX_BUCKETS))):
            raise ValueError(f"its buckets_{split} are not one bucket number from 0 to {MAX_BUCKETS - 1} per token "
                             "(a mixture fits one weight vector a bucket)")
        effective = arrays.get(f"effective_n_{split}")
        if effective is not None and (effective.shape != values.shape or not np.issubdtype(effective.dtype, np.integer)
                                      or (len(effective) and effective.min() < 1)):
            raise ValueError(f"its effective_n_{split} are not one effective n >= 1 per token")
        sparse = arrays.get(f"p_inf_{split}")
        if sparse is not None and (sparse.shape != values.shape or not np.issubdtype(sparse.dtype, np.floating)
                                   or np.any(np.isnan(sparse) | (sparse > ABOVE_ZERO))):
            raise ValueError(f"its p_inf_{split} are not one log P∞ <= 0 per token (-inf: never seen)")
    kept = [key for key in FINGERPRINTS if key in arrays]
    if kept and len(kept) < len(FINGERPRINTS):
        raise ValueError(f"it records the {kept[0]} fingerprint without the "
                         f"{next(key for key in FINGERPRINTS if key not in kept)} one (every file written holds both)")
    if ("row" in arrays) != ("row_fingerprint" in arrays):
        raise ValueError("it records the row it was written for without its fingerprint, or the fingerprint without "
                         "the row (a work folder's file holds both)")
    for key in [*kept, *(mark for mark in ROW_MARKS if mark in arrays)]:
        if arrays[key].shape != () or arrays[key].dtype.kind != "U":
            raise ValueError(f"its {key} fingerprint is not one string")
        arrays[key] = str(arrays[key][()])
    return arrays


def load(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a file written by `save`; one that does not read back raises DamagedFile."""
    path = Path(path)
    if not path.is_file():
        raise LMBenchError(f"{path} does not exist: write it with `lmbench ngram ... --save-logprobs {path}`")
    arrays = read_checked(path, _read, what="saved log-probabilities",
                          fix=f"write the file again (`lmbench ngram ... --save-logprobs {path}`)")
    if "stream" not in arrays:
        log.warning("%s records no fingerprint of the stream it scores (written before they were): it is "
                    "mixed on trust; score the model again (--save-logprobs) to have it checked", path)
    return arrays


def check_same_stream(parts: list[dict], names: list[str]) -> None:
    """Refuse parts (of `load`) that score different vocabularies or token streams; a part without
    fingerprints (an older file) is compared by its lengths alone."""
    known = [(name, part) for name, part in zip(names, parts) if "stream" in part]
    for key, what in (("vocabulary", "vocabularies"), ("stream", "token streams")):
        for name, part in known[1:]:
            if part[key] != known[0][1][key]:
                raise LMBenchError(f"{known[0][0]} and {name} score different {what} ({key} fingerprints "
                                   f"{known[0][1][key]} and {part[key]}): score every model on the same corpus "
                                   "with the same corpus options, then mix")


def mix_saved(parts: list[dict[str, np.ndarray]], method: str, weights=None,
              buckets: dict[str, np.ndarray] | None = None, names: list[str] | None = None,
              buckets_name: str = "the buckets' file", *,
              shrink: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Mix saved parts (named `names` and `buckets_name` in errors): 'fixed' (given weights), 'em' (one
    weight vector fitted on valid) or 'bucketed' (one per context bucket of `buckets`, fitted on valid;
    `shrink`: each bucket's weights shrunk toward the one EM weight vector of all valid by one
    pseudo-token per part, lmbench.interpolation.shrunk). Returns the mixed log-probabilities of valid
    and test, and the weights ((K,), or (buckets, K) for 'bucketed')."""
    named = list(zip(names or [f"part {i + 1}" for i in range(len(parts))], parts))
    if buckets is not None:
        named.append((buckets_name, buckets))
    check_same_stream([part for _, part in named], [name for name, _ in named])
    if len({(len(p["valid"]), len(p["test"])) for p in parts}) != 1:
        raise LMBenchError("the files score splits of different lengths: score every model on the same corpus")
    valid = np.stack([p["valid"] for p in parts])  # (K, T_valid)
    test = np.stack([p["test"] for p in parts])    # (K, T_test)
    if method == "fixed":
        if weights is None or len(weights) != len(parts) or abs(sum(weights) - 1) > 1e-9:
            raise LMBenchError("fixed mixing needs one weight per model, summing to 1")
        weights = np.asarray(weights, dtype=np.float64)
    elif method == "em":
        weights = fit_weights(valid)[0]
    elif method == "bucketed":
        if buckets is None or "buckets_valid" not in buckets:
            raise LMBenchError("bucketed mixing needs the context buckets of a deleted-interpolation or "
                               "infini-gram model (its saved log-probabilities)")
        n_buckets = int(max(buckets["buckets_valid"].max(), buckets["buckets_test"].max())) + 1
        table = fit_weights(valid, buckets["buckets_valid"], n_buckets)  # (B, K)
        if shrink:
            table = shrunk(table, np.bincount(buckets["buckets_valid"], minlength=n_buckets), fit_weights(valid)[0])
        mixed = {"valid": mix_logprobs(valid, table[buckets["buckets_valid"]].T),
                 "test": mix_logprobs(test, table[buckets["buckets_test"]].T)}
        return mixed, table
    else:
        raise LMBenchError(f"unknown mixing method {method!r}: use fixed, em or bucketed")
    return {"valid": mix_logprobs(valid, weights), "test": mix_logprobs(test, weights)}, weights


def mix_with_counts(parts: list[dict[str, np.ndarray]], infinigram: dict[str, np.ndarray],
                    names: list[str] | None = None,
                    infinigram_name: str = "the infini-gram file") -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The parts (a network, interpolated KN 5) and P∞ of an infini-gram file mixed with one weight vector
    per effective-n bucket, fitted by EM on valid and shrunk toward the weights of all valid by one
    pseudo-token per part (P∞ is 0 for unseen continuations: a bucket whose few valid tokens it all
    predicted keeps weight on the others; a bucket of thousands of tokens keeps its own weights).
    Returns the mixed log-probabilities of valid and test and the weights (buckets, K + 1), P∞'s last."""
    if not {"p_inf_valid", "effective_n_valid"} & set(infinigram):  # (an infini-gram file, old or new, holds one)
        raise LMBenchError(f"{infinigram_name} is not an infini-gram file (it holds no effective n per token: "
                           "another model's log-probabilities): give --with-counts the .npz of `lmbench ngram "
                           "--method infini-gram --save-logprobs`, or mix this file as a part")
    if "p_inf_valid" not in infinigram:
        raise LMBenchError("the infini-gram file holds no p_inf_valid / p_inf_test (log P∞), written before "
                           "files kept them: score the infini-gram again (`lmbench ngram --method infini-gram "
                           "--save-logprobs`, or delete its cached row)")
    sparse = {"valid": infinigram["p_inf_valid"], "test": infinigram["p_inf_test"],
              **{key: infinigram[key] for key in FINGERPRINTS if key in infinigram}}
    names = [*(names or [f"part {i + 1}" for i in range(len(parts))]), f"{infinigram_name} (P∞)"]
    return mix_saved([*parts, sparse], "bucketed", buckets=infinigram, names=names, buckets_name=infinigram_name,
                     shrink=True)
