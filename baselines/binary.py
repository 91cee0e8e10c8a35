"""A fitted n-gram model in one binary file that opens without parsing: memory-mapped arrays (issue 67).

Public API
----------
`write_binary(model, vocab, path, dtype="float32")`: a back-off model (Katz, Kneser-Ney, one read from an
    ARPA file) or another n-gram model of the suite (`KINDS`: class-based, deleted interpolation, add-one
    unigram, the infini-gram) with its vocabulary; returns the file's n-gram counts (a back-off model's).
`read_binary(path)` -> (model, vocab): the model over memory-mapped arrays, scored and sampled as the one
    written, at once (nothing parsed, sorted or checked but the header and the arrays' sizes).
`is_binary(path)`: whether a file starts as one does.

The file is a safetensors file (the format made for sharing weights: what a network's model files are,
neural/training/weights_file.py): 8 bytes (little-endian u64) giving the length of a JSON header, the
header, then the arrays' bytes, each at an offset the header gives (aligned to its item size). The header
maps each array's name to its dtype, shape and offsets, and its `__metadata__` holds one JSON document
under "lmbench": {"format": FORMAT, "version": VERSION, "kind": ..., "vocab": [words, <unk> first], ...}.
Reading it never unpickles and runs nothing: the header is JSON, the arrays raw numbers (np.memmap).

A back-off model (kind "backoff"), order N over V words, N-grams as the suite's NgramTable holds them
(baselines/counts.py): per order n,
    keys.n       int64 (m_n,)     the sorted keys of order n, 2 <= n <= N (order 1: the ids 0 .. V-1)
    children.n   int64 (m_n + 1,) n < N: the rows of order n + 1 after row i are children.n[i] .. [i + 1] - 1
    logp.n       float (m_n,)     log10 P(w | h) of each row h w (logp.1: (V,))
    logbow.n     float (m_n,)     n < N: log10 back-off weight of each row as a context (0 for none)
with the keys' layout in the document (`key_bits`, `packed`: the orders whose keys pack their ids into an
int64, the others being their prefix's row times V plus the last word). Probabilities and weights are
log10 as in ARPA, float32 (`dtype`, as KenLM's binary files) or float64 (a work folder's rows: their
figures then equal the report's to 1e-12, not float32's 1e-7); -inf is a probability of 0. The scorer
walks these arrays as they are (BackoffModel.walk): one short binary search per order and token among the
children of the row found at the token before.

The other kinds keep what their model scores with, under the same header ("kind" naming it), a back-off
part under the prefix "kn." or "classes." (`KINDS`).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from baselines.backoff import BackoffModel
from baselines.counts import NgramTable, key_bits
from corpora.vocab import UNK, Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import atomic_write

FORMAT = "lmbench n-gram model"
VERSION = 1
KEY = "lmbench"  # the __metadata__ entry holding the document
LN10 = float(np.log(10.0))
DTYPES = {"I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"),
          "F64": np.dtype("<f8"),
          "F32": np.dtype("<f4")}  # the safetensors dtypes used, by their names there
NAMES = {dtype: name for name, dtype in DTYPES.items()}
HEADER_MAX = 1 << 31  # a header longer than this is no file of ours (a vocabulary of 2 GB of words)
FIX = "write it again (`lmbench build-binary MODEL.arpa OUT`, or `lmbench ngram ... --binary OUT`)"


class BinaryBackoff(BackoffModel):
    """A back-off model read from a binary file (`read_binary`)."""

    def _fit(self, corpus) -> None:
        raise LMBenchError("a binary model is read, not fitted: use lmbench.load(path) or baselines.binary.read_binary")


# ---- the container ---------------------------------------------------------------------------------------

def is_binary(path: str | Path) -> bool:
    """Whether `path` starts as a binary model file does (a safetensors header whose document is ours)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8 + 4096)
    except OSError:
        return False
    return head[8:].startswith(b'{"__metadata__": {"' + KEY.encode() + b'": "{\\"format\\": \\"' + FORMAT.encode())


def write_tensors(path: Path, arrays: dict[str, np.ndarray], document: dict) -> None:
    """Write `arrays` and `document` as one safetensors file, atomically (lmbench.files.atomic_write): the
    wider items first, so that every array starts aligned to its item size."""
    names = sorted(arrays, key=lambda name: -np.asarray(arrays[name]).dtype.itemsize)  # (stable: as given)
    header, offset = {"__metadata__": {KEY: json.dumps(document, ensure_ascii=False)}}, 0
    for name in names:
        array = np.asarray(arrays[name])
        dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
        if dtype not in NAMES:
            raise TypeError(f"{name}: an array of dtype {array.dtype} has no place in a binary model")
        header[name] = {"dtype": NAMES[dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the arrays start 8-aligned

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            out.write(struct.pack("<Q", len(text)) + text)
            for name in names:
                np.ascontiguousarray(arrays[name], dtype=DTYPES[header[name]["dtype"]]).tofile(out)

    atomic_write(Path(path), write, fix="free some space, or write the model elsewhere")


def read_tensors(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(document, arrays by name) of a file of `write_tensors`, the arrays memory-mapped read-only. A file
    that is not one (no header, offsets beyond its end, an array of a dtype we never write) is a ValueError."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("it is shorter than a header")
        length = struct.unpack("<Q", head)[0]
        if not 2 <= length <= min(HEADER_MAX, size - 8):
            raise ValueError(f"its header length {length} does not fit the file ({size} bytes)")
        header = json.loads(f.read(length).decode("utf-8"))
    if not isinstance(header, dict) or not isinstance(header.get("__metadata__"), dict) or KEY not in header["__metadata__"]:
        raise ValueError("its header holds no lmbench document (a safetensors file of something else?)")
    document = json.loads(header.pop("__metadata__")[KEY])
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"its document is not an {FORMAT!r} (a network's model file?)")
    if document.get("version") != VERSION:
        raise ValueError(f"it is of version {document.get('version')!r} of the format, and this lmbench reads "
                         f"version {VERSION}")
    start, arrays = 8 + length, {}
    for name, entry in header.items():
        dtype, shape, (begin, end) = DTYPES[entry["dtype"]], tuple(int(d) for d in entry["shape"]), entry["data_offsets"]
        count = int(np.prod(shape, dtype=np.int64))
        if not (0 <= begin and end == begin + count * dtype.itemsize and start + end <= size
                and (start + begin) % dtype.itemsize == 0):
            raise ValueError(f"its array {name} lies outside the file, or is not aligned")
        arrays[name] = (np.asarray(np.memmap(path, dtype=dtype, mode="r", offset=start + begin, shape=shape))
                        if count else np.zeros(shape, dtype=dtype))
    return document, arrays


# ---- back-off models -------------------------------------------------------------------------------------

def backoff_arrays(model: BackoffModel, dtype, prefix: str = "") -> tuple[dict, dict[str, np.ndarray]]:
    """(the document's part, the arrays) of a fitted back-off model, log10 values in `dtype`."""
    table, N = model.table, model.order
    arrays = {}
    with np.errstate(divide="ignore"):
        for n in range(1, N + 1):
            if n > 1:
                arrays[f"{prefix}keys.{n}"] = np.asarray(table.keys[n], dtype=np.int64)
            if n < N:
                arrays[f"{prefix}children.{n}"] = table.child_starts(n)
                arrays[f"{prefix}logbow.{n}"] = (np.asarray(model.logbow[n], np.float64) * (model.scale / LN10)).astype(dtype)
            arrays[f"{prefix}logp.{n}"] = (np.asarray(model.logp[n], np.float64) * (model.scale / LN10)).astype(dtype)
    part = {"order": N, "vocab_size": table.vocab_size, "key_bits": table.bits,
            "packed": [n for n in range(2, N + 1) if table.packed[n]], "base": 10,
            "ngrams": {str(n): table.size(n) for n in range(1, N + 1)}}
    return part, arrays


def backoff_model(part: dict, arrays: dict[str, np.ndarray], prefix: str = "") -> BinaryBackoff:
    """The back-off model of `backoff_arrays`' part and arrays (memory-mapped: nothing copied)."""
    N, V = int(part["order"]), int(part["vocab_size"])
    if not BinaryBackoff.min_order <= N <= BinaryBackoff.max_order or V < 1:
        raise ValueError(f"its order {N} or vocabulary size {V} is out of range")
    if part.get("key_bits") != key_bits(V) or part.get("base") != 10:
        raise ValueError("its keys or values are laid out as this lmbench does not read them")

    def get(name: str, length: int) -> np.ndarray:
        array = arrays.get(prefix + name)
        if array is None or array.ndim != 1 or len(array) != length:
            raise ValueError(f"its array {prefix + name} is missing or not of {length} entries")
        return array

    table = NgramTable(V, {}, order=N, packed=None if part.get("packed") else False)
    if [n for n in range(2, N + 1) if table.packed[n]] != list(part.get("packed", [])):
        raise ValueError(f"its packed orders {part.get('packed')} are not those of {V} words")
    sizes = [0, V] + [int(part["ngrams"][str(n)]) for n in range(2, N + 1)]
    for n in range(2, N + 1):
        table.grams.append(None)  # (decoded from the keys when asked: NgramTable.gram_rows)
        table.keys.append(get(f"keys.{n}", sizes[n]))
    for n in range(1, N):
        table._child_starts[n] = get(f"children.{n}", sizes[n] + 1)
    model = BinaryBackoff(N)
    model.scale = LN10
    model.set_parameters(table, [None] + [get(f"logp.{n}", sizes[n]) for n in range(1, N + 1)],
                         [None] + [get(f"logbow.{n}", sizes[n]) for n in range(1, N)])
    return model


# ---- files -----------------------------------------------------------------------------------------------

def _kind(model) -> str:
    for kind, (cls, _, _) in KINDS.items():
        if isinstance(model, _class(cls)):
            return kind
    raise LMBenchError(f"{type(model).__name__} has no binary form: give a back-off, class-based, deleted-interpolation, "
                       "add-one unigram or infini-gram model")


def write_binary(model, vocab: Vocabulary, path: str | Path, dtype: str = "float32", *,
                 row: dict | None = None) -> dict[int, int]:
    """Write fitted `model` over `vocab` as a binary file (module docstring); returns a back-off model's
    n-gram counts per order ({} for another kind). `row`: the id and fingerprint of the work folder's row the
    model is kept for (reports.running.pipeline), in its document (`kept_row`)."""
    if getattr(model, "vocab_size", None) != len(vocab):
        raise LMBenchError(f"the vocabulary has {len(vocab)} words but the model {getattr(model, 'vocab_size', None)}: "
                           "pass the vocabulary of the corpus the model was fitted on (fitted first)")
    if dtype not in ("float32", "float64"):
        raise LMBenchError(f"dtype {dtype!r}: give float32 or float64")
    kind = _kind(model)
    part, arrays = KINDS[kind][1](model, np.dtype(dtype))
    document = {"format": FORMAT, "version": VERSION, "kind": kind, "vocab": list(vocab.words), "unk": UNK,
                "dtype": dtype, **part, **({"row": row} if row is not None else {})}
    write_tensors(Path(path), arrays, document)
    return {int(n): int(m) for n, m in part.get("ngrams", {}).items()}


def kept_row(path: str | Path) -> dict | None:
    """The row (id and fingerprint) a work folder's kept model was written for (`write_binary`'s row), None
    where the file records none (written by build-binary, or before the kept models recorded their row); a
    file that is none is a ValueError."""
    row = read_tensors(Path(path))[0].get("row")
    if row is not None and not (isinstance(row, dict) and all(isinstance(row.get(k), str) for k in ("id", "fingerprint"))):
        raise ValueError(f"its row {row!r:.60} is not an id and a fingerprint")
    return row


def read_binary(path: str | Path):
    """(model, vocabulary) of a binary file; a file that is none, or damaged, is a ValueError (callers read
    it through lmbench.files.read_checked, which makes that one line naming the file)."""
    document, arrays = read_tensors(Path(path))
    words = document.get("vocab")
    if not (isinstance(words, list) and words and words[0] == UNK and all(isinstance(w, str) for w in words)):
        raise ValueError("its vocabulary is not a list of words starting with <unk>")
    vocab = Vocabulary(words)
    kind = document.get("kind")
    if kind not in KINDS:
        raise ValueError(f"it holds a model of kind {kind!r}, which this lmbench does not read "
                         f"({', '.join(KINDS)})")
    model = KINDS[kind][2](document, arrays)
    if model.vocab_size != len(vocab):
        raise ValueError(f"its model has {model.vocab_size} words and its vocabulary {len(vocab)}")
    return model, vocab


# ---- the other kinds: what each model scores with ---------------------------------------------------------

def _backoff_write(model, dtype):
    return backoff_arrays(model, dtype)


def _backoff_read(document, arrays):
    return backoff_model(document, arrays)


def _unigram_write(model, dtype):
    return {"vocab_size": model.vocab_size}, {"log_p": np.asarray(model.log_p, np.float64)}


def _unigram_read(document, arrays):
    from baselines.unigram import AddOneUnigram
    model = AddOneUnigram()
    model.vocab_size, model.log_p = int(document["vocab_size"]), _vector(arrays, "log_p", int(document["vocab_size"]))
    return model


def _class_write(model, dtype):
    part, arrays = backoff_arrays(model.class_model, dtype, prefix="classes.")
    arrays.update({"word_class": model.word_class.astype(np.int64),
                   "log_word_given_class": np.asarray(model.log_word_given_class, np.float64)})
    return {"vocab_size": model.vocab_size, "num_classes": model.class_model.vocab_size, "classes": part}, arrays


def _class_read(document, arrays):
    from baselines.class_ngram import ClassNgram
    V, C = int(document["vocab_size"]), int(document["num_classes"])
    class_model = backoff_model(document["classes"], arrays, prefix="classes.")
    model = ClassNgram(lambda: class_model, C)
    model.order, model.vocab_size = model.class_model.order, V
    model.word_class = _vector(arrays, "word_class", V)
    model.log_word_given_class = _vector(arrays, "log_word_given_class", V)
    if model.class_model.vocab_size != C or (V and not 0 <= int(model.word_class.min()) <= int(model.word_class.max()) < C):
        raise ValueError(f"its word classes are not classes of its class model ({C})")
    return model


def _deleted_interpolation_write(model, dtype):
    arrays = {"unigram": model.unigram, "bigram_context": model.bigram_context, "weights": model.weights}
    for name in ("bigram", "trigram", "trigram_context"):
        table = getattr(model, name)
        arrays[f"{name}.keys"], arrays[f"{name}.counts"] = np.asarray(table.keys), np.asarray(table.counts)
    return {"vocab_size": model.vocab_size, "tokens": int(model.T), "num_buckets": int(model.num_buckets)}, arrays


def _deleted_interpolation_read(document, arrays):
    from baselines.deleted_interpolation import CountTable, DeletedInterpolationTrigram
    V = int(document["vocab_size"])
    model = DeletedInterpolationTrigram()
    model.vocab_size, model.T, model.num_buckets = V, int(document["tokens"]), int(document["num_buckets"])
    model.unigram, model.bigram_context = _vector(arrays, "unigram", V), _vector(arrays, "bigram_context", V)
    model.weights = arrays["weights"]
    if model.weights.shape != (model.num_buckets, 4):
        raise ValueError(f"its weights are not {model.num_buckets} buckets of 4")
    for name in ("bigram", "trigram", "trigram_context"):
        keys = arrays[f"{name}.keys"]
        setattr(model, name, CountTable(keys, _vector(arrays, f"{name}.counts", len(keys))))
    return model


def _infini_gram_write(model, dtype):
    part, arrays = backoff_arrays(model.kn, dtype, prefix="kn.")
    index = model.index
    arrays.update({"index.tokens": index.tokens, "index.sa": index.sa, "index.keys": index.keys,
                   "weights": model.weights})
    return {"vocab_size": model.vocab_size, "max_context": model.max_context, "kn": part}, arrays


def _infini_gram_read(document, arrays):
    from baselines.infinigram import InfiniGram, SuffixIndex, UnboundedNgram
    V = int(document["vocab_size"])
    model = InfiniGram(int(document["kn"]["order"]), max_context=int(document["max_context"]))
    model.vocab_size = V
    model.kn = backoff_model(document["kn"], arrays, prefix="kn.")
    model.index = SuffixIndex.from_arrays(arrays["index.tokens"], arrays["index.sa"], arrays["index.keys"], V)
    model.sparse = UnboundedNgram(model.index, V, model.max_context)
    model.weights = arrays["weights"]
    return model


def _vector(arrays: dict, name: str, length: int) -> np.ndarray:
    array = arrays.get(name)
    if array is None or array.shape != (length,):
        raise ValueError(f"its array {name} is missing or not of {length} entries")
    return array


def _class(name: str):
    module, _, attribute = name.rpartition(".")
    import importlib
    return getattr(importlib.import_module(module), attribute)


# kind: (the model's class, its arrays and document part, the model from them); a subclass before its base
KINDS = {
    "class": ("baselines.class_ngram.ClassNgram", _class_write, _class_read),
    "deleted-interpolation": ("baselines.deleted_interpolation.DeletedInterpolationTrigram",
                              _deleted_interpolation_write, _deleted_interpolation_read),
    "add-one-unigram": ("baselines.unigram.AddOneUnigram", _unigram_write, _unigram_read),
    "infini-gram": ("baselines.infinigram.InfiniGram", _infini_gram_write, _infini_gram_read),
    "backoff": ("baselines.backoff.BackoffModel", _backoff_write, _backoff_read),
}
