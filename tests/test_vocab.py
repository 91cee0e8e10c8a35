import numpy as np
import pytest

from corpora.vocab import UNK, Vocabulary, count_types
from lmbench.errors import LMBenchError


def test_from_counts_orders_by_count_then_word_and_applies_threshold():
    types, counts = count_types("b a c a b a d d".split())
    vocab = Vocabulary.from_counts(types, counts, min_count=2)
    assert vocab.words == [UNK, "a", "b", "d"]  # c (count 1) dropped; b and d tie at 2
    assert vocab.encode("a c d zzz".split()).tolist() == [1, 0, 3, 0]
    assert vocab.decode([1, 2, 0]) == ["a", "b", UNK]


def test_reserved_symbols_and_max_size():
    types, counts = count_types("x x x y y z </p>".split())
    vocab = Vocabulary.from_counts(types, counts, max_size=3, reserved=["</p>"])
    assert vocab.words == [UNK, "</p>", "x"]


def test_literal_unk_in_data_is_the_unknown_symbol():
    types, counts = count_types(f"a {UNK} a {UNK} {UNK}".split())
    vocab = Vocabulary.from_counts(types, counts)
    assert vocab.words == [UNK, "a"]
    assert vocab.encode([UNK]).tolist() == [0]


def test_save_and_load_round_trip(tmp_path):
    vocab = Vocabulary([UNK, "é", "b"])
    vocab.save(tmp_path / "v.json")
    loaded = Vocabulary.load(tmp_path / "v.json")
    assert loaded.words == vocab.words and loaded.fingerprint() == vocab.fingerprint()
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(LMBenchError, match="cannot read vocabulary"):
        Vocabulary.load(tmp_path / "bad.json")


def test_encode_empty_and_dtype():
    vocab = Vocabulary([UNK, "a"])
    assert vocab.encode([]).dtype == np.int32
    assert vocab.encode(["a"]).dtype == np.int32
