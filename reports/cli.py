"""`lmbench reproduce brown|ap` runs the paper's table end to end, `lmbench reproduce text --train A
--valid B --test C` the same comparison on a user's corpus; `lmbench report ...` rebuilds a report from
results.json without retraining, `lmbench report summary` the cross-corpus summary from every report's.
(`lmbench score` and `generate`, on a saved model, are lmbench_cli.score's: this module reads the networks'
registry, and with it torch, as it loads.)"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from baselines.cli import add_memory_options
from baselines.methods import methods_where
from lmbench.errors import LMBenchError
from corpora.cli import add_corpus_group
from corpora.record import refuse_text_conflicts
from lmbench.options import (NAME_BYTES, THREADS_MAX, FormerName, integer, number, output_directory,
                             refuse_overwriting, split_fractions, write_refusal)
from neural.precision import CHOICES as PRECISION_CHOICES
from reports.experiments import DEFAULT, EXTRA_ROWS, KINDS, NETWORKS_BEYOND_2003, OURS, ROWS, TABLE1_NETWORKS

CORPORA = sorted(ROWS) + ["text"]
NETWORK_IDS = [DEFAULT] + [name.lower() for name in TABLE1_NETWORKS] + [OURS, *NETWORKS_BEYOND_2003]
EXTRA_GROUPS = sorted({name for groups in EXTRA_ROWS.values() for name in groups})


def comma_list(allowed: list[str]):
    """An option's type: a comma-separated list of names from `allowed`, in order, without repeats."""
    def parse(text: str) -> tuple[str, ...]:
        chosen = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
        if not chosen or any(name not in allowed for name in chosen):
            raise argparse.ArgumentTypeError(f"{text!r}: give a comma-separated list of {', '.join(allowed)}")
        return chosen
    return parse


def row_ids(text: str) -> tuple[str, ...]:
    """An option's type: a comma-separated list of row ids (checked against the table once it is built)."""
    chosen = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not chosen:
        raise argparse.ArgumentTypeError(f"{text!r}: give a comma-separated list of row ids, e.g. nplm-ours,lstm")
    return chosen


def folder_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text):
        raise argparse.ArgumentTypeError(f"{text!r}: a folder name of ASCII letters and digits, '.', '_' or '-' "
                                         "(no accents or spaces)")
    if len(text) > NAME_BYTES:  # (the folders runs/NAME, runs/reports/NAME-quick and the names made from them)
        raise argparse.ArgumentTypeError(f"{text[:60]!r}... has {len(text)} characters: give a name of at most "
                                         f"{NAME_BYTES}")
    return text


def _add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", type=folder_name, default=None,
                        help="text: the report's name, written to runs/reports/NAME (default: text)")


def _add_results_dir(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--results-dir", type=output_directory, default=None,
                        help=f"the folder of committed reports (its index.txt lists them) {what} (default: "
                             "results/ in the working directory, never beside the installed package)")


def _add_allow_dirty(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-dirty", action="store_true",
                        help="write into a committed report folder (results/brown, ...) although the checkout "
                             "has uncommitted changes; the report's first line says so")


def register(subparsers) -> None:
    parser = subparsers.add_parser("reproduce", help="run every row of the paper's table (or the comparison "
                                   "on your own corpus) and build the report")
    parser.add_argument("corpus", choices=CORPORA, help="brown, ap: the paper's tables; text: your three files")
    parser.add_argument("--quick", action="store_true", help="the same pipeline on a small slice, to check that it "
                        "runs (under a minute; a QUICK report, never in the summary)")
    parser.add_argument("--work-dir", type=output_directory, help="row cache and checkpoints (default runs/NAME)")
    parser.add_argument("--report-dir", type=output_directory, help="results and report (default runs/reports/NAME; the committed ones: results/NAME)")
    parser.add_argument("--skip", nargs="+", choices=KINDS, default=[],
                        help="leave out the rows of these kinds (listed as not run), e.g. --skip network")
    parser.add_argument("--extra", type=comma_list(EXTRA_GROUPS), default=(),
                        help=f"add these optional row groups, of {','.join(EXTRA_GROUPS)}; brown: energy adds "
                             "section 5.1's energy network in MLP1's shape, alone and mixed (about 20 minutes "
                             "more on 2 cores); brown, ap: " + ", ".join(NETWORKS_BEYOND_2003) + " add our network "
                             "of that family (" + ", ".join(NETWORKS_BEYOND_2003.values()) + "), alone and mixed "
                             "with interpolated KN 5; text: none (its networks are chosen with --networks)")
    parser.add_argument("--networks", type=comma_list(NETWORK_IDS), default=None,
                        help=f"the networks to train, of {','.join(NETWORK_IDS)} (default: those the table runs "
                             f"when none is named); {DEFAULT}: those, so that {DEFAULT},NAME adds NAME to them "
                             "(text: a family beyond 2003 that is not compared by default, say); brown, ap: the "
                             "table's other network rows and their mixtures are listed as not run (a family beyond "
                             "2003 named here adds its row group), e.g. --networks gru for one more row beside a "
                             "committed report on the same corpus")
    parser.add_argument("--threads", type=integer(1, THREADS_MAX), default=None,
                        help="CPU threads of the network rows (default: OMP_NUM_THREADS when set, else the cores "
                             "not busy at the start, docs/parallel.md; e.g. 1 to share the machine with another "
                             "run): how fast, not what, so not part of a row's cache key")
    parser.add_argument("--precision", choices=PRECISION_CHOICES, default="auto",
                        help="the network rows' training products: auto (default: bf16 for the families measured "
                             "faster for it where the device computes it natively, else fp32), fp32, bf16 (bfloat16 "
                             "products, fp32 weights and optimizer state); scoring is fp32 either way; recorded in "
                             "each row and its cache key (neural/precision.py)")
    parser.add_argument("--jobs", type=integer(1, 64), default=1,
                        help="rows run at once, as tasks of an embedded Ray on this machine (the CPU threads shared "
                             "among them; never more than the rows to run; a K whose rows the memory cannot hold is "
                             "refused): the n-gram rows beside a network, several small networks on one GPU (default "
                             "1: one row after the other, no Ray; on 2 CPU cores 2 is faster: the paper's shapes train as fast on one "
                             "thread as on two; a --budget is then the rows' wall time K at once; docs/parallel.md)")
    parser.add_argument("--cluster", metavar="ADDRESS", default=None,
                        help="run the rows as tasks of the running Ray cluster at ADDRESS (HOST:6379, what `ray start "
                             "--head` printed; auto: RAY_ADDRESS's); this process writes the row cache and the report, "
                             "a node needs the project installed and nothing else (docs/parallel.md)")
    parser.add_argument("--seeds", type=integer(1, 1000), default=1,
                        help="train and score every network row under this many seeds (the run's, then one more "
                             "each; each mixture of a network mixes each seed's): the row gives the mean "
                             "perplexity, its standard deviation and every seed's (default 1: the row as one seed, "
                             "from the same cache)")
    parser.add_argument("--seeds-for", type=row_ids, default=(), metavar="ROWS",
                        help="with --seeds K: only these network rows (their ids in the table, e.g. "
                             "nplm-ours,lstm,transformer) and the mixtures of them run under the K seeds; the "
                             "other rows run under the first (default: every network row)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--budget", type=_budget, default=None, metavar="TIME|none|RESULTS.json",
                        help="the network rows' compute budget as the whole run's wall time (e.g. 20m, 2h), "
                             "shared by --budget-rule from paces measured on this machine once and recorded in "
                             "results.json, no row beyond its recipe's end; none: every recipe to its end (the "
                             "default); a results.json: the updates that run recorded (docs/your-corpus.md)")
    budget.add_argument("--budget-flops", type=number(1.0, 1e25), default=None, metavar="FLOPS",
                        help="the network rows' compute budget as training FLOPs per network row (e.g. 1e15)")
    parser.add_argument("--budget-rule", choices=("complete", "flops", "recipe"), default=None,
                        help="how the network rows share a wall-time --budget: complete, as many networks as fit "
                             "trained to their recipe's end, the quickest first, the others the same share of theirs "
                             "in what is left (the most converged rows the time buys; the default); flops, the same "
                             "training FLOPs each (claims between networks at equal compute); recipe, the same share "
                             "of each network's own recipe; under every rule a row that reaches its end hands the "
                             "rest on")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_results_dir(parser, "that the report's cross-corpus summary gathers")
    _add_allow_dirty(parser)
    text = parser.add_argument_group("your own corpus (reproduce text)")
    add_corpus_group(text, ("text",))
    text.add_argument("--split", action=FormerName, name="--corpus-split", dest="corpus_split", type=split_fractions)
    _add_name(text)
    text.add_argument("--only", choices=("ngram", "nplm"), default=None,
                      help="ngram: the n-gram rows only; nplm: the networks and their mixtures with the trigram")
    add_memory_options(text, f"the {', '.join(methods_where(lambda m: m.bounded))} rows (the same results)")
    parser.set_defaults(run=run_reproduce)

    parser = subparsers.add_parser("report", help="rebuild tables, claims and figures from results.json "
                                   "(summary: the cross-corpus summary, results/summary.md, from every listed report's, and "
                                   "the top of every report there that it made stale)")
    parser.add_argument("corpus", choices=CORPORA + ["summary"])
    parser.add_argument("--quick", action="store_true", help="the report of the quick run")
    _add_name(parser)
    parser.add_argument("--report-dir", type=output_directory, help="default runs/reports/NAME (summary: see "
                        "--results-dir)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_results_dir(parser, "that the cross-corpus summary gathers; summary: where summary.md and its figure "
                     "are written, and the answer block of the README.md beside that folder")
    _add_allow_dirty(parser)
    parser.set_defaults(run=run_report)


def _text_corpus(args: argparse.Namespace):
    """The user's corpus of `reproduce text`; None for the paper's corpora (which take none of its options)."""
    from reports.running.settings import TextCorpus
    files = {split: getattr(args, split) for split in ("train", "valid", "test")}
    if args.corpus != "text":
        given = [f"--{option.replace('_', '-')}" for option in ("train", "valid", "test", "corpus_file", "corpus_split", "name",
                                                                 "min_count", "vocab_size", "only", "memory", "tmp_dir")
                 if getattr(args, option) is not None]
        if given:
            raise LMBenchError(f"{', '.join(given)}: only for `lmbench reproduce text` (your own corpus); "
                               f"{args.corpus} follows the paper's protocol")
        return None
    if args.tmp_dir is not None and args.memory is None:
        raise LMBenchError("--tmp-dir holds the temporary files of the bounded path of --memory: give --memory SIZE "
                           "too, or drop --tmp-dir")
    options = dict(name=args.name or "text", min_count=args.min_count, vocab_size=args.vocab_size, networks=args.networks,
                      only=args.only, memory=args.memory, tmp_dir=args.tmp_dir)
    refuse_text_conflicts({**files, "corpus_file": args.corpus_file, "corpus_split": args.corpus_split},
                          "reproduce text")
    if args.corpus_file is not None:
        return TextCorpus(corpus_file=args.corpus_file, corpus_split=args.corpus_split or TextCorpus.corpus_split,
                          **options)
    return TextCorpus(**files, **options)


def _report_dir(args: argparse.Namespace) -> Path:
    from reports.running.settings import USER_REPORTS, report_name
    return args.report_dir or USER_REPORTS / report_name(args.corpus, args.quick,
                                                       (args.name or "text") if args.corpus == "text" else None)


def refuse_unwritable(places: dict[str, Path]) -> None:
    """One line, before any row runs, unless a folder can be made in the place where each output folder is
    written ({option: place}; a report folder is written beside itself and then takes its place, so its
    place is its parent): the nearest folder there is (`lmbench.options.write_refusal`). The options'
    types check the folders given; this, the defaults and a report folder's parent."""
    for option, place in places.items():
        existing = Path(os.path.abspath(place))
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        refusal = write_refusal(existing)
        if refusal:
            raise LMBenchError(f"{option}: cannot write in {existing} ({refusal}): give a folder you can write to")


DEFAULT_RULE = "complete"  # how the rows share a wall-time budget (reports.running.budget.RULES; docs/your-corpus.md says why)


def _budget(text: str) -> str:
    """--budget's value, checked as it is parsed (reports.running.budget.parse_budget)."""
    from reports.running.budget import parse_budget
    try:
        parse_budget(text)
    except LMBenchError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def refuse_contradictions(args: argparse.Namespace) -> None:
    """Refuse, before anything is written, a run whose options contradict each other: a row selection
    that one option asks for and another leaves out (`--only`, `--skip`, `--networks`, `--extra`), or a
    --quick run with a budget (its slice trains to its own short recipe: the budget would be ignored)."""
    skip, only = set(args.skip), getattr(args, "only", None)
    pairs = []
    if set(KINDS) <= skip:
        pairs.append(f"--skip {' '.join(args.skip)} leaves out every kind of row")
    if only == "ngram" and "ngram" in skip:
        pairs.append("--only ngram keeps the n-gram rows alone and --skip ngram leaves them out")
    if only == "nplm" and "network" in skip:
        pairs.append("--only nplm keeps the networks and their mixtures and --skip network leaves them out")
    if only == "ngram" and (args.networks or args.extra):
        pairs.append(f"--only ngram leaves out the networks that {'--networks' if args.networks else '--extra'} names")
    if "network" in skip and (args.networks or args.extra):
        pairs.append(f"--skip network leaves out the networks that {'--networks' if args.networks else '--extra'} names")
    budgets = [option for option, given in (("--budget", args.budget not in (None, "none")),  # (none: the default)
                                            ("--budget-flops", args.budget_flops is not None),
                                            ("--budget-rule", args.budget_rule is not None)) if given]
    if args.quick and budgets:
        pairs.append(f"--quick trains every network to its own short recipe and {', '.join(budgets)} would be ignored")
    if pairs:
        raise LMBenchError(f"contradictory options: {'; '.join(pairs)}: drop one of each pair")


def run_reproduce(args: argparse.Namespace) -> dict:
    from reports.running.pipeline import reproduce
    from reports.running.settings import report_name
    refuse_contradictions(args)
    text = _text_corpus(args)
    report_dir = _report_dir(args)
    work_dir = args.work_dir or Path("runs") / report_name(args.corpus, args.quick, text.name if text else None)
    refuse_overwriting(args, {}, folders={"--report-dir": report_dir, "--work-dir": work_dir,
                                          **({"--results-dir": args.results_dir} if args.results_dir else {})})
    refuse_unwritable({"--report-dir": Path(report_dir).parent, "--work-dir": Path(work_dir),
                       **({"--results-dir": args.results_dir} if args.results_dir else {})})
    if Path(report_dir).resolve() in (Path(work_dir).resolve(), *Path(work_dir).resolve().parents):
        raise LMBenchError(f"--work-dir {work_dir} lies in --report-dir {report_dir}, which is replaced as a whole "
                           "when the report is written (the row cache would go with it): give them separate folders")
    from reports.building.summary import RESULTS, listed_reports
    listed_reports(args.results_dir or RESULTS)  # (read at the end, by the report: refused before any row runs)
    if args.cluster is not None:  # (before the corpus is read, or the paces measured)
        from reports.running.cluster import check_address
        check_address(args.cluster)
    elif args.jobs > 1:
        from reports.running.cluster import check_ray_temp
        check_ray_temp()
    budget = args.budget  # (none by default: every network trained to its recipe's end)
    if args.budget_rule and (args.budget_flops is not None or budget in (None, "none") or budget.endswith(".json")):
        raise LMBenchError(f"--budget-rule shares a wall-time --budget among the network rows; this run has "
                           f"{'--budget-flops (the same FLOPs each already)' if args.budget_flops is not None else 'none'}"
                           ": drop --budget-rule, or give --budget 20m (say)")
    summary = reproduce(args.corpus, args.quick, work_dir, report_dir, frozenset(args.skip), text, args.extra,
                        args.allow_dirty, args.threads, args.seeds, args.seeds_for, budget, args.budget_flops,
                        args.results_dir, args.budget_rule or DEFAULT_RULE,
                        args.networks if args.corpus != "text" else None, args.jobs, args.precision, args.cluster)
    return {key: summary[key] for key in ("commit", "report_dir", "wall_seconds", "report", "html", "seeds_advice")
            if key in summary} | _verdicts(summary["claims"], summary["quick"])


def _verdicts(claims: list[dict], quick: bool) -> dict:
    """The claims' verdicts for the terminal; none for a quick run, whose numbers measure nothing (its
    report keeps them, under its QUICK banner)."""
    if quick:
        return {"claims": "not judged on a quick run (its report lists them under its QUICK banner)"}
    return {"claims": {c["claim"]: f"{c['verdict']}: {c['ours']}" for c in claims}}


def _refuse_unused_names(args: argparse.Namespace) -> None:
    """`report`'s --quick and --name pick the default report folder (runs/reports/NAME): refused where
    nothing reads them (summary, --report-dir given, --name on a paper's corpus)."""
    given = [option for option, value in (("--quick", args.quick), ("--name", args.name is not None)) if value]
    if args.corpus == "summary" and given:
        raise LMBenchError(f"report summary: {', '.join(given)} picks one report's folder; the summary reads every "
                           "report its --results-dir lists: drop it")
    if args.report_dir is not None and given:
        raise LMBenchError(f"{', '.join(given)} picks the default report folder, which --report-dir "
                           f"{args.report_dir} replaces: drop {', '.join(given)}")
    if args.corpus != "text" and args.name is not None:
        raise LMBenchError(f"--name: only for `lmbench report text` (it names your own corpus's report); the "
                           f"{args.corpus} report's folder is fixed: drop it")


def run_report(args: argparse.Namespace) -> dict:
    from reports.building.summary import RESULTS
    _refuse_unused_names(args)
    results_dir = args.results_dir or RESULTS
    if args.corpus == "summary":  # the reports results/index.txt lists, in the working directory's results/
        from reports.building.summary import write_summary
        if args.report_dir is not None:
            raise LMBenchError("report summary: --report-dir names one report's folder; give the folder of "
                               f"reports as --results-dir {args.report_dir}")
        refuse_unwritable({"--results-dir": results_dir})
        from reports.building.build import build_report, stale_tops
        from reports.provenance import checked_state
        # every report whose top is no longer the summary, rebuilt from its results.json; a committed one in a
        # dirty checkout refused as `lmbench report` refuses it, before anything is written
        stale = [(folder, checked_state(folder, args.allow_dirty)) for folder in stale_tops(results_dir)]
        written = write_summary(results_dir)
        for folder, state in stale:
            build_report(folder, state, results_dir=results_dir)
        return {key: written[key] for key in ("summary", "figure", "readme") if key in written} | (
            {"rebuilt": [str(folder) for folder, _ in stale]} if stale else {})
    from reports.building.build import build_report
    from reports.provenance import checked_state
    report_dir = _report_dir(args)
    refuse_unwritable({"--report-dir": Path(report_dir).parent})
    built = build_report(report_dir, checked_state(report_dir, args.allow_dirty), results_dir=results_dir,
                         corpus=args.corpus)
    return {"commit": built["commit"], "report": built["report"], "html": built["html"],
            "figures": built["figures"]} | _verdicts(built["claims"], built["quick"])
