"""A comparison under several seeds (`reproduce --seeds K`): the copies of the rows with a network in them that
the further seeds run, and a row's figures over its seeds' runs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from corpora.corpus import SPLITS
from lmbench import bootstrap
from lmbench.errors import LMBenchError
from reports.experiments import Row
from reports.records import seeds_centre
from reports.running.row_runner import runner


def seed_copies(rows: list[Row], seeds: list[int], networks: tuple[str, ...] = ()) -> dict[str, list[Row]]:
    """The copies of each row with a network in it (of those whose ids `networks` names, when it names
    any) for `seeds` (the seeds after the run's first), by the row's id: a network's copy `<id>-seed<s>`
    names its seed in its config (neural.config.RunConfig.seed) and keeps no word features; a mixture's
    mixes the copies of its network parts of the same seed (and the one run of a part not copied)."""
    unknown = [name for name in networks if name not in [row.id for row in rows if row.family]]
    if unknown:
        raise LMBenchError(f"--seeds-for {','.join(unknown)}: no network row of that id in this table; its network "
                           f"rows: {','.join(row.id for row in rows if row.family)}")
    copies: dict[str, list[Row]] = {}
    for row in sorted(rows, key=lambda r: runner(r).stage):  # networks before the mixtures of them
        if row.family and (not networks or row.id in networks):
            copies[row.id] = [replace(row, id=f"{row.id}-seed{seed}", config={**row.config, "seed": seed},
                                      word_vectors=False) for seed in seeds]
        elif any(part in copies for part in row.parts):
            copies[row.id] = [replace(row, id=f"{row.id}-seed{seed}",
                                      parts=tuple(copies[part][i].id if part in copies else part for part in row.parts))
                              for i, seed in enumerate(seeds)]
    return copies


PERPLEXITIES = tuple(f"{split}_ppl{suffix}" for split in SPLITS for suffix in ("", "_no_unk"))


def over_seeds(seeds: list[int], *runs: dict) -> dict:
    """A row from its runs under `seeds` (the row's own result, then its seed copies'): the first seed's
    record (fingerprint, configuration, curve, weights), each perplexity the geometric mean of the seeds'
    perplexities (the centre of its blocks' interval and of the claims on it: one centre) with their
    sample standard deviation beside it (`test_ppl_sd`, ...), every seed's
    figures in `seeds` ([{seed, valid_ppl, test_ppl, ..., seconds}]), seconds those of all the runs,
    and the blocks of the seeds' mean log-probabilities with their intervals (`bootstrap.mean_blocks`:
    a claim on the row tests the seeds' mean, not the first seed). One run (one seed, or a row without
    a network) is the row as it is."""
    first = runs[0]
    if len(runs) == 1 or first.get("status") == "not run":
        return first
    figures = [key for key in PERPLEXITIES if first.get(key) is not None]
    combined = {**first, "seconds": sum(run["seconds"] for run in runs),
                "seeds": [{"seed": seed, **{key: run[key] for key in figures}, "seconds": run["seconds"],
                           **({"weights": run["weights"]} if "weights" in run else {})}
                          for seed, run in zip(seeds, runs)]}
    for key in figures:  # one centre: the geometric mean, the perplexity of the seeds' mean log-probability
        combined[key] = seeds_centre(combined["seeds"], key)
        combined[f"{key}_sd"] = float(np.std([run[key] for run in runs], ddof=1))
    if all("blocks" in run for run in runs):  # the interval and the paired tests of the seeds' mean
        combined["blocks"] = {split: bootstrap.mean_blocks([run["blocks"][split] for run in runs])
                              for split in first["blocks"]}
        combined.update(bootstrap.intervals(combined["blocks"]))
    return combined
