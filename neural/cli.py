"""`lmbench train|eval` (any family; `lmbench nplm train|eval` under their first names) and `lmbench nplm
neighbors`: train a network of any registered family, score a split with a trained run (words outside
the vocabulary as <unk> or initialised from their context, `neural.oov`), list a word's nearest
neighbours in the feature table C. A run folder records its corpus (corpus.json,
`corpora.cli.write_record`, once the run holds its folder): eval and neighbors load it from there
unless corpus options are given; train --resume loads it, takes the run's network (family and shape)
from its checkpoint when --model is not given, and refuses a corpus option or a training option other
than the run's (the run's record would say it trained so from its start). No output of eval lands on a
file of its run or a corpus file its record names."""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from corpora.cli import RECORD, add_corpus_options, corpus_options, load_corpus, load_options, write_record
from lmbench.errors import LMBenchError
from lmbench.files import folder_held
from lmbench.options import (COUNT_MAX, THREADS_MAX, examined_path, integer, number, output_directory, output_file,
                             refuse_overwriting)


def register(subparsers) -> None:
    """`lmbench train` and `lmbench eval` (any family), and `lmbench nplm train|eval|neighbors`, the
    names these had when the NPLM was the only family (train and eval the same commands)."""
    add_train(subparsers)
    add_eval(subparsers)
    parser = subparsers.add_parser("nplm", help="train, score or inspect a network (`lmbench train`, "
                                                "`lmbench eval` under their first names), nearest words in C")
    commands = parser.add_subparsers(dest="nplm_command", required=True)
    add_train(commands)
    add_eval(commands)
    add_neighbors(commands)


def add_train(commands) -> None:
    from neural.config import BACKENDS, CLASS_SOURCES, OBJECTIVES, PARALLEL, RECIPES, SCHEDULES, RunConfig
    from neural.precision import CHOICES
    defaults = RunConfig()
    train = commands.add_parser("train", help="train a network of any family and report its perplexities")
    add_corpus_options(train, recorded=True)
    _network_options(train.add_argument_group("network"), defaults.model)
    run_group = train.add_argument_group("training")
    run_group.add_argument("--recipe", choices=tuple(RECIPES), default=None,
                           help="window networks: paper: one example per update, eps0/(1+rt), early stopping; "
                                "sgd (default): minibatches of 128, the rate halved on a validation plateau "
                                f"({_stream_families()}: their own, AdamW with a cosine rate)")
    run_group.add_argument("--objective", choices=tuple(OBJECTIVES), default=None,
                           help=f"training loss over the output layer (default {defaults.objective}; --resume: the "
                                "run's): "
                                + "; ".join(f"{o.name}: {o.summary}" for o in OBJECTIVES.values()))
    run_group.add_argument("--samples", type=integer(1, 10**12), default=None,
                           help=f"k, words drawn per minibatch by importance / nce (default {defaults.samples}; "
                                f"{_stream_default('samples')})")
    run_group.add_argument("--classes", type=integer(0), default=None,
                           help="objective class: number of word classes (default: round(sqrt(|V|)))")
    run_group.add_argument("--class-source", choices=CLASS_SOURCES, default=None,
                           help="objective class: frequency (bins of equal sqrt-frequency mass; default) "
                                "or exchange (the exchange clustering of the class n-gram, cached)")
    run_group.add_argument("--epochs", type=integer(1, 10**6), default=None,
                           help=f"at most this many (default {defaults.epochs}; {_stream_default('epochs')})")
    run_group.add_argument("--batch-size", type=integer(1, 10**7), default=None,
                           help=f"windows per update, default 1 (paper) or 128 (sgd); stream networks: lanes "
                                f"({_stream_default('batch_size')})")
    run_group.add_argument("--lr", type=number(0, 1e6), default=None,
                           help=f"default 1e-3 (paper) or 1.0 (sgd); {_stream_default('lr')}")
    run_group.add_argument("--min-gain", type=number(-1e3, 1), default=None,
                           help="sgd: halve the rate once an epoch improves valid by less than this "
                                "fraction per million training tokens (at least this fraction), stop when "
                                f"it again gains less than this fraction (default {defaults.min_gain})")
    run_group.add_argument("--anneal-gain", type=number(-1e3, 1), default=None,
                           help="sgd: start halving once an epoch improves valid by less than this fixed "
                                "fraction instead (default: the --min-gain rule)")
    run_group.add_argument("--schedule", choices=SCHEDULES, default=None,
                           help="sgd: halving (the --min-gain rule above; default) or linear (the rate falls "
                                "linearly to 0 over all --epochs, every epoch run: NPLM (ours)'s budget); the "
                                f"stream networks' ({_stream_families()}): cosine, a linear warm-up then a cosine "
                                "decay over all --epochs")
    run_group.add_argument("--weight-decay", type=number(0, 1e6), default=None,
                           help=f"on the weights and C, not the biases (default {defaults.weight_decay}, the paper's "
                                f"for Brown; AP: 1e-5; {_stream_default('weight_decay')})")
    run_group.add_argument("--dropout", type=number(0, 1), default=None,
                           help="dropout on the network's features while training, where its family has a place "
                                "for it (docs/networks.md says where; a family without one refuses it); not in the "
                                f"paper; default {defaults.dropout}; {_stream_default('dropout')}; 0: none")
    run_group.add_argument("--patience", type=integer(1, 10**6), default=None,
                           help="paper recipe: early-stopping patience in epochs")
    run_group.add_argument("--max-steps", type=integer(1), default=None,
                           help="pause after this many updates in all (a checkpoint; --resume carries on)")
    run_group.add_argument("--budget-updates", type=integer(1), default=None,
                           help="a compute budget: train exactly this many updates, the rate decaying to the last "
                                "(linear or cosine schedule), the last epoch cut there and validated; default: "
                                "the recipe's epochs")
    run_group.add_argument("--valid-tokens", type=integer(1), default=None,
                           help="validate after each epoch (rate, best model, early stop) on the first this "
                                "many tokens of valid; the final figures score all of it (default: all; "
                                "for --model energy, whose exact scoring is slow)")
    run_group.add_argument("--steps", type=integer(1, 10**7), default=None,
                           help="stream networks: inputs per lane per update (default 35; a Transformer: its --context)")
    run_group.add_argument("--warmup-steps", type=integer(0), default=None,
                           help=f"stream networks: updates of the linear warm-up (default {defaults.warmup_steps})")
    run_group.add_argument("--clip", type=number(0, 1e9), default=None,
                           help=f"stream networks: the gradient's norm is clipped at this (default {defaults.clip})")
    run_group.add_argument("--final-lr-fraction", type=number(0, 1), default=None,
                           help="stream networks: the last rate of the cosine schedule, as a fraction of --lr "
                                f"(default {defaults.final_lr_fraction})")
    run_group.add_argument("--checkpoint-minutes", type=number(0, 1e6), default=defaults.checkpoint_minutes)
    run_group.add_argument("--seed", type=integer(0, 2**32 - 1), default=None,
                           help=f"the seed of the run's initial weights and batches (default {defaults.seed}; --resume: "
                                "the run's)")
    run_group.add_argument("--out", type=output_directory, default=None,
                           help="run directory (default runs/MODEL-CORPUS-SHAPE-RECIPE-OBJECTIVE-sSEED, SHAPE the "
                                "family's shape options in order, each NAMEVALUE, a flag NAME or no-NAME)")
    run_group.add_argument("--resume", action="store_true",
                           help="continue the run in --out (on the corpus its corpus.json records, unless named)")
    _device_options(train)
    run_group.add_argument("--precision", choices=CHOICES, default=None,
                           help="the training products (--resume: the run's): auto (default: bf16 where the device "
                                "computes it natively "
                                "and the family trains faster for it, else fp32), fp32, bf16 (bfloat16 products, fp32 "
                                "weights, gradients and optimizer state); scoring is always fp32 "
                                "(neural/precision.py)")
    _parallel_options(train, PARALLEL, BACKENDS)
    train.set_defaults(run=run_train)


def add_eval(commands) -> None:
    from neural.config import BACKENDS, PARALLEL
    evaluate = commands.add_parser("eval", help="perplexity of a trained run's best model on a split")
    evaluate.add_argument("dir", type=examined_path, help="run directory")
    evaluate.add_argument("--split", choices=("train", "valid", "test"), default="test")
    evaluate.add_argument("--oov", choices=("unk", "init"), default="unk",
                          help="words outside the vocabulary: <unk> (default), or init: also score them as "
                               "words initialised from their context, the vocabulary growing (beside <unk>)")
    evaluate.add_argument("--save-logprobs", metavar="OUT.npz", type=output_file, default=None,
                          help="also write the log-probabilities of valid and test (<unk> convention), "
                               "the input of lmbench mix")
    add_corpus_options(evaluate, recorded=True)
    _device_options(evaluate)
    evaluate.add_argument("--bf16", action="store_true", help="score with the |V|-sized matrix products in bfloat16 "
                          "(faster, approximate: the figures are no longer the exact fp32 ones)")
    _parallel_options(evaluate, PARALLEL, BACKENDS)
    evaluate.set_defaults(run=run_eval)


def add_neighbors(commands) -> None:
    neighbors = commands.add_parser("neighbors", help="nearest words by cosine similarity in C")
    neighbors.add_argument("dir", type=examined_path, help="run directory")
    neighbors.add_argument("words", nargs="+")
    neighbors.add_argument("--k", type=integer(1, 10**6), default=10, help="neighbours per word (default 10)")
    neighbors.add_argument("--oov-from", choices=("valid", "test"), default=None,
                           help="words outside the vocabulary: their vectors as initialised scoring this "
                                "split (--oov init), their neighbours among the vocabulary's")
    add_corpus_options(neighbors, recorded=True)
    neighbors.add_argument("--json", action="store_true")
    neighbors.set_defaults(run=run_neighbors, device="cpu", bf16=False)


SHAPE_MAX = {"layers": 1024}  # built one by one: a count the memory check would take long to reach


def _network_options(group, default_model: str) -> None:
    """--model and the options of every family's shape (`neural.families`): each field once, its
    default left to the family (argparse's None: not given), the family's to the run resumed (`_network`)."""
    from dataclasses import fields
    from neural.families import FAMILIES
    group.add_argument("--model", choices=tuple(FAMILIES), default=None,
                       help="; ".join(f"{name}: {entry.summary}" for name, entry in FAMILIES.items())
                            + f" (default {default_model}; --resume: the run's)")
    seen = {}
    for entry in FAMILIES.values():
        for f in fields(entry.shape):
            seen.setdefault(f.name, (f, []))[1].append(f"{entry.name} {f.default}")
    for name, (f, defaults) in seen.items():
        flag = "--" + name.replace("_", "-")
        help_text = f"{f.metadata.get('help', '')} (default: {', '.join(defaults)})"
        if isinstance(f.default, bool):
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif isinstance(f.default, int):  # the family refuses what its network cannot be; and lmbench.memory,
            group.add_argument(flag, type=integer(0, SHAPE_MAX.get(name, COUNT_MAX)), default=None,
                               help=help_text)  # what cannot fit
        else:
            group.add_argument(flag, type=type(f.default), default=None, help=help_text)


def _shape_options(args: argparse.Namespace) -> dict:
    """The shape options given on the command line, for RunConfig (those not given: the family's)."""
    from dataclasses import fields
    from neural.families import FAMILIES
    names = {f.name for entry in FAMILIES.values() for f in fields(entry.shape)}
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _device_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto (CUDA when present, else the CPU), "
                                                         "cpu, cuda, cuda:N")
    parser.add_argument("--threads", type=integer(1, THREADS_MAX), default=None,
                        help="CPU threads (default: OMP_NUM_THREADS when set, else the cores not busy at the start: "
                             "the cores less those /proc/stat shows busy over 0.3 s, at least 1; docs/parallel.md)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def _parallel_options(parser: argparse.ArgumentParser, schemes, backends) -> None:
    group = parser.add_argument_group("parallel (--nproc-per-node P, or torchrun --nproc-per-node P -m "
                                      "lmbench_cli -- nplm ...)")
    group.add_argument("--parallel", choices=schemes, default=None,
                       help="data: each process a share of every minibatch (the minibatch is --batch-size "
                            "times the processes); vocab: each process a block of the output words "
                            "(the paper's section 3.2). Default: one process")
    group.add_argument("--backend", choices=backends, default="auto",
                       help="torch.distributed backend (default auto: nccl on CUDA, gloo on the CPU)")
    group.add_argument("--nproc-per-node", type=integer(1, THREADS_MAX), default=None,
                       help="run on P processes of this machine: torchrun is started for you (neural/parallel/launch.py)")
    group.add_argument("--nnodes", type=integer(1, 10**4), default=1,
                       help="with --nproc-per-node: machines running the same command (default 1)")
    group.add_argument("--rdzv-endpoint", metavar="HOST:PORT", default=None,
                       help="with --nnodes > 1: the rendezvous address, one of the machines")


def _stream_families() -> str:
    from neural.families import FAMILIES
    return ", ".join(name for name, entry in FAMILIES.items() if entry.context == "stream")


def _stream_default(option: str) -> str:
    """The help text's note of the stream families' own defaults of a run option (their shapes'
    `run_defaults`, `neural.families`)."""
    from neural.families import FAMILIES
    return "; ".join(f"{name}: {entry.shape.run_defaults[option]}" for name, entry in FAMILIES.items()
                     if option in entry.shape.run_defaults)


def run_train(args: argparse.Namespace) -> dict | None:
    from dataclasses import asdict
    from neural.training.trainer import train_network
    if args.nproc_per_node:
        from neural.parallel.launch import launch
        return launch(args)
    saved = _saved_run(args)
    config = _run_config(args, saved)
    _check_launch(args)
    if saved is not None:
        _check_resume(args, args.out, config, saved)
    options = corpus_options(args, args.out if args.resume and args.out else None)
    refuse_overwriting(args, {}, _recorded_files(options), folders={"--out": args.out})
    corpus = load_options(options, use_cache=not args.no_cache)
    shape = "-".join((k if v else f"no-{k}") if isinstance(v, bool) else f"{k}{v}"
                     for k, v in asdict(config.shape).items())
    out = args.out or f"runs/{config.model}-{corpus.name}-{shape}-{config.recipe}-{config.objective}-s{config.seed}"
    if args.out is None:
        refuse_overwriting(args, {}, folders={"--out (its default)": Path(out)})
        if args.resume and not args.parallel:  # (the run found by its name: its options not given are its own)
            saved = _resumed_config(out)
            config = _run_config(args, saved)
            _check_resume(args, out, config, saved)
    team = _connect(args, corpus)
    try:
        with folder_held(out, busy(out)) if team.writer else nullcontext():
            if team.writer:  # (once the folder is this run's)
                _record_corpus(Path(out), options, corpus, args.resume)
            result = train_network(corpus, config, out, resume=args.resume, team=team)
    finally:
        team.close()
    result.pop("config")
    return result if team.writer else None  # rank 0 prints the figures


def _record_corpus(out: Path, options: dict, corpus, resume: bool) -> None:
    """Write the corpus record of the run in `out`: a new run's; a run resumed from before the records
    once its checkpoint is found of this corpus's vocabulary. A resumed run keeps the record it has, and
    a run a refused command would not train (a checkpoint there, no --resume) keeps its own."""
    from neural.training.checkpoint import CHECKPOINT, found, read_checkpoint
    if found(out / CHECKPOINT) is None:
        write_record(out, options)
    elif resume and not (out / RECORD).exists():
        read_checkpoint(out / CHECKPOINT, corpus.vocab.fingerprint())
        write_record(out, options)


def busy(out: str | Path) -> str:
    """The line of a run folder another process trains in."""
    return f"another process is training in {out}: wait for it to finish (then --resume), or choose another --out"


# A resumed run's options that may differ from those it started with: how it goes on, not what it trains (and
# --epochs, "at most this many", where the rate schedule does not span them)
RESUMED_AS_GIVEN = ("device", "threads", "backend", "parallel", "checkpoint_minutes", "max_steps")


def _saved_run(args: argparse.Namespace) -> dict | None:
    """The configuration of the run that `--resume --out RUN` resumes (its checkpoint's), refused in one
    line when RUN holds none (`_check_resume`); None without --resume or --out, or under --parallel, where
    only rank 0's disk need hold the run (its trainer refuses another network there)."""
    if not (args.resume and args.out is not None) or args.parallel:
        return None
    return _resumed_config(args.out)


def _resumed_config(out: str | Path) -> dict:
    """The configuration of the run in `out` (its checkpoint's), refused in one line when there is none (a
    mistyped folder would start a new run) or another process trains there."""
    from neural.training.checkpoint import CHECKPOINT, found, saved_config
    with folder_held(out, busy(out)) if Path(out).is_dir() else nullcontext():
        pass  # (another process training there: that first)
    path = Path(out) / CHECKPOINT
    if found(path) is None:
        raise LMBenchError(f"--resume: no run to resume in {out} (no {CHECKPOINT}): check the folder's name, or "
                           "drop --resume to start a run there")
    return saved_config(path)


def _run_config(args: argparse.Namespace, saved: dict | None):
    """The run to train: the options given, and for each one not given the resumed run's own (`saved`, its
    checkpoint's configuration; `RunConfig.saved_options`), but for those of how it goes on (RESUMED_AS_GIVEN:
    the command's, or their defaults), else the family's or the configuration's default. A run resumed takes
    its seed, precision, objective, epochs, ... as it was started, unless told otherwise (`_check_resume`
    then refuses what it cannot change)."""
    from dataclasses import fields
    from neural.config import RunConfig
    given = {f.name: getattr(args, f.name) for f in fields(RunConfig)[2:] if getattr(args, f.name, None) is not None}
    model, shape = _network(args, saved)
    own = {} if saved is None or model != saved["model"] else {
        key: value for key, value in RunConfig.saved_options(saved).items()
        if key not in ("model", "shape", *RESUMED_AS_GIVEN)}
    return RunConfig(model=model, shape=shape, **_shape_options(args), **{**own, **given})


def _network(args: argparse.Namespace, saved: dict | None) -> tuple[str, dict | None]:
    """The family of the run to train and the shape its options not given take (None: the family's
    defaults): --model's, else a resumed run's own (`saved`, its configuration) and its shape, which the
    run's record holds (a family given that is not the run's is refused by `_check_resume`)."""
    from neural.config import RunConfig
    if saved is None:
        return args.model or RunConfig.model, None
    model = args.model or saved["model"]
    return model, saved["shape"] if model == saved["model"] else None


def _check_resume(args: argparse.Namespace, out: str | Path, config, saved: dict | None = None) -> None:
    """--resume: refused in one line when `out` holds no run to resume, or when an option or a corpus option
    given differs from the run's (`saved`, its checkpoint's configuration, read when not given; its
    corpus.json): the run's record would say it trained so from its start. Under --parallel only rank 0's
    disk need hold the run (its trainer refuses another network there)."""
    from dataclasses import asdict
    from neural.config import RunConfig
    if args.parallel:
        return
    saved, asked = saved or _resumed_config(out), asdict(config)
    free = ("shape", "lr", *RESUMED_AS_GIVEN, "batch_size",  # (the trainer names another batch: its layout)
            *(("epochs",) if config.schedule == "halving" else ()))
    compared = [key for key in saved if key in asked and key not in free]
    saved_values = {**{key: saved[key] for key in compared}, **saved["shape"],
                    "lr": RunConfig.from_saved(saved).peak_lr}
    asked_values = {**{key: asked[key] for key in compared}, **asked["shape"], "lr": config.peak_lr}
    for key, value in saved_values.items():
        if key in asked_values and asked_values[key] != value:
            was = _as_given(key, value, key in saved["shape"])
            raise LMBenchError(f"{_as_given(key, asked_values[key], key in saved['shape'])}: the run in {out} was "
                               f"trained with {was}, and a resumed run keeps its options: resume with "
                               f"{was.replace('no --', 'without --')}, or train another run (another --out)")
    _check_resumed_corpus(args, Path(out))


def _as_given(key: str, value, negatable: bool) -> str:
    """An option as the command line gives it: `--seed 1`, `--direct`, `--no-direct` (`negatable`), `no --bf16`."""
    option = "--" + key.replace("_", "-")
    if not isinstance(value, bool):
        return f"{option} {value}"
    return option if value else f"--no-{option[2:]}" if negatable else f"no {option}"


def _check_resumed_corpus(args: argparse.Namespace, out: Path) -> None:
    """A corpus option given to --resume that differs from the run's corpus.json (a file of other content,
    another threshold): refused in one line naming it."""
    from corpora.cli import FILES, OPTIONS, read_record
    from corpora.text import file_digest
    record = read_record(out)
    if record is None:  # (a run from before the records: the checkpoint's vocabulary is checked)
        return
    entries = {**record.get("files", {}), **{name: record[name] for name in FILES if name in record}}
    for name in OPTIONS:
        value = getattr(args, name, None)
        if value in (None, False):
            continue
        if name in FILES:  # (compared with the digest recorded: the run's file may have moved, this its new place)
            entry = entries.get(name)
            have = entry and entry["path"]
            same = entry is not None and file_digest(Path(value)) == entry["sha256"]
        elif name == "ap_dir":
            have = record.get(name)
            same = have is not None and Path(value).resolve() == Path(have).resolve()
        else:
            have = record.get(name)
            same = have is not None and (list(value) if name == "corpus_split" else value) == have
        if not same:
            option = "--" + name.replace("_", "-")
            was = f"{option} {have}" if have is not None else f"no {option}"
            raise LMBenchError(f"{option} {value}: the run in {out} was trained with {was} ({out / RECORD}), and a "
                               f"resumed run keeps its corpus: resume without {option} (or with the run's), or "
                               "train another run (another --out)")


def _run_files(run: Path) -> dict[str, Path]:
    """Every file of run folder `run` and every corpus file its corpus.json names, by what it is: what no
    output of a command given the run may overwrite."""
    from corpora.cli import FILES, read_record
    if not run.is_dir():
        return {}
    found = {f"the run's {path.name}": path for path in sorted(run.iterdir()) if path.is_file()}
    record = read_record(run) or {}  # (each file's entry checked there: its path and digest)
    for name, entry in {**record.get("files", {}), **{name: record[name] for name in FILES if name in record}}.items():
        found[f"the run's {name} file ({RECORD})"] = Path(entry["path"])
    return found


def _recorded_files(options: dict) -> dict[str, Path]:
    """The corpus files of `options` by the option that names them (those the run's corpus.json records
    included): inputs no output may overwrite."""
    from corpora.cli import FILES
    return {f"--{name.replace('_', '-')}": Path(options[name]) for name in FILES if name in options}


def _check_launch(args: argparse.Namespace) -> None:
    """A bad --device, or --parallel outside torchrun, named before the corpus loads."""
    from neural.training.recipe import resolve_device
    resolve_device(args.device, args.threads)
    if args.parallel:
        from neural.parallel.teams import launch_environment
        launch_environment(args.parallel)


def _connect(args: argparse.Namespace, corpus):
    from neural.training.trainer import join
    return join(args.parallel, len(corpus.vocab), device=args.device, backend=args.backend,
                   threads=args.threads)


def _require_run(run_dir: str) -> None:
    """Refuse a run directory without a trained model before any corpus is prepared."""
    from neural.training.checkpoint import BEST, found
    if found(Path(run_dir) / BEST) is None:
        raise LMBenchError(f"no trained model in {run_dir} (no {BEST}): train there first (lmbench train --out "
                           f"{run_dir}), or let the run finish one epoch")


def run_eval(args: argparse.Namespace) -> dict | None:
    from neural.scoring import score_split
    from neural.training.checkpoint import load_network
    if args.nproc_per_node:
        from neural.parallel.launch import launch
        return launch(args)
    _check_launch(args)
    from neural.training.checkpoint import BEST, CHECKPOINT, OLDER
    options = corpus_options(args, args.dir)
    refuse_overwriting(args, {"--save-logprobs": args.save_logprobs},
                       {f"the run's {name}": Path(args.dir) / name for name in (BEST, CHECKPOINT, *OLDER.values())}
                       | _run_files(Path(args.dir)) | _recorded_files(options))
    if not args.parallel:  # (on several machines, only rank 0's disk need hold the run)
        _require_run(args.dir)
    corpus = load_options(options, use_cache=not args.no_cache)
    if args.parallel and args.oov == "init":
        raise LMBenchError("--oov init grows the vocabulary on one process: drop --parallel")
    team = _connect(args, corpus)
    try:
        model = load_network(args.dir, corpus, bf16=args.bf16, team=team, progress=team.writer)
        started = time.perf_counter()
        logprobs = score_split(model, corpus, args.split, team)  # on every process
        seconds = time.perf_counter() - started
        others = {split: score_split(model, corpus, split, team)
                  for split in ("valid", "test") if split != args.split} if args.save_logprobs else {}
    finally:
        team.close()
    if not team.writer:
        return None
    result = {"dir": args.dir, "split": args.split, "perplexity": float(np.exp(-logprobs.mean())),
              "tokens": int(len(logprobs)), "seconds": round(seconds, 3),
              "tokens_per_s": round(len(logprobs) / seconds, 1)}
    if args.oov == "init":  # the other convention, beside: never one for the other
        from neural import oov
        grown = oov.grow(model.net, corpus, args.split)
        result.update(perplexity_oov_init=float(np.exp(-oov.score(grown).mean())), **oov.summary(grown))
    if args.save_logprobs:
        from mixing import saved
        saved.save(args.save_logprobs, {split: logprobs if split == args.split else others[split]
                                        for split in ("valid", "test")}, corpus)
        result["logprobs"] = str(args.save_logprobs)
    return result


def run_neighbors(args: argparse.Namespace) -> dict:
    from neural import oov
    from neural.training.checkpoint import load_network
    refuse_overwriting(args, {})
    _require_run(args.dir)
    corpus = load_corpus(args, args.dir)
    model = load_network(args.dir, corpus, device="cpu")
    vocab = corpus.vocab
    outside, grown = [w for w in args.words if w not in vocab], None
    if outside and args.oov_from:
        grown = oov.grow(model.net, corpus, args.oov_from)
        outside = [w for w in outside if w not in grown.words]
    if outside:
        where = (f"nor met outside it in {args.oov_from}" if args.oov_from
                 else "(rare words map to <unk>; --oov-from valid|test finds words outside it)")
        raise LMBenchError(f"not in the vocabulary: {', '.join(outside)}; give words of the corpus {where}")
    result = {}
    for word in args.words:
        near = (model.neighbors(vocab.id(word), min(args.k, len(vocab) - 1)) if word in vocab
                else oov.neighbors(grown, word, min(args.k, len(vocab))))  # its initialised vector
        result[word] = {vocab.word(i): round(similarity, 4) for i, similarity in near}
    return result
