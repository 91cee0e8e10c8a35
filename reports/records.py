"""The rows of results.json as the report reads them: files written before rows named their network
family brought up to today's fields (here, and nowhere else), and what a row is (its network, its
shape) for the tables, claims, figures and the cross-corpus summary.

Up to commit e438375 every row carried the NPLM's shape: kind "nplm" for a network, and `n`, `h`,
`m`, `direct`, `objective`, `network` ("energy" or None) and `valid_tokens` at its top level, a
mixture repeating the shape of its network. `upgrade_row` turns such a row into today's: kind
"network"; `family` (the old `network`, else the `model` of the run's training configuration, else
"nplm"); `config` (the run's training configuration where the row ran, else the row's own options);
the shape of a mixture is read from its network part, so the old copies are dropped. Numbers are
never touched but for one centre: a row run under several seeds written before commit issue45 gave
each perplexity as the seeds' arithmetic mean, while its blocks, interval and claims were their
geometric mean's (the perplexity of the seeds' mean log-probability); `upgrade_row` gives it the
geometric mean, from its seeds' own figures (`seeds`), as rows are written today (reports.running.seeds.over_seeds).

`grouped` then groups every row's bootstrap blocks as `lmbench.bootstrap.choose_grouping` chooses on
valid (consecutive documents together, so that the intervals cover their correlation), the same for
every row, and recomputes the rows' intervals: a file written before the grouping gets it on reading,
a file written since records it (`bootstrap.grouping`) and keeps its blocks as cut, so that anyone
can check the choice.

`check_results` refuses a file the report cannot read (no rows, no meta or corpus summary, a row
without an id, a perplexity that is not a finite number >= 1, such as NaN or "abc", a mixture of
unknown parts), naming the first row and field at fault, before any table is written. (A JSON Schema
of results.json can take its place once there is one: it raises ValueError with the same message.)
It also recomputes what the file states twice (`check_blocks`): a row's blocks of a split must hold the
split's tokens, and give back the row's perplexity of it (the seeds' geometric mean for a row of several
seeds, whose perplexity is their mean), to the rounding of the block sums: blocks altered by hand, which
would move every interval and verdict while the tables stay, are refused.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from lmbench import bootstrap
from lmbench.errors import LMBenchError
from lmbench.files import read_checked
from reports.running.budget import still_falling
from reports.experiments import OURS_IDS, PAPER_FAMILY, ROWS as PAPER_CORPORA, Row

LEGACY_FIELDS = ("h", "m", "direct", "objective", "network", "valid_tokens")
SHAPE = ("n", "h", "m", "direct")
ROW_DEFAULTS = {key: value for key, value in Row("", "", "").to_dict().items() if key not in ("id", "kind", "model")}


PERPLEXITIES = ("train_ppl", "valid_ppl", "test_ppl")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_results(results) -> None:
    """Raise ValueError naming the first thing in `results` (results.json as read) that the report
    cannot use: types and finiteness of what the tables, claims and figures read from every row."""
    if not isinstance(results, dict) or not isinstance(results.get("rows"), list) or not results["rows"]:
        raise ValueError("it holds no list of rows")
    if not isinstance(results.get("meta"), dict):
        raise ValueError("it has no meta (the run's commit, machine and time)")
    corpus = results.get("corpus_summary")
    if not (isinstance(corpus, dict) and isinstance(corpus.get("vocab_size"), int)
            and isinstance(corpus.get("tokens"), dict) and all(isinstance(n, int) for n in corpus["tokens"].values())):
        raise ValueError("its corpus_summary has no vocab_size and tokens per split")
    meta, trained = results["meta"], results["meta"].get("trained")
    for key, value in [*((key, meta.get(key)) for key in ("wall_seconds", "rows_seconds")),
                       ("trained.wall_seconds", trained.get("wall_seconds") if isinstance(trained, dict) else None)]:
        if value is not None and not (_number(value) and value >= 0):
            raise ValueError(f"its meta has {key} {value!r}, not a finite number >= 0 (the run's seconds)")
    ids = set()
    for number, row in enumerate(results["rows"], 1):
        if not isinstance(row, dict):
            raise ValueError(f"row {number} is a {type(row).__name__}, not an object")
        name = row.get("id")
        if not isinstance(name, str) or not name:
            raise ValueError(f"row {number} has no id")
        if name in ids:
            raise ValueError(f"row {number} repeats the id {name!r}")
        ids.add(name)
        if not isinstance(row.get("kind"), str):
            raise ValueError(f"row {name!r} has no kind")
        for key in PERPLEXITIES:
            value = row.get(key)
            if value is not None and not (_number(value) and value >= 1):
                raise ValueError(f"row {name!r} has {key} {value!r}: a perplexity is a finite number >= 1 "
                                 "(or null: not run)")
        for key in ("seconds", "train_seconds", "tokens_per_s"):
            value = row.get(key)
            if value is not None and not (_number(value) and value >= 0):
                raise ValueError(f"row {name!r} has {key} {value!r}, not a finite number >= 0")
        weights = row.get("weights")
        if weights is not None and not (isinstance(weights, list) and all(
                _number(w) or (isinstance(w, list) and all(_number(x) for x in w)) for w in weights)):
            raise ValueError(f"row {name!r} has weights {weights!r}, not a list of finite numbers")
    for row in results["rows"]:
        parts = row.get("parts") or []
        if not isinstance(parts, list) or any(part not in ids for part in parts):
            raise ValueError(f"row {row['id']!r} mixes {parts!r}, not rows of this file")
        check_blocks(row, corpus["tokens"])
    check_printed(results)


MAX_PPL_OVER_VOCABULARY = 1e6  # a finite perplexity above |V| times this (14 nats a token worse than guessing
                               # uniformly) is no model's result here: a diverged network's is Infinity


def check_printed(results: dict) -> None:
    """Raise ValueError naming the first field the report prints that is not what a run writes: the file
    against its schema (lmbench/schemas/results.schema.json: a vocabulary of -3, an `n` of "five", an
    unknown `method`, a version newer than this code reads); an n-gram row's order outside its method's;
    a finite perplexity beyond MAX_PPL_OVER_VOCABULARY times |V| (train_ppl 1e300); a row whose identity
    (DEFINED: its method, order, mixture, ...; an older row's as `upgrade_row` reads it) is not
    that of the table's row of its id, or (in a report of a paper's corpus, or named after one) no row of the
table of its `corpus` at all: its kind follows its rows (a `corpus` edited from text to brown, or from brown
to text, is refused); and, in a file whose rows keep their blocks, a row that ran
    without them, whose valid and test perplexities nothing could then check (`check_blocks` checks the
    others')."""
    from baselines.methods import METHODS
    from lmbench.schema import SCHEMA_VERSION, problems
    version = results.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise ValueError(f"it is of format version {version}, newer than the {SCHEMA_VERSION} this lmbench reads: "
                         "update lmbench")
    found = problems("results", results)
    if found:
        raise ValueError(f"it does not match its schema (lmbench/schemas/results.schema.json): {found[0]}")
    ceiling = MAX_PPL_OVER_VOCABULARY * results["corpus_summary"]["vocab_size"]
    kept = any(row.get("blocks") for row in results["rows"])
    stated = sorted(set(results.get("bootstrap") or {}) & {"blocks", "grouping"})
    if stated and not kept:
        raise ValueError(f"its bootstrap section states the {' and '.join(stated)} of blocks that no row keeps, so "
                         "nothing checks its rows' perplexities (their blocks were deleted?)")
    defined = table_rows(results)
    paper = results.get("corpus") in PAPER_CORPORA or results.get("name") in PAPER_CORPORA  # (a paper's table, or
    for row in results["rows"]:                                          # its report relabelled as a user's corpus)
        definition, today = defined.get(row["id"]), upgrade_row(row)
        if definition is None and row["id"] not in OURS_IDS and paper:
            raise ValueError(f"row {row['id']!r} is no row of the {results.get('corpus')!r} table (reports.experiments): "
                             "its corpus field names another table than its rows' (was it edited?)")
        check_inside_intervals(row)
        for key in DEFINED if definition is not None else ():
            if (list(today.get(key) or ()) if key == "parts" else today.get(key)) != (
                    list(definition.get(key) or ()) if key == "parts" else definition.get(key)):
                raise ValueError(f"row {row['id']!r} has {key} {today.get(key)!r} where the table's row of that id has "
                                 f"{definition.get(key)!r} (reports.experiments)")
        method = row.get("method")
        if method is not None and method not in METHODS:
            raise ValueError(f"row {row['id']!r} is of n-gram method {method!r}, which no method registers (baselines."
                             f"methods.METHODS: {', '.join(METHODS)}; a method's own file in baselines/ registers it)")
        if method is not None and not METHODS[method].min_order <= (row.get("n") or 0) <= METHODS[method].max_order:
            raise ValueError(f"row {row['id']!r} is of method {method} with n {row.get('n')!r}, not one of its orders "
                             f"{METHODS[method].min_order} to {METHODS[method].max_order}")
        for key in PERPLEXITIES:
            value = row.get(key)
            if value is not None and math.isfinite(value) and value > ceiling:
                raise ValueError(f"row {row['id']!r} has {key} {value:g}, above {MAX_PPL_OVER_VOCABULARY:g} times the "
                                 f"vocabulary's {results['corpus_summary']['vocab_size']} words: no model's perplexity")
        if kept and row.get("status") != "not run" and not all(
                (row.get("blocks") or {}).get(split) for split in ("valid", "test")):
            raise ValueError(f"row {row['id']!r} keeps no valid and test blocks where the other rows do, so nothing "
                             "checks its perplexities (its blocks were deleted?)")


DEFINED = ("kind", "method", "n", "classes", "mix", "parts", "family", "ours")  # what a row of the table is
# (reports.experiments), which a run never changes; not its label, which has changed between versions


def check_inside_intervals(row: dict) -> None:
    """Raise ValueError unless each perplexity of `row` lies inside its own 95% interval (where it has one):
    a figure edited without its interval, or an interval without its figure (in a file without blocks, the
    only thing the figure can be checked against)."""
    for split in ("valid", "test"):
        value, interval = row.get(f"{split}_ppl"), row.get(f"{split}_ppl_ci95")
        if value is None or not (isinstance(interval, list) and len(interval) == 2 and all(map(_number, interval))):
            continue
        low, high = interval
        if not low * (1 - 1e-9) <= value <= high * (1 + 1e-9):
            raise ValueError(f"row {row['id']!r} has {split}_ppl {value:.6g} outside its own 95% interval "
                             f"[{low:.6g}, {high:.6g}] (the perplexity or its interval was altered)")


def table_rows(results: dict) -> dict[str, dict]:
    """The rows of the table a run of `results` runs (reports.experiments: the paper's for brown and ap with
    every optional group, a user's corpus's for its |V|), by id, as records."""
    from reports import experiments
    corpus = results.get("corpus")
    if corpus in experiments.ROWS:
        rows = experiments.ROWS[corpus]() + [row for group in experiments.EXTRA_ROWS.get(corpus, {}).values()
                                             for row in group()]
    else:  # (every network a user may choose, `--networks`)
        rows = experiments.text_rows(results["corpus_summary"]["vocab_size"], experiments.NETWORK_CHOICES)
    quick = bool(results.get("settings", {}).get("quick"))  # (a quick run's class rows shrink C, QUICK_CLASSES)
    return {row.id: {**row.to_dict(), **({"classes": experiments.QUICK_CLASSES[row.classes]}
                                         if quick and row.classes in experiments.QUICK_CLASSES else {})}
            for row in rows}


def check_blocks(row: dict, tokens: dict) -> None:
    """Raise ValueError unless each split's blocks of `row` (as lmbench.bootstrap.row_blocks keeps them:
    log-probability sums rounded to DECIMALS places, token counts) hold the split's `tokens` and give its
    perplexity back: exp(-sum / tokens) within the sums' rounding (half a unit of the last place a block)."""
    from lmbench.bootstrap import DECIMALS
    blocks = row.get("blocks")
    if blocks is None:
        return
    if not isinstance(blocks, dict):
        raise ValueError(f"row {row['id']!r} has blocks that are not an object of splits")
    for split, found in blocks.items():
        logprob, counts = (found.get(key) if isinstance(found, dict) else None for key in ("logprob", "tokens"))
        if not (isinstance(logprob, list) and isinstance(counts, list) and len(logprob) == len(counts) > 0
                and all(_number(x) and x <= 0 for x in logprob)
                and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in counts)):
            raise ValueError(f"row {row['id']!r} has {split} blocks that are not one log-probability sum <= 0 and "
                             "one token count > 0 a block")
        if split not in tokens or sum(counts) != tokens[split]:
            raise ValueError(f"row {row['id']!r}'s {split} blocks hold {sum(counts)} tokens where the corpus's "
                             f"{split} holds {tokens.get(split)}")
        seeds = row.get("seeds")
        stated = row.get(f"{split}_ppl")
        if isinstance(seeds, list) and seeds and all(_number((s or {}).get(f"{split}_ppl")) for s in seeds):
            geometric = math.exp(math.fsum(math.log(s[f"{split}_ppl"]) for s in seeds) / len(seeds))
            arithmetic = math.fsum(s[f"{split}_ppl"] for s in seeds) / len(seeds)  # (files written before the one centre)
            if stated is not None and min(abs(stated - geometric), abs(stated - arithmetic)) > 1e-9 * stated:
                raise ValueError(f"row {row['id']!r} has {split}_ppl {stated}, not the mean of its seeds' perplexities")
            stated = geometric  # the blocks': their
        if stated is None:                                                                         # mean log-probabilities
            continue
        recomputed = -math.fsum(logprob) / sum(counts)
        slack = 0.5 * 10 ** -DECIMALS * len(counts) / sum(counts) + 1e-9
        if abs(recomputed - math.log(stated)) > slack:
            raise ValueError(f"row {row['id']!r}'s {split} blocks give perplexity {math.exp(recomputed):.6g}, not its "
                             f"{split}_ppl {stated:.6g} (the blocks or the perplexity were altered)")


def seeds_centre(seeds: list[dict], key: str) -> float | None:
    """A perplexity of a row run under several seeds: the geometric mean of the seeds' (None where a
    seed has none)."""
    values = [seed.get(key) for seed in seeds]
    return None if any(value is None for value in values) else float(np.exp(np.mean(np.log(values))))


def _one_centre(record: dict) -> dict:
    """A seeded row with each perplexity its seeds' geometric mean (module docstring)."""
    if not record.get("seeds"):
        return record
    centres = {key: seeds_centre(record["seeds"], key) for key in record["seeds"][0] if key.endswith(("_ppl", "_no_unk"))}
    return {**record, **{key: value for key, value in centres.items() if value is not None}}


def upgrade_row(record: dict) -> dict:
    """A row of results.json in today's fields (an old row migrated, a new one as it is)."""
    record = _one_centre(record)
    if "family" in record:
        return record
    record = dict(record)
    legacy = {key: record.pop(key, None) for key in LEGACY_FIELDS}
    if record["kind"] == "nplm":
        own = {"n": record["n"], **{key: legacy[key] for key in SHAPE[1:]},
               **{key: legacy[key] for key in ("objective", "valid_tokens") if legacy[key] is not None}}
        config = record.get("config") or own
        record.update(kind="network", family=legacy["network"] or config.get("model") or "nplm", config=config,
                      n=None)
    elif record["kind"] == "mix":
        record["n"] = None  # its network part's
    return {**ROW_DEFAULTS, **record}


def upgrade(results: dict) -> dict:
    """results.json with every row in today's fields, its blocks grouped (`grouped`)."""
    return grouped({**results, "rows": [upgrade_row(row) for row in results["rows"]]})


REFERENCE = "kn-interp-5"  # the row whose valid blocks choose the grouping (else the first n-gram row, else the first)


def _reference(rows: list[dict]) -> dict | None:
    kept = [row for row in rows if row.get("blocks", {}).get("valid")]
    return next((row for row in kept if row["id"] == REFERENCE), None) or next(
        (row for row in kept if row.get("method")), None) or (kept[0] if kept else None)


def grouped(results: dict, groups: int | None = None) -> dict:
    """`results` with every row's blocks grouped into the number of blocks `bootstrap.choose_grouping`
    picks on the valid blocks of REFERENCE's row (or into `groups`), valid and test alike (a split the
    choice leaves as cut stays as cut), each row's intervals recomputed from them, `bootstrap.grouping`
    saying what was chosen, whether the reference row's half-width was still growing at the coarsest
    grouping (`still_widening`: the intervals may be too narrow) and its half-widths (relative) on valid
    and test at every grouping tried, and `as_cut`, the rows as they came (the claims are judged at every
    grouping tried from them; never written). Results whose rows keep no blocks: as they are."""
    reference = _reference(results["rows"])
    if reference is None:
        return results
    choice = bootstrap.choose_grouping(reference["blocks"]["valid"])
    chosen = choice.blocks if groups is None else groups
    cut = len(reference["blocks"]["valid"]["tokens"])

    def regrouped(blocks: dict) -> dict:
        return blocks if chosen == cut else {split: bootstrap.group(found, chosen) for split, found in blocks.items()}

    rows = []
    for row in results["rows"]:
        blocks = row.get("blocks")
        rows.append(row if not blocks else {**row, "blocks": regrouped(blocks), **bootstrap.intervals(regrouped(blocks))})
    test = reference["blocks"].get("test")
    record = {"row": reference["id"], "blocks": chosen, "grouped": chosen != cut,
              "still_widening": choice.still_widening,
              "valid_half_width": {str(count): width for count, width in choice.widths.items()},
              "test_half_width": {} if test is None else {
                  str(len(test["tokens"]) if count == cut else count): bootstrap.half_width(grouped_test)
                  for count in choice.widths if bootstrap.enough_blocks(
                      grouped_test := test if count == cut else bootstrap.group(test, count))}}  # (too few: none)
    return {**results, "rows": rows, "as_cut": results.get("as_cut", results["rows"]),
            "bootstrap": {**results.get("bootstrap", {}), "grouping": record}}


def tried_groupings(results: dict) -> list[int]:
    """The numbers of blocks the grouping of `results` (as `grouped` gives them) was tried at, as cut first."""
    grouping = results.get("bootstrap", {}).get("grouping") or {}
    reference = next((row for row in results.get("as_cut", ()) if row["id"] == grouping.get("row")), None)
    if reference is None:
        return []
    return bootstrap.groupings(len(reference["blocks"]["valid"]["tokens"]))


def at_grouping(results: dict, groups: int) -> dict:
    """`results` (as `grouped` gives them) with every row's blocks grouped into `groups` instead, from the
    rows as cut (their intervals left as they are): what the claims would say at another grouping."""
    reference = next(row for row in results["as_cut"] if row["id"] == results["bootstrap"]["grouping"]["row"])
    cut = len(reference["blocks"]["valid"]["tokens"])

    def regrouped(blocks: dict) -> dict:
        return blocks if groups == cut else {split: bootstrap.group(found, groups) for split, found in blocks.items()}

    return {**results, "rows": [{**row, "blocks": regrouped(row["blocks"])} if row.get("blocks") else row
                                for row in results["as_cut"]]}


INTERVALS = ("valid_ppl_ci95", "test_ppl_ci95")


def current_format(results: dict) -> dict:
    """results.json (as read, checked) rewritten in today's format from its own blocks, no row run again:
    every row in today's fields (`upgrade_row`: a seeded row's perplexities their seeds' geometric mean),
    its blocks as cut, its intervals those of the grouping chosen now (`grouped`) over RESAMPLES
    resamples, `bootstrap` saying so, and `schema_version`. What `lmbench report` writes back."""
    rows = [upgrade_row(row) for row in results["rows"]]
    view = grouped({**results, "rows": rows})
    if "grouping" in view.get("bootstrap", {}):
        rows = [{**row, **{key: regrouped[key] for key in INTERVALS if key in regrouped}}
                for row, regrouped in zip(rows, view["rows"])]
        settings = {"resamples": bootstrap.RESAMPLES, "seed": bootstrap.SEED, "interval": "95% percentile"}
        results = {**results, "bootstrap": {**results.get("bootstrap", {}), **settings,
                                            "grouping": view["bootstrap"]["grouping"]}}
    from lmbench.schema import SCHEMA_VERSION
    return {"schema_version": SCHEMA_VERSION, **{key: value for key, value in results.items()
                                                 if key not in ("schema_version", "as_cut")}, "rows": rows}


def read_results(report_dir: Path) -> dict:
    """The results.json of a report folder as written, checked (`check_results`: types, finiteness, the
    schema, the blocks); one line naming the fix when it is missing, damaged or altered."""
    path = report_dir / "results.json"
    if not path.exists():
        raise LMBenchError(f"no results at {path}: run `make reproduce-brown` / `make reproduce-ap` (or "
                           f"`lmbench reproduce brown|ap|text ...` with --report-dir {report_dir}) first")
    if not path.is_file():  # a folder, a device (/dev/zero would be read forever)
        raise LMBenchError(f"{path} is not a file: replace it with the results.json of `lmbench reproduce ...` "
                           f"(--report-dir {report_dir})")

    def read(path: Path) -> dict:
        results = json.loads(path.read_text(encoding="utf-8"))
        check_results(results)
        return results

    return read_checked(path, read, what="results file",
                        fix="run the same `lmbench reproduce ...` again (finished rows come from the row cache, so "
                            "only results.json is rewritten), or correct the file")


def load_results(report_dir: Path) -> dict:
    """The results.json of a report folder, checked (`read_results`) and in today's fields (`upgrade`)."""
    return upgrade(read_results(report_dir))


def by_id(results: dict) -> dict[str, dict]:
    return {row["id"]: row for row in results["rows"]}


def network_of(record: dict, rows: dict[str, dict]) -> dict | None:
    """The network row behind a row: the row itself, a mixture's first network part, or None (an
    n-gram model, or a mixture of n-gram models)."""
    if record.get("family"):
        return record
    return next((rows[part] for part in record.get("parts", ()) if rows.get(part, {}).get("family")), None)


def shape(record: dict, rows: dict[str, dict]) -> dict:
    """n, h, m, direct of a row: an n-gram model's n; a network's (or a mixture's network part's) shape."""
    network = network_of(record, rows)
    config = network["config"] if network else {}
    values = config.get("shape") or config  # a run's config (RunConfig) nests it; a row's own is flat
    found = {key: values.get(key) for key in SHAPE}
    if record.get("n") is not None:
        found["n"] = record["n"]
    return found


def family_shape(record: dict, rows: dict[str, dict]) -> str | None:
    """The shape fields of a network row's family (or a mixture's network part's) that the columns n, h, m,
    direct do not show, as "layers 2, tied" (a true flag by its name, a false one as no-NAME, a field at 0
    left out: a feature turned off); None for an n-gram model or a family with no more fields. A field saved
    under a former name (`NetworkShape.renamed`) is shown under its name now."""
    from neural.families import FAMILIES
    network = network_of(record, rows)
    values = (network or {}).get("config", {}).get("shape")
    if not values or network["family"] not in FAMILIES:
        return None
    renamed = FAMILIES[network["family"]].shape.renamed
    parts = []
    for key, value in values.items():
        key = renamed.get(key, key)
        if key in SHAPE or value == 0 and not isinstance(value, bool):
            continue
        parts.append(key if value is True else f"no-{key}" if value is False else
                     str(value) if isinstance(value, str) else f"{key} {value}")
    return ", ".join(parts) or None


def flops_per_token(record: dict, vocab_size: int) -> float | None:
    """A network row's training FLOPs per training token, from the configuration results.json keeps
    (its family's analytic count, `NetworkShape.training_flops`); None for a row that keeps none."""
    if not record.get("config"):
        return None
    from neural.config import RunConfig
    try:
        run = RunConfig.from_saved(record["config"])
    except LMBenchError:  # (its own message names an option of the run, never given to this command)
        raise LMBenchError(f"row {record.get('id')!r} of this results.json keeps a training configuration of an "
                           "older format, which today's code no longer reads: run the report's rows again "
                           "(`lmbench reproduce CORPUS`), or build its report at the commit that wrote it") from None
    return run.shape.training_flops(vocab_size, run)


def training_cost(record: dict, vocab_size: int) -> dict:
    """A network row's cost: its updates, its training FLOPs (its family's analytic count per token times the
    tokens it trained on; for a row written before rows kept it, from its tokens/s and training seconds) and
    why its training stopped ("budget", "early_stopping", "converged", "epochs"; a budget's cut says whether its
    validation still fell then, reports.running.budget.still_falling); blanks for other rows."""
    if record.get("kind") != "network" or record.get("test_ppl") is None:
        return {"updates": None, "train FLOPs": None, "stopped": None}
    flops = record.get("train_flops")
    if flops is None and record.get("tokens_per_s") and record.get("train_seconds") and record.get("config"):
        flops = flops_per_token(record, vocab_size) * record["tokens_per_s"] * record["train_seconds"]
    updates = record.get("updates") or (record["curve"][-1].get("step") if record.get("curve") else None)
    return {"updates": updates, "train FLOPs": None if flops is None else f"{flops:.2g}",
            "stopped": record.get("stopped") if record.get("stopped") != "budget" else
            {True: "budget (valid still falling)", False: "budget (valid no longer falling)",
             None: "budget (one validation)"}[still_falling(record)]}


def paper_network(record: dict, rows: dict[str, dict]) -> bool:
    """Whether a row is the paper's network (the family of equation 1 in a shape of the paper's, any
    objective), alone or mixed: the rows the paper's claims are about. Another family's rows, and our
    own designs (`ours`), never enter them."""
    network = network_of(record, rows)
    return network is not None and network["family"] == PAPER_FAMILY and not network["ours"]
