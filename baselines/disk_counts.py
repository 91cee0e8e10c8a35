"""N-gram counting and estimation in bounded memory: sorted runs on disk, merged, order by order.

The in-memory path (baselines/counts.py) holds the whole stream's keys, sort permutations and row
indices of every order at once, about 200 bytes per training token: 3 GB for AP 1989's 14M tokens,
20 GB for a 100M-token corpus. This module computes the same NgramTable, the same counts and the
same per-row prefix and suffix rows with a working set fixed by a memory cap, streaming everything
else through files of a temporary folder, as KenLM's lmplz does (Heafield et al. 2013):

1. Counting, order n = 2 .. N: the n-grams starting in each chunk of C stream positions get their
   keys (packed ids, or the prefix-rank key `row_{n-1}(prefix) * V + w` of counts.py, the prefix
   row read from the order n-1 row file `at`), sorted and counted (counts._unique); each chunk's
   distinct keys, counts and one position of each go to a *run* file, sorted by key.
2. Merging: the runs of an order merged k-way into the order's sorted distinct keys (the same keys
   as the in-memory table, row for row), counts summed, in blocks of B rows.
3. Rows: each chunk's positions mapped to their global rows (`at[n][t]`, searchsorted of the run's
   keys in the merged ones); every row's ids (`grams`) and prefix row from its key, its suffix row
   from one position p of it (`suffix[n][i] = at[n-1][p + 1]`).
4. Estimation (`DiskCounts.estimate`): per order, blocks of whole contexts (rows are sorted, so the
   continuations of a context are contiguous) go through the model's own per-order function, the
   one its in-memory path applies to all rows at once: per-context sums are the same sequential
   bincount sums, so every probability and back-off weight is bit-for-bit the in-memory one.
   Under a count cutoff (backoff.Listing: rows of order >= 3 seen fewer than `min_count` times are
   not listed) each block keeps its listed rows and renumbers them (`listed[n]`, the running count
   of kept rows), and the model's keys and ids are written for the listed rows only: a prefix-rank
   key's prefix row is renumbered too, which keeps the order since the renumbering is increasing.

Columns are raw binary files (`Column`): written by appending blocks, read back by row range
without mapping (so sequential passes keep no pages resident), memory-mapped only for random access
(gathers and the final model's binary searches; an unmapped page costs no memory). Only the final
model's files stay mapped; the folder is deleted as soon as they are, so nothing is left on disk.

Failures. The folder is removed on every exit the process lives through: an error, Ctrl-C, SIGTERM
(the command line turns it into an interruption). A full disk (ENOSPC, EDQUOT, or numpy's short write
without an errno: lmbench.files.missing_bytes) ends in one LMBenchError line naming the folder, the
space the build had used and the fix. Only a build killed outright (kill -9, a power cut) leaves its
folder, named after a hash of the stream and the options; run again, it resumes after the last
finished step (`Workspace.mark`), each step's files being rewritten whole, and gives the same model.
A folder whose manifest cannot be read is refused in one line saying to delete it.

`--memory M` (baselines/cli.py) caps the working arrays of counting, merging and estimation (like
lmplz's -S); the corpus's id streams and the mapped model pages touched while scoring come on top.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from baselines.backoff import CUTOFF_MIN_ORDER
from baselines.counts import NgramTable, _unique, count_of_counts
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write_text, folder_held, missing_bytes
from lmbench.progress import progress_bar

log = logging.getLogger(__name__)

FORMAT = 1                    # bump when the folder's layout changes (an older folder is refused)
COUNT_BYTES_PER_POSITION = 56 # counting one chunk: keys, sort order, sorted keys, inverse, flags (int64 each)
ROW_BYTES = 176               # estimation: ~20 int64 / float64 temporaries per row of a block
MIN_CHUNK = 256               # stream positions per chunk, whatever the cap
MAX_RUNS = 256                # runs per order at most (one merge pass): chunks grow past the cap if need be
MIN_BLOCK = 64                # rows per merge or estimation block, whatever the cap
IN_MEMORY_BYTES_PER_TOKEN = 220  # peak of the in-memory KN 5 per training token (AP 1989: 2.98 GB / 14M)
FOLDER_PREFIX = "lmbench-ngram-"


def bounded(memory: int | None, train: np.ndarray) -> bool:
    """Whether a model estimates in bounded memory: a cap was given and the in-memory path's
    measured need (IN_MEMORY_BYTES_PER_TOKEN) is above it."""
    return memory is not None and len(train) * IN_MEMORY_BYTES_PER_TOKEN > memory


def build_identity(model, train: np.ndarray) -> dict:
    """What the files of a build depend on (its folder is named after it)."""
    return {"model": type(model).__name__, "order": model.order, "vocab_size": model.vocab_size,
            "memory": model.memory, "min_count": model.min_count, "tokens": len(train),
            "stream": stream_digest(train)}


def estimate_bounded(model, train: np.ndarray, statistics: Callable) -> tuple[NgramTable, list, list]:
    """The parameters of a back-off `model` (Katz, KN) estimated in bounded memory: the stream counted
    on disk, then `statistics(counts)` -> (per-order values, log P of the unigrams) (the model's
    counts and discounts), then every order through the model's `_conditional`, the function its
    in-memory path applies to all rows at once, listing the rows of `model.min_count` (its count
    cutoff). The build folder is deleted before returning: the model's files stay mapped until the
    model is freed."""
    with counted(model, train) as counts:
        values, logp1 = statistics(counts)
        return counts.estimate(values, logp1, model._conditional, model.min_count)


@contextmanager
def counted(model, train: np.ndarray) -> Iterator["DiskCounts"]:
    """The counts of orders 1 .. model.order of `train` on disk, for a model with `vocab_size`,
    `memory`, `tmp_dir` and `min_count`; the build folder is deleted once the caller is done (the
    columns it mapped stay readable until freed)."""
    with workspace(model.tmp_dir, build_identity(model, train)) as ws:
        yield DiskCounts(ws, train, model.order, model.vocab_size, model.memory).count()
        ws.remove()


def parse_size(text: str) -> int:
    """Bytes of a size such as 4G, 512M, 300K or 1000000 (powers of 1024); ValueError otherwise."""
    text = text.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:], 1)
    number = float(text[:-1] if scale > 1 else text)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(text)
    return int(number * scale)


class Column:
    """A (rows,) or (rows, width) array of one dtype in a raw binary file."""

    def __init__(self, path: Path, dtype, width: int = 1):
        self.path, self.dtype, self.width = Path(path), np.dtype(dtype), width

    def __len__(self) -> int:
        return self.path.stat().st_size // (self.dtype.itemsize * self.width) if self.path.exists() else 0

    def write(self, blocks: Iterator[np.ndarray]) -> None:
        """Write the column as the concatenation of `blocks` (replacing any earlier content)."""
        with open(self.path, "wb") as out:
            for block in blocks:
                np.ascontiguousarray(block, dtype=self.dtype).tofile(out)

    def read(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Rows [lo, hi) read into memory (no mapping)."""
        hi = len(self) if hi is None else hi
        row = self.dtype.itemsize * self.width
        values = np.fromfile(self.path, dtype=self.dtype, count=max(hi - lo, 0) * self.width, offset=lo * row)
        return values.reshape(-1, self.width) if self.width > 1 else values

    def map(self) -> np.ndarray:
        """The whole column memory-mapped read-only (an empty one as an empty array)."""
        shape = (len(self), self.width) if self.width > 1 else (len(self),)
        if len(self) == 0:
            return np.zeros(shape, dtype=self.dtype)
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=shape)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def folder_name(identity: dict) -> str:
    """The build folder's name: a hash of the stream and every option that changes its files."""
    blob = json.dumps({"format": FORMAT, **identity}, sort_keys=True)
    return FOLDER_PREFIX + hashlib.sha256(blob.encode()).hexdigest()[:16]


class Workspace:
    """The build's folder, with a manifest of the finished steps (and small values they produced)
    so that a killed build resumes."""

    def __init__(self, path: Path, identity: dict):
        self.identity = {"format": FORMAT, **identity}
        self.path = Path(path)
        self.manifest_path = self.path / "manifest.json"
        self.values: dict = {}
        if self.manifest_path.exists() or any(self.path.iterdir()):
            try:
                manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
                if manifest["identity"] != self.identity:
                    raise ValueError("it was written for other options")
                self.values = dict(manifest["values"])
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise LMBenchError(f"{self.path} holds leftover files of an interrupted n-gram build that "
                                   f"cannot be resumed ({err}): delete that folder and run again") from None
            log.info("resuming the n-gram build in %s after %d finished steps", self.path, len(self.values))
        else:
            self._save()

    def _save(self) -> None:
        atomic_write_text(self.manifest_path, json.dumps({"identity": self.identity, "values": self.values}))

    def done(self, step: str) -> bool:
        return step in self.values

    def mark(self, step: str, value=True) -> None:
        """Record `step` as finished (its files are complete), with an optional small value."""
        self.values[step] = value
        self._save()

    def column(self, name: str, dtype, width: int = 1) -> Column:
        return Column(self.path / f"{name}.{np.dtype(dtype).name}", dtype, width)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def stream_digest(stream: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(stream, dtype=np.int32).tobytes()).hexdigest()


@contextmanager
def workspace(tmp_dir: str | Path | None, identity: dict) -> Iterator[Workspace]:
    """The Workspace of a build under `tmp_dir` (default: the system's temporary folder), held under
    an exclusive lock on the folder itself (no lock file is left behind). Any failure or interruption
    removes it (a full disk then raises one LMBenchError line); only a process killed outright leaves
    it, to resume from."""
    root = Path(tmp_dir or tempfile.gettempdir())
    path = root / folder_name(identity)
    ws, used = None, 0
    try:
        with folder_held(path):  # (a folder another process removed while this one waited: locked anew)
            ws = Workspace(path, identity)
            yield ws
    except BaseException as err:
        if ws is not None:
            used = sum(f.stat().st_size for f in ws.path.iterdir() if f.is_file()) if ws.path.exists() else 0
            ws.remove()
        no_room = missing_bytes(err)
        if no_room is None:
            raise
        free = shutil.disk_usage(root).free / 2**20 if root.exists() else 0.0
        raise LMBenchError(f"the temporary folder {root} ran out of disk space while building the n-gram model "
                           f"(it needs more than the {(used + no_room[0]) / 2**20:.1f} MiB written when it "
                           f"filled, {free:.1f} MiB free now); nothing was kept: free space there or give "
                           "--tmp-dir a folder on a larger disk") from None


class DiskCounts:
    """The counts of a stream, orders 1..N, held in the columns of a Workspace (module docstring).

    Columns per order n >= 2: keys, counts, first (a position of each row), grams (m, n), prefix,
    suffix (rows at order n-1); at (row of the n-gram starting at each position, n < N, deleted once
    used); from estimation: logp, logbow, and under a cutoff listed (the listed row number of each row),
    listedkeys, listedgrams (the listed rows'); basekeys (deleted interpolation's keys). `counts1` (V,)
    and `start[n]` (the row of the n-gram that begins the stream) are in memory."""

    def __init__(self, ws: Workspace, stream: np.ndarray, order: int, vocab_size: int, memory: int):
        self.ws, self.order, self.vocab_size = ws, order, int(vocab_size)
        self.stream = np.asarray(stream, dtype=np.int32)
        budget = max(memory - self.stream.nbytes, 0)
        self.chunk = max(MIN_CHUNK, budget // COUNT_BYTES_PER_POSITION, -(-len(self.stream) // MAX_RUNS))
        self.block = max(MIN_BLOCK, budget // ROW_BYTES)
        self.table = NgramTable(vocab_size, {}, order=order)     # for the key scheme; orders 2..N appended
        self.row_dtype = np.int32 if len(self.stream) < 2**31 else np.int64
        self.counts1 = np.bincount(self.stream, minlength=vocab_size).astype(np.int64)
        self.start = {1: int(self.stream[0])}

    def col(self, name: str, n: int, dtype=np.int64, width: int = 1) -> Column:
        return self.ws.column(f"{name}{n}", dtype, width)

    def size(self, n: int) -> int:
        return self.vocab_size if n == 1 else len(self.col("keys", n))

    def count(self) -> "DiskCounts":
        """Steps 1-3 of the module docstring for every order (finished steps are skipped)."""
        for n in range(2, self.order + 1):
            chunks = range(0, len(self.stream) - n + 1, self.chunk)
            at_prev = self.stream if n == 2 else self.col("at", n - 1, self.row_dtype).map()
            for c, s in enumerate(progress_bar(chunks, desc=f"counting {n}-grams", unit="chunk")):
                if not self.ws.done(f"count{n}.{c}"):
                    self._count_chunk(n, c, s, at_prev)
                    self.ws.mark(f"count{n}.{c}")
            if not self.ws.done(f"merge{n}"):
                self._merge(n, len(chunks))
                self.ws.mark(f"merge{n}")
            if n < self.order and not self.ws.done(f"at{n}"):
                self._rows_of_positions(n, len(chunks))
                self.ws.mark(f"at{n}", int(self.col("at", n, self.row_dtype).read(0, 1)[0]))
            if not self.ws.done(f"rows{n}"):
                self._gather(n, at_prev)
                self.ws.mark(f"rows{n}")
            del at_prev
            for c in range(len(chunks)):                         # the runs are merged and mapped
                for name in ("runkeys", "runcounts", "runfirst", "inverse"):
                    self.ws.column(f"{name}{n}.{c}", np.int64 if name != "inverse" else np.int32).remove()
            if n > 2:
                self.col("at", n - 1, self.row_dtype).remove()
        for n in range(2, self.order):
            self.start[n] = int(self.ws.values[f"at{n}"])
        return self

    def _count_chunk(self, n: int, c: int, s: int, at_prev: np.ndarray) -> None:
        """Sort and count the n-grams starting at positions [s, s + chunk): one run."""
        e = min(s + self.chunk, len(self.stream) - n + 1)
        ids = self.stream
        if self.table.packed[n]:
            key = self.table._pack(np.lib.stride_tricks.sliding_window_view(ids[s:e + n - 1], n))
        else:
            key = self.table._extend(n, None, np.asarray(at_prev[s:e]), ids[s + n - 1:e + n - 1])
        keys, first, inverse, count = _unique(key)
        self.ws.column(f"runkeys{n}.{c}", np.int64).write([keys])
        self.ws.column(f"runcounts{n}.{c}", np.int64).write([count])
        self.ws.column(f"runfirst{n}.{c}", np.int64).write([first + s])
        if n < self.order:
            self.ws.column(f"inverse{n}.{c}", np.int32).write([inverse])

    def _merge(self, n: int, runs: int) -> None:
        """k-way merge of the runs of order n into keys, counts, first (blocks of self.block rows)."""
        cols = [{name: self.ws.column(f"{name}{n}.{c}", np.int64) for name in ("runkeys", "runcounts", "runfirst")}
                for c in range(runs)]
        ends = [len(run["runkeys"]) for run in cols]
        per = max(MIN_BLOCK, self.block // max(runs, 1))
        pos = [0] * runs

        def blocks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
            with progress_bar(total=sum(ends), desc=f"merging {n}-grams", unit="row", unit_scale=True) as bar:
                while any(p < e for p, e in zip(pos, ends)):
                    active = [r for r in range(runs) if pos[r] < ends[r]]
                    heads = {r: cols[r]["runkeys"].read(pos[r], min(pos[r] + per, ends[r])) for r in active}
                    bounds = [heads[r][-1] for r in active if pos[r] + len(heads[r]) < ends[r]]
                    parts = []
                    for r in active:  # every copy of a key <= bound is in the heads: take those
                        take = len(heads[r]) if not bounds else int(np.searchsorted(heads[r], min(bounds), "right"))
                        parts.append((heads[r][:take], cols[r]["runcounts"].read(pos[r], pos[r] + take),
                                      cols[r]["runfirst"].read(pos[r], pos[r] + take)))
                        pos[r] += take
                    keys, counts, first = (np.concatenate([p[j] for p in parts]) for j in range(3))
                    order = np.argsort(keys, kind="stable")      # timsort: merges the sorted pieces
                    keys, counts, first = keys[order], counts[order], first[order]
                    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
                    bar.update(len(keys))
                    yield keys[starts], np.add.reduceat(counts, starts), first[starts]

        self._write_together(n, ("keys", "counts", "first"), blocks())

    def _write_together(self, n: int, names: tuple[str, ...], blocks: Iterator[tuple], widths=None) -> None:
        """Write several columns of order n from one iterator of tuples of blocks."""
        widths = widths or [1] * len(names)
        dtypes = [np.int32 if name == "grams" else (self.row_dtype if name in ("prefix", "suffix") else np.int64)
                  for name in names]
        self._write_columns([self.col(name, n, dtype, width) for name, dtype, width in zip(names, dtypes, widths)],
                            blocks)

    @staticmethod
    def _write_columns(cols: list[Column], blocks: Iterator) -> None:
        """Write the columns from one iterator of sequences of blocks (one block per column)."""
        files = [open(col.path, "wb") for col in cols]
        try:
            for parts in blocks:
                for f, col, part in zip(files, cols, parts):
                    np.ascontiguousarray(part, dtype=col.dtype).tofile(f)
        finally:
            for f in files:
                f.close()

    def _rows_of_positions(self, n: int, runs: int) -> None:
        """at[n][t]: the row of the n-gram starting at t, from each run's keys and inverse."""
        keys = self.col("keys", n).map()

        def blocks() -> Iterator[np.ndarray]:
            for c in progress_bar(range(runs), desc=f"rows of {n}-grams", unit="chunk"):
                rows = np.searchsorted(keys, self.ws.column(f"runkeys{n}.{c}", np.int64).read())
                yield rows[self.ws.column(f"inverse{n}.{c}", np.int32).read()]

        self.col("at", n, self.row_dtype).write(blocks())
        del keys

    def _gather(self, n: int, at_prev: np.ndarray) -> None:
        """grams, prefix and suffix rows of every row of order n. The prefix comes from the key (its
        packed prefix searched in order n-1's sorted keys, in increasing order, or the prefix rank
        itself), the ids from the key too (unpacked, or the prefix's ids and the last word); only
        the suffix is gathered at random: at[n-1] one position after a position of the row."""
        keys, first, table = self.col("keys", n), self.col("first", n), self.table
        lower_keys = self.col("keys", n - 1).map() if n > 2 else None
        lower_grams = (self.col("grams", n - 1, np.int32, n - 1).map() if n > 2
                       else np.arange(self.vocab_size, dtype=np.int32)[:, None])

        def blocks() -> Iterator[tuple]:
            for lo in progress_bar(range(0, len(keys), self.block), desc=f"{n}-gram contexts", unit="block"):
                key = keys.read(lo, lo + self.block)
                if table.packed[n]:
                    prefix = key >> table.bits if n == 2 else np.searchsorted(lower_keys, key >> table.bits)
                    shifts = table.bits * np.arange(n - 1, -1, -1)
                    grams = (key[:, None] >> shifts) & ((1 << table.bits) - 1)
                else:
                    prefix = key // self.vocab_size
                    grams = np.column_stack([lower_grams[prefix], key % self.vocab_size])
                yield grams, prefix, at_prev[first.read(lo, lo + self.block) + 1]

        self._write_together(n, ("grams", "prefix", "suffix"), blocks(), widths=[n, 1, 1])
        del lower_keys, lower_grams

    # ---- what the models read ------------------------------------------------------------------

    def continuation_counts(self) -> list[Column | np.ndarray]:
        """KN counts a[n] (kneser_ney.adjusted_counts): a[1] (V,) in memory, a[n] columns; a[N] is the
        raw counts column."""
        a: list = [None] * (self.order + 1)
        a[self.order] = self.col("counts", self.order)
        for n in range(1, self.order):
            if n > 1 and self.ws.done(f"adjusted{n}"):
                a[n] = self.col("adjusted", n)
                continue
            suffix = self.col("suffix", n + 1, self.row_dtype)
            values = np.zeros(self.size(n), dtype=np.int64)
            for lo in range(0, len(suffix), self.block):
                block = suffix.read(lo, lo + self.block)
                values[:block.max() + 1] += np.bincount(block)
            values[self.start[n]] += 1
            if n == 1:
                a[1] = values
            else:
                a[n] = self.col("adjusted", n)
                a[n].write([values])
                self.ws.mark(f"adjusted{n}")
        return a

    def base_keys(self, n: int) -> np.ndarray:
        """Order n's rows keyed by their ids as a number in base V, sum_i id_i V^(n-1-i) (increasing
        too), memory-mapped (V^n must stay below 2^63)."""
        out, grams = self.col("basekeys", n), self.col("grams", n, np.int32, n)
        if not self.ws.done(f"basekeys{n}"):
            powers = self.vocab_size ** np.arange(n - 1, -1, -1, dtype=np.int64)    # (n,)
            out.write(grams.read(lo, lo + self.block).astype(np.int64) @ powers
                      for lo in range(0, len(grams), self.block))
            self.ws.mark(f"basekeys{n}")
        return out.map()

    def raw_counts(self) -> list[Column | np.ndarray]:
        """c[n]: c[1] (V,) in memory, c[n] the count columns."""
        return [None, self.counts1] + [self.col("counts", n) for n in range(2, self.order + 1)]

    def counts_of_counts(self, values: Column | np.ndarray, k: int) -> np.ndarray:
        """count_of_counts over a column, block by block."""
        if isinstance(values, np.ndarray):
            return count_of_counts(values, k)
        return sum((count_of_counts(values.read(lo, lo + self.block), k) for lo in range(0, len(values), self.block)),
                   np.zeros(k + 1, dtype=np.int64))

    def estimate(self, values: list, logp1: np.ndarray, conditional: Callable, min_count: int = 1,
                 ) -> tuple[NgramTable, list, list]:
        """The model's parameters from its per-row values (KN counts, raw counts) order by order:
        `conditional(n, values, context, contexts, lower, keep)` is the model's per-order function over
        a block of rows whose contexts are rows 0 .. contexts-1 of the block (`context` local), `keep`
        the rows it lists (raw count >= `min_count` from order CUTOFF_MIN_ORDER up) and `lower` =
        P(w | h') of each listed row; it returns the listed rows' log P and each context's log weight."""
        logp: list = [np.zeros(0), logp1]
        logbow: list = [np.zeros(0)]
        for n in range(2, self.order + 1):
            if not self.ws.done(f"estimate{n}"):
                self._estimate_order(n, values[n], logp[n - 1], conditional, min_count)
                self.ws.mark(f"estimate{n}")
            logp.append(self.col("logp", n, np.float64).map())
            logbow.append(self.col("logbow", n - 1, np.float64).map())
        table = NgramTable(self.vocab_size, {}, order=self.order)
        for n in range(2, self.order + 1):
            cut = self._cuts(n, min_count)
            table.grams.append(self.col("listedgrams" if cut else "grams", n, np.int32, n).map())
            table.keys.append(self.col("listedkeys" if cut else "keys", n).map())
        return table, logp, logbow

    @staticmethod
    def _cuts(n: int, min_count: int) -> bool:
        """Whether order n lists only some of its rows (backoff.Listing)."""
        return min_count > 1 and n >= CUTOFF_MIN_ORDER

    def _estimate_order(self, n: int, values, lower_logp: np.ndarray, conditional, min_count: int) -> None:
        """Order n in blocks of whole contexts: log P of its listed rows, the log back-off weight of the
        listed rows of order n-1; under a cutoff also the listed rows' numbers, keys and ids."""
        prefix, suffix = self.col("prefix", n, self.row_dtype), self.col("suffix", n, self.row_dtype)
        prefix_map = prefix.map()
        rows, contexts = len(prefix), self.size(n - 1)
        cut, cut_below = self._cuts(n, min_count), self._cuts(n - 1, min_count)
        listed_below = self.col("listed", n - 1, self.row_dtype).map() if cut_below else None
        outputs = [self.col("logp", n, np.float64), self.col("logbow", n - 1, np.float64)]
        if cut:
            outputs += [self.col("listed", n, self.row_dtype), self.col("listedkeys", n),
                        self.col("listedgrams", n, np.int32, n)]

        def blocks() -> Iterator[list[np.ndarray]]:
            r0 = c0 = listed = 0
            with progress_bar(total=rows, desc=f"estimating {n}-grams", unit="row", unit_scale=True) as bar:
                while c0 < contexts:
                    r1 = min(r0 + self.block, rows)                  # whole contexts: cut at a context start
                    c1 = int(prefix_map[r1]) if r1 < rows else contexts
                    if c1 == c0:                                     # one context longer than a block
                        c1 = c0 + 1
                    r1 = int(np.searchsorted(prefix_map, c1)) if c1 < contexts else rows
                    context = prefix.read(r0, r1).astype(np.int64) - c0
                    keep = (self.col("counts", n).read(r0, r1) >= min_count) if cut else np.ones(r1 - r0, bool)
                    lower = suffix.read(r0, r1)[keep]               # rows of order n-1, then listed rows
                    lower = np.exp(lower_logp[listed_below[lower] if cut_below else lower])
                    p, bow = conditional(n, values.read(r0, r1), context, c1 - c0, lower, keep)
                    if cut_below:                                    # the listed contexts' weights
                        bow = bow[self.col("counts", n - 1).read(c0, c1) >= min_count]
                    parts = [p, bow]
                    if cut:
                        grams = self.col("grams", n, np.int32, n).read(r0, r1)[keep]
                        if self.table.packed[n] or not cut_below:
                            keys = self.col("keys", n).read(r0, r1)[keep]
                        else:                                        # prefix rank: the listed prefix row
                            keys = listed_below[prefix.read(r0, r1)[keep]].astype(np.int64) * self.vocab_size
                            keys += grams[:, -1]
                        parts += [listed + np.cumsum(keep) - 1, keys, grams]
                        listed += int(keep.sum())
                    bar.update(r1 - r0)
                    r0, c0 = r1, c1
                    yield parts

        self._write_columns(outputs, blocks())
        del prefix_map, listed_below
