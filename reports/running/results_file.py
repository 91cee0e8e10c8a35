"""What results.json records of a run besides its rows: the run's metadata (commit, versions, machine, wall
time, memory), the run that computed the rows (a rebuilt report keeps the one before it), and the samples
drawn from the best rows."""

from __future__ import annotations

import datetime
import json
import logging
import os
import platform
import sys
from pathlib import Path

import numpy as np

from lmbench import __version__, threads
from lmbench.files import read_checked, write_checked
from reports.work_folder import WorkFolder

log = logging.getLogger(__name__)

# results.json's samples (`samples`): continuations of the first tokens of test, from the best n-gram
# row and the best row of each network family
SAMPLES = {"count": 3, "words": 20, "seed_words": 8}


def run_metadata(seconds: float, code: dict) -> dict:
    """Commit (and whether the tree was clean: `code`, reports.provenance), versions, machine and wall
    time, to stamp the results."""
    import torch

    return {
        "lmbench": __version__, **code,
        "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
                   f"{'CUDA ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}",
        "wall_seconds": round(seconds, 1),
        "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "threads": {"threads": torch.get_num_threads(), **threads.machine_now()},
        "peak_memory_gb": round(peak_memory_bytes() / 1e9, 2),
    }


def peak_memory_bytes() -> int:
    """The run's peak resident memory so far: the process's high-water mark (Linux: kilobytes; macOS: bytes)."""
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def training_run(rows_run: int, seconds: float, code: dict, estimate: dict, report_dir: Path) -> dict:
    """The run that computed the rows, for what a report cost: this run, where it computed any (`rows_run`);
    else (every row from the row cache: a rebuilt report) the one the report it replaces recorded, or none known."""
    if rows_run:
        return {"trained": {"wall_seconds": round(seconds, 1), "peak_memory_gb": round(peak_memory_bytes() / 1e9, 2),
                            "commit": code.get("commit"), **({"estimate": estimate} if estimate else {})}}
    try:
        before = json.loads((Path(report_dir) / "results.json").read_text(encoding="utf-8"))["meta"]
    except (OSError, ValueError, KeyError, TypeError):
        before = {}
    return {"rebuilt": True, **({"trained": before["trained"]} if isinstance(before.get("trained"), dict) else {})}


def samples(rows: list[dict], corpus, work: WorkFolder, seed: int, threads: int | None) -> dict | None:
    """results.json's `samples`: SAMPLES["count"] continuations of the same seed text (the first
    SAMPLES["seed_words"] tokens of test) from the best n-gram row and the best row of each network
    family, on valid, each drawn with the run's seed plus its number (`reports.api.TextModel.generate`);
    kept in the work folder (samples/ID.json) under the row's fingerprint and what was drawn, so that a
    re-run draws nothing again. None when no such row ran."""
    from reports.api import row_model
    scored = [row for row in rows if row["kind"] in ("ngram", "network") and "fingerprint" in row
              and row.get("valid_ppl") is not None]  # (a row of this work folder's cache, run)
    groups = {}
    for row in sorted(scored, key=lambda r: (r["valid_ppl"], r["id"])):
        groups.setdefault("ngram" if row["kind"] == "ngram" else row["family"], row)
    if not groups:
        return None
    seed_text = " ".join(corpus.vocab.decode(corpus.split("test")[:SAMPLES["seed_words"]]))
    drawn = []
    for row in groups.values():
        key = {"fingerprint": row["fingerprint"], "seed_text": seed_text, "seed": seed, **SAMPLES}
        path = work.samples_path(row["id"])
        kept = read_checked(path, lambda p: json.loads(p.read_text(encoding="utf-8")), what="kept samples",
                            fix="delete it to draw them again") if path.exists() else None
        if kept is not None and kept["key"] != key:  # (another row's or run's copied there, or the row run again)
            log.info("%s holds samples of another model or seed text than row %s's: drawn again", path, row["id"])
        if kept is None or kept["key"] != key:
            model = row_model(work.path, row, corpus, threads=threads)
            texts = [" ".join(model.sample(SAMPLES["words"], seed_text, seed + i)) for i in range(SAMPLES["count"])]
            kept = {"key": key, "continuations": texts}
            text = json.dumps(kept, indent=1)
            write_checked(path, lambda target: target.write_text(text, encoding="utf-8"))
        drawn.append({"row": row["id"], "model": row["model"], "test_ppl": row["test_ppl"],
                      "continuations": kept["continuations"]})
    return {"seed_text": seed_text, "seed": seed, "words": SAMPLES["words"], "rows": drawn}
