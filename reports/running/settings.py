"""What a reproduction runs on and with: its settings (part of every row's fingerprint), a user's corpus
(`lmbench reproduce text`), the corpus they load, and where its work and report go by default."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from corpora.corpus import Corpus, slice_corpus


@dataclass
class Settings:
    """What a reproduction run does besides the rows themselves; part of every row's fingerprint."""
    corpus: str = "brown"
    quick: bool = False                # a small slice of the corpus, for a run of a few minutes
    seed: int = 0
    nplm: dict = field(default_factory=dict)   # options of neural.training.trainer.RunConfig for every network
    slice: dict | None = None          # quick: tokens per split and min count of the sliced vocabulary


USER_REPORTS = Path("runs") / "reports"  # a run's report by default, ignored by git (the committed ones: results/)
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


def load_corpus(settings: Settings, text: TextCorpus | None) -> Corpus:
    """The corpus a run of `settings` runs on: the named one, or the user's `text`; a quick run's slice of it."""
    if text is not None and text.corpus_file is not None:
        from corpora.text import load_text_file
        corpus = load_text_file(text.corpus_file, text.corpus_split, min_count=text.min_count,
                                max_vocab=text.vocab_size)
    elif text is not None:
        from corpora.text import load_text
        corpus = load_text(text.train, text.valid, text.test, min_count=text.min_count, max_vocab=text.vocab_size)
    else:
        from corpora.named import load_named
        corpus = load_named(settings.corpus)
    if settings.quick:
        s = settings.slice
        cut = corpus.info.get("cut")  # one file's lines cut into the splits (corpora.text.load_text_file)
        corpus = slice_corpus(corpus, s["train"], s["valid"], s["test"], min_count=s["min_count"])
        if cut:
            corpus.info["cut"] = cut
    return corpus


def corpus_options(settings: Settings, text: TextCorpus | None) -> dict:
    """The options naming the corpus `load_corpus` loads, as `corpora.record.write_record` records them in
    the work folder (corpus.json, with a quick run's slice): how `reports.api.load` finds a row's
    corpus and vocabulary again."""
    if text is None:
        options = {"corpus": settings.corpus}
        if settings.corpus == "ap" and os.environ.get("AP_DIR"):
            options["ap_dir"] = Path(os.environ["AP_DIR"])
    elif text.corpus_file is not None:
        options = {"corpus": "text", "corpus_file": text.corpus_file, "corpus_split": text.corpus_split}
    else:
        options = {"corpus": "text", "train": text.train, "valid": text.valid, "test": text.test}
    if text is not None:
        options.update({k: v for k, v in (("min_count", text.min_count), ("vocab_size", text.vocab_size))
                        if v is not None})
    return {**options, **({"slice": settings.slice} if settings.quick else {})}


def report_name(corpus: str, quick: bool, name: str | None = None) -> str:
    """The folder name of a run's report and work: the corpus (a user's: its --name), `-quick` when quick."""
    name = name or corpus
    return f"{name}-quick" if quick else name
