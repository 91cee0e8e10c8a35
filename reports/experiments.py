"""The rows of the paper's Table 1 (Brown) and Table 2 (AP News), and our extra rows.

A row is one experiment of one kind (`reports.running.row_runner.RUNNERS` runs each kind): an n-gram model
("ngram"), a network ("network") or a mixture of rows already run ("mix"). A network row names its
family ("nplm": equation 1; "energy": section 5.1's energy network; the families of neural/) and
carries the options of that family's config which the row sets (shape, objective, budget); the run's
settings fill in the rest (`Reproduction.training_config`). `paper_model` names the row in
`paper_tables.csv` (the published numbers) where the paper has one. Claims, figures and the summary
select rows by `paper_model`, `family` and `ours`, never by id: a row of another family never enters
the paper's claims.

Optional row groups are named (`EXTRA_ROWS`, `lmbench reproduce brown --extra energy,lstm,gru,transformer`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import partial

from baselines.methods import METHODS, SRILM_CUTOFF, TABLE_CLUSTER_PASSES
from neural.config import RunConfig
from neural.families import FAMILIES
from neural.ours import ours_options

PAPER_FAMILY = "nplm"  # the network of equation 1, the one the paper's claims are about
KINDS = ("ngram", "network", "mix")  # the kinds of rows, each run by its entry of reports.running.row_runner.RUNNERS


@dataclass(frozen=True)
class Row:
    id: str                      # file-name-safe key, e.g. "kn-backoff-5", "mlp1", "mlp2"
    kind: str                    # how it runs: "ngram" | "network" | "mix" (reports.running.row_runner.RUNNERS)
    model: str                   # the label in the tables
    paper_model: str | None = None  # label in paper_tables.csv; None for our extra rows
    # ngram
    method: str | None = None    # the lmbench ngram --method
    n: int | None = None
    classes: int | None = None
    min_ngram_count: int = 1     # leave out n-grams of order >= 3 seen fewer times (SRILM: 2)
    cluster_passes: int = 20     # class: passes of the exchange algorithm
    # network
    family: str | None = None    # the network family: "nplm" (equation 1), "energy" (section 5.1), ...
    config: dict = field(default_factory=dict, hash=False)  # the family's config options this row sets
    ours: bool = False           # a network of our own design (not a shape of the paper's tables)
    word_vectors: bool = False   # keep its word features C for the report's figure and neighbours
    # mix
    mix: str | None = None       # how it is mixed: "0.5/0.5", "EM", "EM per bucket"
    parts: tuple[str, ...] = ()  # the ids of the rows mixed

    def to_dict(self) -> dict:
        return asdict(self)


def network(row_id: str, label: str, shape: tuple[int, int, int, bool], family: str = PAPER_FAMILY, *,
            paper_model: str | None = None, ours: bool = False, word_vectors: bool = False, **options) -> Row:
    """A network row: `shape` (n, h, m, direct), `options` the family's other config options."""
    n, h, m, direct = shape
    config = dict(n=n, h=h, m=m, direct=direct, **{k: v for k, v in options.items() if v is not None})
    return Row(row_id, "network", label, paper_model=paper_model, family=family, config=config, ours=ours,
               word_vectors=word_vectors)


def mixture(row_id: str, label: str, how: str, parts: tuple[str, ...], paper_model: str | None = None) -> Row:
    return Row(row_id, "mix", label, paper_model=paper_model, mix=how, parts=parts)


INFINI_GRAM = "infini-gram-kn-5"  # the id of the ∞-gram + KN 5 row
WITH_COUNTS = "EM per effective n"  # a network, KN 5 and P∞ mixed (mixing.saved.mix_with_counts)


def kn5_mixtures(rows: list[Row], label=lambda row: f"{row.model} + KN interpolated 5") -> list[Row]:
    """Every network row mixed with interpolated KN 5 by EM weights fitted on valid (issue 18: the
    strongest n-gram model as the partner, beside the paper's deleted-interpolation trigram), and beside
    it the same network mixed with KN 5 and the ∞-gram (issue 37): three parts, the network, KN 5 and
    P∞ (the ∞-gram alone, read from the ∞-gram + KN 5 row's saved file), one weight vector per
    effective-n bucket fitted by EM on valid. Its weights can reproduce both the network + KN 5 mixture
    (the same weights in every bucket, none on P∞) and the ∞-gram + KN 5 row (none on the network),
    so on valid it is at most either (up to the shrinking of small buckets, mixing.saved.mix_with_counts)."""
    mixed = []
    for row in rows:
        if row.kind == "network":
            mixed += [mixture(f"{row.id}-kn-interp-5-em", label(row), "EM", (row.id, "kn-interp-5")),
                      mixture(f"{row.id}-kn-interp-5-infini-gram", f"{label(row)} + ∞-gram", WITH_COUNTS,
                              (row.id, "kn-interp-5", INFINI_GRAM))]
    return mixed


def method_rows(name: str, vocab_size: int) -> list[Row]:
    """The rows of n-gram method `name` in a user's comparison over `vocab_size` words, as its registration
    says (`baselines.methods.Method.rows`: its compared orders, label, ids and options)."""
    return [Row(row.pop("id"), "ngram", row.pop("label"), method=name, **row)
            for row in METHODS[name].rows(vocab_size)]


def infini_gram_row() -> Row:
    """The ∞-gram (issue 37, baselines/infinigram.py) interpolated with interpolated KN 5 by EM weights
    per effective n, fitted on valid: a row of every table (cheap: a suffix array and KN 5)."""
    row, = method_rows("infini-gram", 0)
    assert row.id == INFINI_GRAM
    return row


# Our rows for the time-to-perplexity figure: MLP1 trained with each objective besides the default. The
# full softmax gets one epoch only (about 3.5 minutes on 2 cores, where a sampled epoch takes seconds):
# its point shows where it stands at equal time, not where it converges.
OBJECTIVE_ROWS = {objective: 1 if objective == "softmax" else None  # objective: epochs (None: the schedule's)
                  for objective in ("importance", "nce", "class", "tree", "softmax") if objective != RunConfig().objective}


def _kn_rows(orders, paper_label):
    """The paper's back-off KN rows, estimated as SRILM does by default (its count cutoffs)."""
    return [Row(f"kn-backoff-{n}", "ngram", "Kneser-Ney back-off", n=n, method="kneser-ney-backoff",
                min_ngram_count=SRILM_CUTOFF, paper_model=paper_label) for n in orders]


# The networks of Table 1: name -> (n, h, m, direct).
QUICK_CLASSES = {150: 20, 200: 30, 500: 50, 1000: 80, 2000: 120}  # a quick run's classes for each C: shrunk with its |V|
TABLE1_NETWORKS = {"MLP1": (5, 50, 60, True), "MLP3": (5, 0, 60, True), "MLP5": (5, 50, 30, True),
                   "MLP7": (3, 50, 30, True), "MLP9": (5, 100, 30, False)}


def brown_rows(corpus=None) -> list[Row]:
    """Table 1's rows, in the paper's order, then ours (NPLM (ours) with the corpus: its shape follows
    the training split)."""
    rows = []
    for name, shape in TABLE1_NETWORKS.items():
        number = int(name[3:])
        rows.append(network(name.lower(), name, shape, paper_model=name, word_vectors=name == "MLP1"))
        rows.append(mixture(f"mlp{number + 1}", f"MLP{number + 1}", "0.5/0.5", (name.lower(), "del-int"),
                            paper_model=f"MLP{number + 1}"))
    rows.append(Row("del-int", "ngram", "Del. Int.", n=3, method="deleted-interpolation",
                    paper_model="Del. Int."))
    rows += _kn_rows((3, 4, 5), "Kneser-Ney back-off")
    rows += [Row(f"class-{n}-{c}", "ngram", "class-based back-off", n=n, classes=c, method="class",
                 min_ngram_count=SRILM_CUTOFF, cluster_passes=TABLE_CLUSTER_PASSES, paper_model="class-based back-off")
             for n, c in [(3, 150), (3, 200), (3, 500), (3, 1000), (3, 2000), (4, 500), (5, 500)]]
    rows += [Row(f"kn-interp-{n}", "ngram", "Kneser-Ney interpolated", n=n, method="kneser-ney") for n in (3, 4, 5)]
    rows.append(infini_gram_row())
    rows += [Row(f"kn-backoff-nocut-{n}", "ngram", "Kneser-Ney back-off, no cutoffs", n=n,
                 method="kneser-ney-backoff") for n in (3, 5)]
    rows += [Row(f"katz-{n}", "ngram", "Katz back-off", n=n, method="katz") for n in (3, 4, 5)]
    rows += [network(f"mlp1-{objective}", f"MLP1, {objective} objective", TABLE1_NETWORKS["MLP1"],
                     objective=objective, epochs=epochs) for objective, epochs in OBJECTIVE_ROWS.items()]
    rows += [mixture("mlp1-del-int-em", "MLP1 + Del. Int.", "EM", ("mlp1", "del-int")),
             mixture("mlp1-del-int-bucketed", "MLP1 + Del. Int.", "EM per bucket", ("mlp1", "del-int"))]
    return rows + kn5_mixtures(rows) + (ours_rows(corpus) if corpus is not None else [])


# Section 5.1's energy network in MLP1's shape, trained with MLP1's objective (the default, importance
# sampling with k = 400, the paper's choice for it) and budget: the 12 epochs MLP1 runs in Table 1. Its
# exact normalisation costs |V| h tanh per token (about 770 tokens/s on 2 cores), so each epoch is
# validated on the first 20,000 valid tokens (26 s instead of 4.3 minutes); its figures score all of valid.
ENERGY_EPOCHS = 12
ENERGY_VALID_TOKENS = 20_000


def energy_rows() -> list[Row]:
    """Our section 5.1 rows of Table 1 (`lmbench reproduce brown --extra energy`): the energy network
    alone, mixed 0.5/0.5 with the trigram (as MLP1 is in MLP2) and by EM with interpolated KN 5."""
    energy = network("energy1", "Energy network (MLP1's shape)", TABLE1_NETWORKS["MLP1"], "energy",
                     epochs=ENERGY_EPOCHS, valid_tokens=ENERGY_VALID_TOKENS)
    return [energy, mixture("energy1-del-int", "Energy network + Del. Int.", "0.5/0.5", ("energy1", "del-int")),
            *kn5_mixtures([energy], lambda row: "Energy network + KN interpolated 5")]


# Our networks beyond 2003: the families registered with `beyond_2003` (`neural.families`), each in its own
# shape and recipe, the same on every corpus; of either context (the LSTM, the GRU, the Transformer read the
# stream; a window family registered so, a log-bilinear model say, is one too). The only way a family other
# than the NPLM and the energy network becomes a row.
NETWORKS_BEYOND_2003 = {name: f"{entry.label} (ours)" for name, entry in FAMILIES.items()
                        if entry.beyond_2003}  # family (and row id): label


def rows_beyond_2003(families=tuple(NETWORKS_BEYOND_2003)) -> list[Row]:
    """Rows of our networks beyond 2003, each alone and mixed by EM with interpolated KN 5."""
    rows = [Row(name, "network", NETWORKS_BEYOND_2003[name], family=name, ours=True) for name in families]
    return rows + kn5_mixtures(rows, lambda row: f"{row.model} + KN interpolated 5")


# The optional row groups of each table: `lmbench reproduce CORPUS --extra NAME[,NAME...]` adds them
# after the table's rows (the rows they mix with must be in the table).
GROUPS_BEYOND_2003 = {name: partial(rows_beyond_2003, (name,))  # --extra lstm,transformer,...
                      for name in NETWORKS_BEYOND_2003}
EXTRA_ROWS = {"brown": {"energy": energy_rows, **GROUPS_BEYOND_2003}, "ap": GROUPS_BEYOND_2003}

AP_NETWORK = (6, 60, 100, True)  # Table 2's network: n, h, m, direct


def ap_rows(corpus=None) -> list[Row]:
    """Table 2's rows, then ours (NPLM (ours) with the corpus, as in `brown_rows`)."""
    rows = [network("mlp-ap", "MLP", AP_NETWORK, word_vectors=True),
            mixture("mlp10", "MLP10", "0.5/0.5", ("mlp-ap", "del-int"), paper_model="MLP10"),
            Row("del-int", "ngram", "Del. Int.", n=3, method="deleted-interpolation", paper_model="Del. Int.")]
    rows += _kn_rows((3, 4, 5), "Back-off KN")
    rows += [Row(f"kn-interp-{n}", "ngram", "Kneser-Ney interpolated", n=n, method="kneser-ney") for n in (3, 4, 5)]
    rows.append(infini_gram_row())
    rows += [mixture("mlp-ap-del-int-em", "MLP + Del. Int.", "EM", ("mlp-ap", "del-int")),
             mixture("mlp-ap-del-int-bucketed", "MLP + Del. Int.", "EM per bucket", ("mlp-ap", "del-int"))]
    return rows + kn5_mixtures(rows) + (ours_rows(corpus) if corpus is not None else [])


OURS = "ours"  # the id of NPLM (ours) among the networks a user's comparison can choose
DEFAULT = "default"  # among the networks `--networks` names: those run when it names none (default,gru: and gru)


def every_default(networks: tuple[str, ...] | None) -> bool:
    """Whether the networks named (None: none named) take in every network that runs by default."""
    return networks is None or DEFAULT in networks


def ours_rows(corpus) -> list[Row]:
    """NPLM (ours) (`neural.ours`: equation 1 with a wider context and dropout, its shape a rule of the
    training split's length), alone and mixed by EM with interpolated KN 5: a row of every report."""
    options = ours_options(corpus)
    shape = tuple(options.pop(key) for key in ("n", "h", "m", "direct"))
    ours = network(OURS_ROW, "NPLM (ours)", shape, ours=True, **options)
    return [ours, *kn5_mixtures([ours], lambda row: "NPLM (ours) + KN interpolated 5")]


OURS_ROW = "nplm-ours"
OURS_IDS = (OURS_ROW, *(row.id for row in kn5_mixtures([Row(OURS_ROW, "network", "NPLM (ours)")])))  # in every table
NETWORK_CHOICES = (*(name.lower() for name in TABLE1_NETWORKS), *NETWORKS_BEYOND_2003)  # a user's `--networks`


def text_rows(vocab_size: int, networks: tuple[str, ...] | None = None, only: str | None = None) -> list[Row]:
    """The comparison on a user's corpus (`lmbench reproduce text`): the rows of every registered n-gram
    method at its compared orders (`baselines.methods`, `method_rows`; a class-based row's classes scaled to
    |V|), the networks of Table 1, each mixed with the deleted-interpolation trigram three ways and with
    interpolated KN 5 by EM, then our networks beyond 2003
    (`rows_beyond_2003`; NPLM (ours) is added by the pipeline, `ours_rows`, its shape following the corpus).
    `networks`: a subset of the network ids (e.g. ("mlp1", "lstm"); DEFAULT among them: those of a run that
    names none, and the others named); `only`: "ngram" (no network) or "nplm" (the networks, their mixtures
    and the n-gram models they mix with: Del. Int., KN 5, ∞-gram)."""
    ngrams = [row for name in METHODS for row in method_rows(name, vocab_size)]
    named = networks or ()
    chosen = [name for name in TABLE1_NETWORKS if every_default(networks) or name.lower() in named]
    neural = []
    for name in chosen:
        label = f"NPLM, {name} shape"
        neural.append(network(name.lower(), label, TABLE1_NETWORKS[name], word_vectors=name == "MLP1"))
        neural += [mixture(f"{name.lower()}-del-int{suffix}", f"{label} + Del. Int.", how, (name.lower(), "del-int"))
                   for suffix, how in (("", "0.5/0.5"), ("-em", "EM"), ("-bucketed", "EM per bucket"))]
    neural += kn5_mixtures(neural)
    neural += rows_beyond_2003(tuple(name for name in NETWORKS_BEYOND_2003
                                if (FAMILIES[name].compared and every_default(networks)) or name in named))
    if only == "ngram":
        return ngrams
    if only == "nplm":
        return [row for row in ngrams if row.id in ("del-int", "kn-interp-5", INFINI_GRAM)] + neural
    return ngrams + neural


ROWS = {"brown": brown_rows, "ap": ap_rows}
