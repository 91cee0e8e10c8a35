"""Hostile inputs of `lmbench mix` (issue 35, apart from tests/test_hostile.py): per-token log-probability files
of different token streams, of an older format, holding what is not a log-probability, or no .npz at all, and
a buckets file of another stream: each ends in one line naming the file and the fix, leaving it as it was."""

from pathlib import Path

import numpy as np
import pytest

from tests.helpers import corpus_args, write_splits, zipf_text
from tests.test_faults import error_line
from tests.test_hostile import RANDOM


def _ngram_logprobs(tmp_path, name: str, texts: dict, capsys, order: int = 2) -> Path:
    from lmbench_cli import main
    folder = tmp_path / name
    folder.mkdir()
    files = write_splits(folder, **texts)
    out = tmp_path / f"{name}.npz"
    assert main(["ngram", "--method", "kneser-ney", "--order", str(order), *corpus_args(files), "--save-logprobs",
                 str(out)]) == 0
    capsys.readouterr()
    return out


@pytest.fixture
def two_streams(tmp_path, capsys, monkeypatch):
    """Files of one model on two corpora whose valid and test have the same lengths, different tokens (a, b),
    and of another model on a's corpus (same)."""
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    train = zipf_text(3000, 50, 1)
    a = _ngram_logprobs(tmp_path, "a", dict(train=train, valid=zipf_text(300, 50, 2), test=zipf_text(300, 50, 3)),
                        capsys)
    b = _ngram_logprobs(tmp_path, "b", dict(train=train, valid=zipf_text(300, 50, 4), test=zipf_text(300, 50, 5)),
                        capsys)
    same = _ngram_logprobs(tmp_path, "same", dict(train=train, valid=zipf_text(300, 50, 2),
                                                  test=zipf_text(300, 50, 3)), capsys, order=3)
    return a, b, same


def test_mix_refuses_files_of_different_streams(two_streams, capsys):
    from lmbench_cli import main
    a, b, same = two_streams
    line = error_line(capsys, ["mix", str(a), str(b)])
    assert str(a) in line and str(b) in line and "different token streams" in line and "same corpus" in line
    assert main(["mix", str(a), str(same)]) == 0       # another model of the same valid and test: mixed


def test_mix_of_an_older_file_without_fingerprint_warns(two_streams, capsys, caplog):
    from lmbench_cli import main
    a, b, _ = two_streams
    with np.load(b) as data:
        np.savez(b.with_suffix(".old.npz"), valid=data["valid"], test=data["test"])
    assert main(["mix", str(a), str(b.with_suffix(".old.npz"))]) == 0
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name == "mixing.saved"]
    assert "no fingerprint" in warning and "score the model again" in warning


HOSTILE_NPZ = {
    "a log-probability of +0.7": (lambda d: d.update(valid=np.where(np.arange(len(d["valid"])) == 5, 0.7,
                                                                     d["valid"])), "token 5 is 0.7"),
    "a NaN": (lambda d: d["test"].__setitem__(3, np.nan), "token 3 is nan"),
    "minus infinity": (lambda d: d["test"].__setitem__(0, -np.inf), "token 0 is -inf"),
    "strings": (lambda d: d.update(valid=np.array(["a"] * 4)), "not one log-probability per token"),
    "Python objects": (lambda d: d.update(valid=np.array([{"a": 1}], dtype=object)), "Python objects"),
}


@pytest.mark.parametrize("case", HOSTILE_NPZ)
def test_mix_refuses_what_is_not_log_probabilities(two_streams, capsys, case):
    a, _, same = two_streams
    change, named = HOSTILE_NPZ[case]
    with np.load(same) as data:
        arrays = {key: data[key].copy() for key in data.files}
    change(arrays)
    np.savez(same, **arrays)
    before = same.read_bytes()
    line = error_line(capsys, ["mix", str(a), str(same)])
    assert str(same) in line and named in line and "--save-logprobs" in line and "allow_pickle" not in line
    assert same.read_bytes() == before


@pytest.mark.parametrize("content", [b"hello, I am text\n", b"", b"\x93NUMPY garbage", RANDOM],
                         ids=["text", "empty", "npy header", "random"])
def test_mix_refuses_a_file_that_is_not_an_npz(two_streams, capsys, tmp_path, content):
    a, _, _ = two_streams
    fake = tmp_path / "x.npz"
    fake.write_bytes(content)
    line = error_line(capsys, ["mix", str(a), str(fake)])
    assert str(fake) in line and "allow_pickle" not in line and "--save-logprobs" in line



def test_a_buckets_file_of_another_stream_is_named(two_streams, tmp_path, capsys):
    a, b, _ = two_streams
    with np.load(b) as data:
        np.savez(tmp_path / "di.npz", **{key: data[key] for key in data.files},
                 buckets_valid=np.zeros(len(data["valid"]), dtype=np.int64),
                 buckets_test=np.zeros(len(data["test"]), dtype=np.int64))
    line = error_line(capsys, ["mix", str(a), str(a), "--method", "bucketed", "--buckets-from",
                               str(tmp_path / "di.npz")])
    assert str(tmp_path / "di.npz") in line and "different token streams" in line
