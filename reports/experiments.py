"""The rows of the paper's Table 1 (Brown) and Table 2 (AP News), and our extra rows.

A row is one experiment: an n-gram model, an NPLM, or a mixture of rows already run. `paper_model`
names the row in `paper_tables.csv` (the published numbers) where the paper has one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from neural.config import NPLMConfig


@dataclass(frozen=True)
class Row:
    id: str                      # file-name-safe key, e.g. "kn-backoff-5", "mlp1", "mlp2"
    kind: str                    # "ngram" | "nplm" | "mix"
    model: str                   # the label in the tables
    n: int | None = None
    classes: int | None = None
    h: int | None = None
    m: int | None = None
    direct: bool | None = None
    mix: str | None = None       # None, or how it is mixed: "0.5/0.5", "EM", "EM per bucket"
    method: str | None = None    # ngram: the lmbench ngram --method
    min_ngram_count: int = 1     # ngram: leave out n-grams of order >= 3 seen fewer times (SRILM: 2)
    cluster_passes: int = 20     # class: passes of the exchange algorithm
    epochs: int | None = None    # nplm: the most epochs (None: the run's default)
    objective: str | None = None  # nplm: the training objective (None: the default of neural/config.py)
    network: str | None = None   # nplm: "energy" for section 5.1's energy network (None: equation 1's)
    valid_tokens: int | None = None  # nplm: validate each epoch on this many valid tokens (None: all)
    parts: tuple[str, ...] = ()  # mix: the ids of the rows mixed
    paper_model: str | None = None  # label in paper_tables.csv; None for our extra rows
    extra: dict = field(default_factory=dict, hash=False, compare=False)

    def to_dict(self) -> dict:
        return asdict(self)


# Our rows for the time-to-perplexity figure: MLP1 trained with each objective besides the default. The
# full softmax gets one epoch only (about 3.5 minutes on 2 cores, where a sampled epoch takes seconds):
# its point shows where it stands at equal time, not where it converges.
OBJECTIVE_ROWS = {objective: 1 if objective == "softmax" else None  # objective: epochs (None: the schedule's)
                  for objective in ("importance", "nce", "class", "softmax") if objective != NPLMConfig().objective}
CLUSTER_PASSES = 10  # exchange passes for the table's clusterings (the objective has all but settled)
SRILM_CUTOFF = 2  # SRILM's ngram-count keeps trigrams and longer seen at least twice (-gt3min 2 ...)


def _kn_rows(orders, paper_label):
    """The paper's back-off KN rows, estimated as SRILM does by default (its count cutoffs)."""
    return [Row(f"kn-backoff-{n}", "ngram", "Kneser-Ney back-off", n=n, method="kneser-ney-backoff",
                min_ngram_count=SRILM_CUTOFF, paper_model=paper_label) for n in orders]


# The networks of Table 1: name -> (n, h, m, direct).
TABLE1_NETWORKS = {"MLP1": (5, 50, 60, True), "MLP3": (5, 0, 60, True), "MLP5": (5, 50, 30, True),
                   "MLP7": (3, 50, 30, True), "MLP9": (5, 100, 30, False)}


def brown_rows() -> list[Row]:
    """Table 1's rows, in the paper's order, then ours."""
    rows = []
    for name, (n, h, m, direct) in TABLE1_NETWORKS.items():
        number = int(name[3:])
        rows.append(Row(name.lower(), "nplm", name, n=n, h=h, m=m, direct=direct, paper_model=name))
        rows.append(Row(f"mlp{number + 1}", "mix", f"MLP{number + 1}", n=n, h=h, m=m, direct=direct,
                        mix="0.5/0.5", parts=(name.lower(), "del-int"), paper_model=f"MLP{number + 1}"))
    rows.append(Row("del-int", "ngram", "Del. Int.", n=3, method="deleted-interpolation",
                    paper_model="Del. Int."))
    rows += _kn_rows((3, 4, 5), "Kneser-Ney back-off")
    rows += [Row(f"class-{n}-{c}", "ngram", "class-based back-off", n=n, classes=c, method="class",
                 min_ngram_count=SRILM_CUTOFF, cluster_passes=CLUSTER_PASSES, paper_model="class-based back-off")
             for n, c in [(3, 150), (3, 200), (3, 500), (3, 1000), (3, 2000), (4, 500), (5, 500)]]
    rows += [Row(f"kn-interp-{n}", "ngram", "Kneser-Ney interpolated", n=n, method="kneser-ney") for n in (3, 4, 5)]
    rows += [Row(f"kn-backoff-nocut-{n}", "ngram", "Kneser-Ney back-off, no cutoffs", n=n,
                 method="kneser-ney-backoff") for n in (3, 5)]
    rows += [Row(f"katz-{n}", "ngram", "Katz back-off", n=n, method="katz") for n in (3, 4, 5)]
    rows += [Row(f"mlp1-{objective}", "nplm", f"MLP1, {objective} objective", n=5, h=50, m=60, direct=True,
                 objective=objective, epochs=epochs) for objective, epochs in OBJECTIVE_ROWS.items()]
    rows += [Row("mlp1-del-int-em", "mix", "MLP1 + Del. Int.", n=5, h=50, m=60, direct=True, mix="EM",
                 parts=("mlp1", "del-int")),
             Row("mlp1-del-int-bucketed", "mix", "MLP1 + Del. Int.", n=5, h=50, m=60, direct=True,
                 mix="EM per bucket", parts=("mlp1", "del-int"))]
    return rows


# Section 5.1's energy network in MLP1's shape, trained with MLP1's objective (the default, importance
# sampling with k = 400, the paper's choice for it) and budget: the 12 epochs MLP1 runs in Table 1. Its
# exact normalisation costs |V| h tanh per token (about 770 tokens/s on 2 cores), so each epoch is
# validated on the first 20,000 valid tokens (26 s instead of 4.3 minutes); its figures score all of valid.
ENERGY_EPOCHS = 12
ENERGY_VALID_TOKENS = 20_000


def energy_rows() -> list[Row]:
    """Our section 5.1 rows of Table 1 (`lmbench reproduce brown --energy`): the energy network alone and
    mixed 0.5/0.5 with the trigram, as MLP1 is in MLP2."""
    shape = dict(n=5, h=50, m=60, direct=True)
    return [Row("energy1", "nplm", "Energy network (MLP1's shape)", **shape, network="energy",
                epochs=ENERGY_EPOCHS, valid_tokens=ENERGY_VALID_TOKENS),
            Row("energy1-del-int", "mix", "Energy network + Del. Int.", **shape, mix="0.5/0.5",
                parts=("energy1", "del-int"))]


def ap_rows() -> list[Row]:
    """Table 2's rows, then ours."""
    rows = [Row("mlp-ap", "nplm", "MLP", n=6, h=60, m=100, direct=True),
            Row("mlp10", "mix", "MLP10", n=6, h=60, m=100, direct=True, mix="0.5/0.5",
                parts=("mlp-ap", "del-int"), paper_model="MLP10"),
            Row("del-int", "ngram", "Del. Int.", n=3, method="deleted-interpolation", paper_model="Del. Int.")]
    rows += _kn_rows((3, 4, 5), "Back-off KN")
    rows += [Row(f"kn-interp-{n}", "ngram", "Kneser-Ney interpolated", n=n, method="kneser-ney") for n in (3, 4, 5)]
    rows += [Row("mlp-ap-del-int-em", "mix", "MLP + Del. Int.", n=6, h=60, m=100, direct=True, mix="EM",
                 parts=("mlp-ap", "del-int")),
             Row("mlp-ap-del-int-bucketed", "mix", "MLP + Del. Int.", n=6, h=60, m=100, direct=True,
                 mix="EM per bucket", parts=("mlp-ap", "del-int")),
             Row("mlp-ap-kn-interp-5-em", "mix", "MLP + KN interpolated 5", n=6, h=60, m=100, direct=True,
                 mix="EM", parts=("mlp-ap", "kn-interp-5"))]
    return rows


def class_counts(vocab_size: int) -> list[int]:
    """Class counts for the class-based trigrams of a user's corpus: about 1%, 3% and 10% of |V| (on
    Brown's 16k words: 160, 480, 1600, near the paper's 150, 500, 2000)."""
    return sorted({max(2, round(vocab_size * share)) for share in (0.01, 0.03, 0.1)})


def text_rows(vocab_size: int, networks: tuple[str, ...] | None = None, only: str | None = None) -> list[Row]:
    """The comparison on a user's corpus (`lmbench reproduce text`): the n-gram families at orders 3 to
    5, class-based trigrams scaled to |V|, the networks of Table 1 (`networks`: a subset of their ids,
    e.g. ("mlp1", "mlp9")), each mixed with the deleted-interpolation trigram three ways.
    `only`: "ngram" (no network) or "nplm" (the networks, their mixtures and the trigram they mix with)."""
    trigram = Row("del-int", "ngram", "Del. Int.", n=3, method="deleted-interpolation")
    ngrams = [trigram] + _kn_rows((3, 4, 5), None)
    ngrams += [Row(f"kn-interp-{n}", "ngram", "Kneser-Ney interpolated", n=n, method="kneser-ney") for n in (3, 4, 5)]
    ngrams += [Row("katz-3", "ngram", "Katz back-off", n=3, method="katz")]
    ngrams += [Row(f"class-3-{c}", "ngram", "class-based back-off", n=3, classes=c, method="class",
                   min_ngram_count=SRILM_CUTOFF, cluster_passes=CLUSTER_PASSES) for c in class_counts(vocab_size)]
    chosen = [name for name in TABLE1_NETWORKS if networks is None or name.lower() in networks]
    neural = []
    for name in chosen:
        n, h, m, direct = TABLE1_NETWORKS[name]
        shape = dict(n=n, h=h, m=m, direct=direct)
        label = f"NPLM, {name} shape"
        neural.append(Row(name.lower(), "nplm", label, **shape))
        neural += [Row(f"{name.lower()}-del-int{suffix}", "mix", f"{label} + Del. Int.", mix=mix,
                       parts=(name.lower(), "del-int"), **shape)
                   for suffix, mix in (("", "0.5/0.5"), ("-em", "EM"), ("-bucketed", "EM per bucket"))]
    if only == "ngram":
        return ngrams
    if only == "nplm":
        return [trigram] + neural
    return ngrams + neural


ROWS = {"brown": brown_rows, "ap": ap_rows}
