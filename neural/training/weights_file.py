"""A run's state in one safetensors file, which holds no code: reading it runs none (issue 67).

safetensors (the format made for sharing weights) keeps named tensors and a header of text; a run's
files hold more than tensors (the configuration, the run's state, the optimizer's, numpy's random
state). `flatten` splits any such value into a JSON skeleton and its tensors, `rebuilt` joins them back,
exactly: `write` keeps the tensors as the file's tensors and the skeleton as one JSON document in its
header (`__metadata__`, key "lmbench"); `read` reads both back without pickle (`safetensors.safe_open`,
`json.loads`), so a file from anyone can at worst be refused.

The skeleton is plain JSON (no NaN literal): None, bools, ints (of any size), finite floats, strings,
lists and dicts of string keys stand for themselves; the rest is a one-key object whose key is a tag:
  {"$tensor": NAME}                    a torch tensor, the file's tensor NAME (its path: model/output.W)
  {"$numpy": [NAME, DTYPE, SHAPE]}     a numpy array of numbers or bools: its bytes, the file's uint8
                                       tensor NAME, of numpy dtype DTYPE ("<u4") and SHAPE
  {"$scalar": [NAME, DTYPE]}           a numpy scalar, likewise
  {"$float": "nan" | "inf" | "-inf"}   a float that is not finite
  {"$tuple": [...]}                    a tuple
  {"$dict": [[KEY, VALUE], ...]}       a dict with a key that is no string, or a string key starting with $
                                       (the optimizer's state is keyed by the parameters' numbers)
A tensor is saved contiguous, on the CPU and apart from every other (safetensors keeps no shared storage:
tied weights come back as two equal tensors). Anything else (an object of some class) cannot be saved:
a TypeError, a bug of the caller. A skeleton that is none of these (a file altered, or another program's)
is a ValueError.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

KEY = "lmbench"  # the header's entry holding the skeleton


def flatten(value: Any) -> tuple[Any, dict[str, torch.Tensor]]:
    """The JSON skeleton of `value` and its tensors by name (numpy arrays and scalars among them). A dict
    of another class (a state_dict's OrderedDict) is kept as a dict."""
    tensors: dict[str, torch.Tensor] = {}
    storages: set[int] = set()

    def tensor(t: torch.Tensor, path: str) -> str:
        t = t.detach().cpu()
        storage = t.untyped_storage()
        whole = t.is_contiguous() and t.storage_offset() == 0 and storage.nbytes() == t.numel() * t.element_size()
        if not whole or (t.numel() and storage.data_ptr() in storages):  # a view, or a storage saved already
            t = t.clone(memory_format=torch.contiguous_format)
        if t.numel():
            storages.add(t.untyped_storage().data_ptr())
        name, n = path or "value", 1
        while name in tensors:
            name, n = f"{path}#{n}", n + 1
        tensors[name] = t
        return name

    def array(a: np.ndarray, path: str) -> list:
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{path or 'the value'}: a numpy array of dtype {a.dtype} cannot be saved in a model file")
        raw = np.ascontiguousarray(a).tobytes()
        data = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.zeros(0, dtype=torch.uint8)
        return [tensor(data, path), a.dtype.str, list(a.shape)]

    def walk(v: Any, path: str) -> Any:
        if v is None or type(v) in (bool, int, str):
            return v
        if type(v) is float:
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, torch.Tensor):
            return {"$tensor": tensor(v, path)}
        if isinstance(v, np.ndarray):
            return {"$numpy": array(v, path)}
        if isinstance(v, np.generic):
            return {"$scalar": array(np.asarray(v), path)[:2]}
        if type(v) in (list, tuple):
            items = [walk(x, f"{path}/{i}".lstrip("/")) for i, x in enumerate(v)]
            return items if type(v) is list else {"$tuple": items}
        if isinstance(v, dict):
            if all(type(k) is str and not k.startswith("$") for k in v):
                return {k: walk(x, f"{path}/{k}".lstrip("/")) for k, x in v.items()}
            return {"$dict": [[walk(k, f"{path}/key"), walk(x, f"{path}/{k}".lstrip("/"))] for k, x in v.items()]}
        raise TypeError(f"{path or 'the value'}: a {type(v).__name__} cannot be saved in a model file (only "
                        "tensors, numpy arrays, numbers, strings, None, lists, tuples and dicts)")

    return walk(value, ""), tensors


def rebuilt(skeleton: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The value `flatten` made `skeleton` and `tensors` of; a ValueError for a skeleton it never makes."""
    def tagged(v: dict) -> Any:
        (tag, inner), = v.items()
        if tag == "$tensor":
            if type(inner) is not str or inner not in tensors:
                raise ValueError(f"it names a tensor {inner!r} it does not hold")
            return tensors[inner]
        if tag in ("$numpy", "$scalar"):
            return numpy(inner, tag == "$scalar")
        if tag == "$float":
            if inner not in ("nan", "inf", "-inf"):
                raise ValueError(f"it holds a float {inner!r}")
            return float(inner)
        if tag == "$tuple" and type(inner) is list:
            return tuple(walk(x) for x in inner)
        if tag == "$dict" and type(inner) is list and all(type(p) is list and len(p) == 2 for p in inner):
            pairs = [(walk(k), walk(x)) for k, x in inner]
            try:
                return dict(pairs)
            except TypeError:
                raise ValueError("it holds a dict of an unhashable key") from None
        raise ValueError(f"it holds an entry {tag!r} of no lmbench file")

    def numpy(inner: Any, scalar: bool) -> Any:
        """A numpy array (or scalar) from its entry [NAME, DTYPE, SHAPE] ([NAME, DTYPE])."""
        if not (type(inner) is list and len(inner) == 3 - scalar and type(inner[0]) is str and inner[0] in tensors
                and type(inner[1]) is str and (scalar or type(inner[2]) is list)):
            raise ValueError(f"it holds a numpy entry {inner!r} of no lmbench file")
        try:
            dtype = np.dtype(inner[1])
            if dtype.kind not in "biuf":
                raise TypeError(f"dtype {dtype}")
            data = tensors[inner[0]]
            if data.dtype != torch.uint8 or data.dim() != 1:
                raise TypeError(f"bytes of {data.dtype}")
            a = np.frombuffer(data.numpy().tobytes(), dtype=dtype).reshape(() if scalar else inner[2]).copy()
        except (TypeError, ValueError) as err:
            raise ValueError(f"it holds a numpy entry {inner[:2]!r} that is none ({err})") from None
        return a[()] if scalar else a

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            if len(v) == 1 and next(iter(v)).startswith("$"):
                return tagged(v)
            if any(k.startswith("$") for k in v):
                raise ValueError(f"it holds an entry {next(k for k in v if k.startswith('$'))!r} of no lmbench file")
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("it holds a float that is not finite outside its tag")
        return v

    return walk(skeleton)


def encoded(value: Any) -> bytes:
    """The bytes of the safetensors file of `value`."""
    from safetensors.torch import save
    skeleton, tensors = flatten(value)
    return save(tensors, metadata={KEY: json.dumps(skeleton, allow_nan=False, separators=(",", ":"))})


def write_into(value: Any, out: BinaryIO) -> None:
    """`value` as a safetensors file, written into the open file `out` (`lmbench.files.atomic_write_file`)."""
    out.write(encoded(value))


def write(value: Any, path: Path) -> None:
    """`value` as the safetensors file `path` (not atomically: `lmbench.files.atomic_write_file` with
    `write_into` is)."""
    Path(path).write_bytes(encoded(value))


def read(path: Path) -> Any:
    """The value of safetensors file `path`, read without pickle; a ValueError when it is no such file,
    is cut short, or holds no lmbench value."""
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            meta = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except SafetensorError as err:
        raise ValueError(f"it is no safetensors file ({err})") from None
    if KEY not in meta:
        raise ValueError("it is a safetensors file of another program (no lmbench state in its header)")
    try:
        return rebuilt(json.loads(meta[KEY]), tensors)
    except json.JSONDecodeError as err:
        raise ValueError(f"its lmbench state is no JSON ({err})") from None
    except RecursionError:
        raise ValueError("its lmbench state is nested too deep") from None
