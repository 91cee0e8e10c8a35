"""A run's files on disk, for every family: the checkpoint (checkpoint.pt), the best model (best.pt), their
one format, and the one loader of a trained run.

Both files are written atomically (`atomic_save`: a reader never sees half a file, a full disk keeps the
last good one) and hold the family (`family`), its shape (`network`, `dataclasses.asdict`, as nanoGPT
keeps its `model_args`), the run's configuration (`config`), the vocabulary's fingerprint and size and
the state_dict: family + shape + objective + |V| + state rebuild the network (`load_network`). The
checkpoint adds what an exact resume needs: the optimizer's state, every random state (torch, CUDA,
numpy, the objective's sampler), the run's state (`neural.training.trainer.TrainState`), the batches'
layout (`batch`, and `steps` for lanes) and the state a recurrent network carries between updates.

Files written before this format (FORMAT 2) still load: a window run's kept its shape inside `config`
(`saved_network`), a stream run's named its lanes `lanes`; `read_checkpoint` reads both as this format.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
from pathlib import Path

import torch

from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, atomic_write_file
from neural.config import OBJECTIVES, RunConfig
from neural.families import NetworkShape, family

CHECKPOINT, BEST, LOG, RESULT = "checkpoint.pt", "best.pt", "log.jsonl", "result.json"
LOGPROBS = "logprobs.npz"  # the best model's per-token log-probabilities of valid and test (mixing.saved)
FORMAT = 2  # family, network and config at the top of every file (1: the two trainers' formats)


@dataclasses.dataclass(frozen=True)
class Advice:
    """What the line of a run stopped by a failed write or a divergence tells its user to do, in the words
    of the command that trains it (`lmbench train`'s here; a comparison's row gives its own)."""
    resume: str = "run again with --resume (it continues from the last good checkpoint)"
    diverged: str = ("lower the learning rate (--lr) and start again (a resumed run keeps its options: another "
                     "--out, or delete this run)")


def atomic_save(obj, path: Path, advice: Advice = Advice()) -> None:
    """torch.save, atomically: a reader never sees half a checkpoint, and a failed write (a full disk: one
    line) keeps the last good one, from which the run continues when started again."""
    atomic_write_file(path, lambda out: torch.save(obj, out), fix=f"free space under {Path(path).parent} and "
                      f"{advice.resume}")


def saved_file(net, config: RunConfig, fingerprint: str, **more) -> dict:
    """What every file of a run holds: the network's family, shape and state, the run's configuration and
    the vocabulary's fingerprint and size, and `more`."""
    return {"format": FORMAT, "family": config.model, "network": dataclasses.asdict(net.shape),
            "config": dataclasses.asdict(config), "fingerprint": fingerprint, "vocab_size": net.vocab_size, **more}


def read_checkpoint(path: Path, fingerprint: str, config: RunConfig | None = None) -> dict:
    """A checkpoint or best model in this format (an older one read as this format), refused in one line
    when it is not an lmbench file, was made for another vocabulary, or (given `config`) for another
    family, shape, recipe or objective than the run that resumes it."""
    state = _read(path)
    if state.get("fingerprint") != fingerprint:
        raise LMBenchError(f"checkpoint {path} was trained on another vocabulary (fingerprint "
                           f"{state.get('fingerprint')} vs this corpus's {fingerprint}): use the corpus "
                           "and corpus options it was trained with, or another --out directory")
    state = upgraded(state)
    if config is not None:
        model, shape = state["family"], family(state["family"]).shape_of(state["network"])
        diff = [f"model={model} (asked {config.model})"] if model != config.model else []
        diff += [f"{k}={v} (asked {getattr(config.shape, k, None)})" for k, v in dataclasses.asdict(shape).items()
                 if getattr(config.shape, k, None) != v]
        if diff:
            raise LMBenchError(f"checkpoint {path} has another network: {', '.join(diff)}; resume with the same "
                               "--model and shape options (--n, --h, ...) or use another --out directory")
        for key in ("recipe", "objective"):
            if state["config"].get(key) != getattr(config, key):
                raise LMBenchError(f"checkpoint {path} was trained with {key} {state['config'].get(key)!r}, not "
                                   f"{getattr(config, key)!r}: resume with --{key} {state['config'].get(key)} or "
                                   "use another --out")
    return state


def saved_config(path: Path) -> dict:
    """The configuration a checkpoint or best model was trained with (`dataclasses.asdict` of its
    RunConfig, its family and shape as the file holds them; an older file's read as this format's)."""
    state = upgraded(_read(path))
    return {**state["config"], "model": state["family"], "shape": state["network"]}


def _read(path: Path) -> dict:
    """The dict of a checkpoint or best model as saved; a DamagedFile when it is none, or its weights are
    not finite."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(state, dict):
            raise ValueError(f"it holds a {type(state).__name__}, not an lmbench checkpoint")
        weights = state.get("model")
        bad = next((name for name, value in (weights.items() if isinstance(weights, dict) else ())
                    if torch.is_tensor(value) and value.is_floating_point() and not torch.isfinite(value).all()), None)
        if bad is not None:
            raise ValueError(f"its weights {bad} hold NaN or infinity")
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as err:
        raise DamagedFile(path, str(err) or type(err).__name__, "checkpoint",
                          "delete it and train again, or point at another run directory") from None
    return state


def upgraded(state: dict) -> dict:
    """A file of FORMAT 1 read as FORMAT 2: a window run's family and shape from its config (one from
    before the energy network has no model: an NPLM; one from before the shapes kept its fields beside the
    others), a stream run's lanes as its batch; a stream run's recipe, which its trainer never read, is
    the adamw it trained with."""
    if state.get("format", 1) >= FORMAT:
        return state
    state = dict(state)
    if "family" not in state:
        state["family"], shape = saved_network(state["config"])
        state["network"] = dataclasses.asdict(shape)
    else:
        state["config"] = {**state["config"], "recipe": "adamw"}
    if "lanes" in state:
        state["batch"] = state.pop("lanes")
    state["format"] = FORMAT
    return state


def saved_network(config: dict) -> tuple[str, NetworkShape]:
    """The family and shape of a FORMAT 1 window run's config (`dataclasses.asdict` of its configuration)."""
    entry = family(config.get("model", "nplm"))
    values = config.get("shape")
    if values is None:
        values = {k: config[k] for k in entry.shape_fields() if k in config}
    return entry.name, entry.shape_of(values)


def load_network(out_dir: str | Path, corpus, *, device: str | torch.device = "auto", bf16: bool = False,
                 which: str = BEST, threads: int | None = None, factored: bool = True, team=None,
                 progress: bool = False):
    """The best model of a run (or its last checkpoint, which=CHECKPOINT) of any family, checked against
    the vocabulary of `corpus`, the corpus it was trained on, behind the suite's interface
    (`neural.scoring.language_model`). factored=False scores a network with a class layer by the full
    softmax of y instead; `progress`: its scoring shows a bar. With a `team` (which then sets the
    device): read on rank 0 and placed on every process (under "vocab", each its block)."""
    from neural.scoring import language_model
    from neural.training.recipe import resolve_device
    from neural.training.team import Team
    path = Path(out_dir) / which

    def read() -> dict:
        if not path.exists():
            raise LMBenchError(f"no {which} in {out_dir}: train there first (lmbench train --out {out_dir}), or "
                               "let it finish one epoch")
        return read_checkpoint(path, corpus.vocab.fingerprint())

    saved = read() if team is None else team.from_rank0(read)
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
