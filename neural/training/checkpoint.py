"""A run's files on disk, for every family: the checkpoint (checkpoint.safetensors), the best model
(best.safetensors), their one format, the one reader of both and the one loader of a trained run.

Both files hold no code (issue 67): safetensors files (`neural.training.weights_file`: the tensors as the
file's tensors, everything else as one JSON document in its header), read without pickle, so a model
folder from anyone can at worst be refused. They are written atomically (`atomic_save`: a reader never
sees half a file, a full disk keeps the last good one) and hold the family (`family`), its shape
(`network`, `dataclasses.asdict`, as nanoGPT keeps its `model_args`), the run's configuration
(`config`), the vocabulary's fingerprint and size, the digest of the corpus it was trained on (`corpus`,
compared where a work folder's row is read: `network_mismatch`) and the state_dict (`model`): family + shape +
objective + |V| + state rebuild the network (`load_network`). The checkpoint adds what an exact resume
needs: the optimizer's state, every random state (torch, CUDA, numpy, the objective's sampler), the run's
state (`neural.training.trainer.TrainState`), the batches' layout (`batch`, and `steps` for lanes) and
the state a recurrent network carries between updates.

Every reader goes through `read_state` (`read_checkpoint`, `saved_config`, `load_network`). Files written
before this format (FORMAT 1 and 2: checkpoint.pt, best.pt, torch pickles) are read where a run folder has
no file of this format, by torch's weights_only reader (tensors and plain containers, and numpy's random
state: what lmbench wrote), and converted once `read_checkpoint` finds it the run's: the file of this format
is written beside the old one (left as it was) and read from then on. An old file holding anything else,
which reading could run code of, is refused unread in one line: train the run again. `upgraded` reads the older formats' fields as this format's (a
FORMAT 1 window run kept its shape inside `config`, a stream run named its lanes `lanes`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pickle
import zipfile
from pathlib import Path

import numpy as np
import torch

from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, atomic_write_file
from neural.config import OBJECTIVES, RunConfig
from neural.families import NetworkShape, family
from neural.training import weights_file

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy 1
    from numpy.core.multiarray import _reconstruct

log = logging.getLogger(__name__)

CHECKPOINT, BEST, LOG, RESULT = "checkpoint.safetensors", "best.safetensors", "log.jsonl", "result.json"
LOGPROBS = "logprobs.npz"  # the best model's per-token log-probabilities of valid and test (mixing.saved)
FORMAT = 3  # safetensors (2: family, network and config at the top of a torch pickle; 1: the two trainers')
OLDER = {CHECKPOINT: "checkpoint.pt", BEST: "best.pt"}  # the files of FORMAT 1 and 2 (torch pickles)
DAMAGED_FIX = "delete it and train again, or point at another run directory"


@dataclasses.dataclass(frozen=True)
class Advice:
    """What the line of a run stopped by a failed write or a divergence tells its user to do, in the words
    of the command that trains it (`lmbench train`'s here; a comparison's row gives its own)."""
    resume: str = "run again with --resume (it continues from the last good checkpoint)"
    diverged: str = ("lower the learning rate (--lr) and start again (a resumed run keeps its options: another "
                     "--out, or delete this run)")
    lanes: str = "give fewer --batch-size (the lanes)"  # a training split too short for a stream network's lanes
    other: str = ""  # a checkpoint of another network, recipe or objective in the folder ("": `read_checkpoint`'s)


def atomic_save(obj: dict, path: Path, advice: Advice = Advice()) -> None:
    """`obj` as a safetensors file (`neural.training.weights_file`), atomically: a reader never sees half a
    checkpoint, and a failed write (a full disk: one line) keeps the last good one, from which the run
    continues when started again."""
    atomic_write_file(path, lambda out: weights_file.write_into(obj, out),
                      fix=f"free space under {Path(path).parent} and {advice.resume}")


def saved_file(net, config: RunConfig, fingerprint: str, **more) -> dict:
    """What every file of a run holds: the network's family, shape and state, the run's configuration and
    the vocabulary's fingerprint and size, and `more`."""
    return {"format": FORMAT, "family": config.model, "network": dataclasses.asdict(net.shape),
            "config": dataclasses.asdict(config), "fingerprint": fingerprint, "vocab_size": net.vocab_size, **more}


def read_checkpoint(path: Path, fingerprint: str, config: RunConfig | None = None, fix: str = "") -> dict:
    """A checkpoint or best model in this format (an older one read as this format, and converted once it
    passes the checks: `converted`), refused in one line when it is not an lmbench file, was made for
    another vocabulary, or (given `config`) for another family, shape, recipe or objective than the run
    that resumes it (`fix`: what that line tells its user to do, where not `lmbench train`'s options)."""
    source = found(path) or Path(path)
    state = read_state(path)
    if state.get("fingerprint") != fingerprint:
        raise LMBenchError(f"checkpoint {source} was trained on another vocabulary (fingerprint "
                           f"{state.get('fingerprint')} vs this corpus's {fingerprint}): use the corpus "
                           "and corpus options it was trained with, or another --out directory")
    state = upgraded(state)
    if config is not None:
        model, shape = state["family"], family(state["family"]).shape_of(state["network"])
        diff = [f"model={model} (asked {config.model})"] if model != config.model else []
        diff += [f"{k}={v} (asked {getattr(config.shape, k, None)})" for k, v in dataclasses.asdict(shape).items()
                 if getattr(config.shape, k, None) != v]
        if diff:
            raise LMBenchError(f"checkpoint {source} has another network: {', '.join(diff)}; " + (
                fix or "resume with the same --model and shape options (--n, --h, ...) or use another --out directory"))
        for key in ("recipe", "objective"):
            if state["config"].get(key) != getattr(config, key):
                raise LMBenchError(f"checkpoint {source} was trained with {key} {state['config'].get(key)!r}, not "
                                   f"{getattr(config, key)!r}: " + (fix or f"resume with --{key} "
                                                                    f"{state['config'].get(key)} or use another --out"))
    if source != Path(path):  # a file of the older format, found to be this run's: converted
        converted(state, Path(path), source)
    return state


def saved_config(path: Path) -> dict:
    """The configuration a checkpoint or best model was trained with (`dataclasses.asdict` of its
    RunConfig, its family and shape as the file holds them; an older file's read as this format's)."""
    state = upgraded(read_state(path))
    return {**state["config"], "model": state["family"], "shape": state["network"]}


def found(path: Path) -> Path | None:
    """The file that holds the state of `path` (a run folder's CHECKPOINT or BEST): itself, else the file of
    the older format in its place (`OLDER`: a run trained before FORMAT 3), else None."""
    path = Path(path)
    if path.exists():
        return path
    older = path.with_name(OLDER[path.name]) if path.name in OLDER else None
    return older if older is not None and older.exists() else None


def read_state(path: Path) -> dict:
    """The dict of checkpoint or best model `path` as saved, read without pickle: the one reader of a run's
    model files. Where `path` is missing and the file of the older format is in its place (`found`), that
    one is read with torch's weights_only reader (`read_checkpoint` then converts it, once it is found to be
    the run's). A DamagedFile when it is no lmbench file or its weights are not finite; an old file holding
    more than tensors and plain values is refused unread."""
    source = found(path) or Path(path)
    try:
        state = weights_file.read(source) if source.name not in OLDER.values() else _read_older(source)
        if not isinstance(state, dict):
            raise ValueError(f"it holds a {type(state).__name__}, not an lmbench checkpoint")
        weights = state.get("model")
        bad = next((name for name, value in (weights.items() if isinstance(weights, dict) else ())
                    if torch.is_tensor(value) and value.is_floating_point() and not torch.isfinite(value).all()), None)
        if bad is not None:
            raise ValueError(f"its weights {bad} hold NaN or infinity")
    except (OSError, RuntimeError, EOFError, ValueError) as err:
        raise DamagedFile(source, str(err) or type(err).__name__, "checkpoint", DAMAGED_FIX) from None
    return state


# numpy's random state (np.random.get_state(), in every FORMAT 1 and 2 checkpoint) is a uint32 array: its
# pickle names these, which make an array of data and call nothing else (numpy 1 named its module numpy.core)
NUMPY_DATA = [(np.ndarray, "numpy.ndarray"), (np.dtype, "numpy.dtype"),
              (type(np.dtype(np.uint32)), "numpy.dtypes.UInt32DType")] + [
    (_reconstruct, f"{module}.multiarray._reconstruct") for module in ("numpy.core", "numpy._core")]


def _read_older(path: Path) -> dict:
    """A file of FORMAT 1 or 2 (a torch pickle), read by torch's weights_only reader: tensors, plain
    containers and values, and numpy arrays of data; one holding anything else is refused unread, in one
    line, since reading it could run code."""
    if not zipfile.is_zipfile(path):  # (every torch.save since torch 1.6; torch's older format is no lmbench file)
        raise ValueError("it is no file torch.save wrote (no zip archive)")
    try:
        with torch.serialization.safe_globals(NUMPY_DATA):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        reason = str(err).split("WeightsUnpickler error:", 1)[-1].strip().split("\n")[0]
        reason = reason.split(" was not an allowed global")[0][:160]
        raise LMBenchError(f"refused {path}: a model file of lmbench's older format (a pickle) that holds more "
                           f"than tensors and plain values ({reason}), and reading it could run code: nothing of "
                           f"it was run; train the run again (lmbench train writes {BEST} and {CHECKPOINT}, "
                           "which hold no code), or get those files from whoever made it") from None


def converted(state: dict, path: Path, source: Path) -> None:
    """The state read from `source`, a file of the older format, written as this format at `path` beside it
    (which then is read instead); where that cannot be written (a read-only folder) it is read from the old
    file again next time."""
    try:
        atomic_save(upgraded(state), path)
    except (LMBenchError, OSError) as err:
        log.warning("%s read; not converted to %s (%s)", source, path.name, err)
    else:
        log.info("%s converted to %s (safetensors: no code runs reading it; the old file is left as it was)",
                 source, path)


def upgraded(state: dict) -> dict:
    """A file of an older format read as this one. FORMAT 2 holds the same fields (in a pickle). FORMAT 1: a
    window run's family and shape from its config (one from before the energy network has no model: an
    NPLM; one from before the shapes kept its fields beside the others), a stream run's lanes as its batch;
    a stream run's recipe, which its trainer never read, is the adamw it trained with."""
    version = state.get("format", 1)
    if version >= FORMAT:
        return state
    state = dict(state, format=FORMAT)
    if version >= 2:
        return state
    if "family" not in state:
        state["family"], shape = saved_network(state["config"])
        state["network"] = dataclasses.asdict(shape)
    else:
        state["config"] = {**state["config"], "recipe": "adamw"}
    if "lanes" in state:
        state["batch"] = state.pop("lanes")
    return state


def saved_network(config: dict) -> tuple[str, NetworkShape]:
    """The family and shape of a FORMAT 1 window run's config (`dataclasses.asdict` of its configuration)."""
    entry = family(config.get("model", "nplm"))
    values = config.get("shape")
    if values is None:
        values = {k: config[k] for k in entry.shape_fields() if k in config}
    return entry.name, entry.shape_of(values)


def network_mismatch(state: dict, expected: dict) -> list[str]:
    """How the network of `state` (a file read by `read_checkpoint`) differs from `expected`, the configuration
    of the run or row it is read for (`dataclasses.asdict` of its RunConfig, or the `config` a work folder's row
    records): its family, then its shape, recipe, objective and seed, each as `field=saved (expected ...)`, and the
    digest of the corpus it was trained on (`corpus`, corpora.record.corpus_digest, as the trainer records it: a
    network of the same row trained on another corpus of the same vocabulary); [] when it is that run's network
    (what `expected` or an older file does not give is not compared)."""
    if expected.get("model") is not None and state["family"] != expected["model"]:
        return [f"family {state['family']} (the row's: {expected['model']})"]
    diff = []
    if isinstance(expected.get("shape"), dict):
        entry = family(state["family"])
        try:
            want = dataclasses.asdict(entry.shape_of(expected["shape"]))
        except (TypeError, ValueError, LMBenchError):
            want = dict(expected["shape"])
        have = dataclasses.asdict(entry.shape_of(state["network"]))
        diff += [f"{key}={value} (the row's: {want.get(key)})" for key, value in have.items() if want.get(key) != value]
    diff += [f"{key} {state['config'].get(key)} (the row's: {expected[key]})"
             for key in ("recipe", "objective", "seed")
             if expected.get(key) is not None and state["config"].get(key, expected[key]) != expected[key]]
    if expected.get("corpus") is not None and state.get("corpus", expected["corpus"]) != expected["corpus"]:
        diff.append(f"trained on corpus {state['corpus']} (the row's: {expected['corpus']})")
    return diff


def load_network(out_dir: str | Path, corpus, *, device: str | torch.device = "auto", bf16: bool = False,
                 which: str = BEST, threads: int | None = None, factored: bool = True, team=None,
                 progress: bool = False, expected: dict | None = None, fix: str = ""):
    """The best model of a run (or its last checkpoint, which=CHECKPOINT) of any family, checked against
    the vocabulary of `corpus`, the corpus it was trained on, behind the suite's interface
    (`neural.scoring.language_model`). factored=False scores a network with a class layer by the full
    softmax of y instead; `progress`: its scoring shows a bar. With a `team` (which then sets the
    device): read on rank 0 and placed on every process (under "vocab", each its block). `expected`: the
    configuration of the run or row the caller reads it for (`network_mismatch`): a file of another family,
    shape, recipe or objective (another row's, copied there) is refused in one line ending with `fix`."""
    from neural.scoring import language_model
    from neural.training.recipe import resolve_device
    from neural.training.team import Team
    path = Path(out_dir) / which

    def read() -> dict:
        if found(path) is None:
            raise LMBenchError(f"no {which} in {out_dir}: train there first (lmbench train --out {out_dir}), or "
                               "let it finish one epoch")
        return read_checkpoint(path, corpus.vocab.fingerprint())

    saved = read() if team is None else team.from_rank0(read)
    diff = network_mismatch(saved, expected) if expected is not None else []
    if diff:
        raise LMBenchError(f"{found(path)} holds another network than the one trained there ({', '.join(diff)}): "
                           f"{fix or 'point at the run folder of that network, or train this one again'}")
    try:
        entry = family(saved["family"])
    except LMBenchError as missing:
        raise LMBenchError(f"{path} holds a network of family {saved['family']!r}, which this install lacks "
                           f"({missing}): load it with the lmbench version that trained it") from None
    if entry.context == "stream" and ((team is not None and team.mode is not None) or not factored):
        raise LMBenchError(f"{path} holds a {entry.name} network: it is scored on one process by its own output "
                           "layer (drop --parallel)")
    if team is None:
        team = Team(device=device if isinstance(device, torch.device) else resolve_device(device, threads))
    output = OBJECTIVES[saved["config"].get("objective", "softmax")].output  # (no objective: before them)
    structure = entry.network_class().saved_structure(saved["model"])
    net = team.network(entry.name, entry.shape_of(saved["network"]), saved["vocab_size"], output=output,
                       structure=structure)
    net.load_state_dict(saved["model"])
    return language_model(net.to(team.device), bf16=bf16, factored=factored, progress=progress)


def nan_error(step: int, checkpoint_path: Path, value: float | None = None,
              quantity: str = "the training loss", advice: Advice = Advice()) -> LMBenchError:
    what = f"{quantity} became {value}" if value is not None else "a parameter became NaN or inf"
    kept = (f"; the last good checkpoint {checkpoint_path} is kept" if checkpoint_path.exists()
            else "; no checkpoint was written yet")
    return LMBenchError(f"{what} at update {step}: {advice.diverged}{kept}")


def check_finite(result: dict, out: Path) -> None:
    """A best model whose exact perplexity on a split overflows (its tokens given e^-709 or less on average,
    while the epochs' validation stayed finite) has diverged: stopped in one line, its files kept."""
    for key, value in result.items():
        if key.endswith("_perplexity") and not math.isfinite(value):
            raise LMBenchError(f"the best model's {key.replace('_', ' ')} is {value}: the run diverged; lower "
                               f"the learning rate (--lr) and train again (its files are kept in {out})")
