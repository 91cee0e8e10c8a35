import pytest

from corpora.text import load_text
from lmbench.errors import LMBenchError
from tests.helpers import write_splits


def test_lines_are_whitespace_and_vocab_from_train(tmp_path):
    p = write_splits(tmp_path, train="a b\nb c <unk>\n", valid="a\nz", test="c")
    corpus = load_text(p["train"], p["valid"], p["test"], use_cache=False)
    assert corpus.vocab.words == ["<unk>", "b", "a", "c"]
    assert corpus.train.tolist() == [2, 1, 1, 3, 0]
    assert corpus.valid.tolist() == [2, 0]
    summary = corpus.summary()
    assert summary["tokens"] == {"train": 5, "valid": 2, "test": 1}
    assert summary["unk_tokens"] == {"train": 1, "valid": 1, "test": 0}


def test_raw_words_behind_unk_are_kept_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    p = write_splits(tmp_path, train="a b b <unk>", valid="zebra a yak <unk> zebra", test="b")
    for _ in range(2):  # prepared, then from the cache
        corpus = load_text(p["train"], p["valid"], p["test"])
        assert corpus.unk_words["valid"].tolist() == ["zebra", "yak", "<unk>", "zebra"]
        assert corpus.unk_words["train"].tolist() == ["<unk>"] and corpus.unk_words["test"].tolist() == []
    assert corpus.info["from_cache"] is True


def test_min_count(tmp_path):
    p = write_splits(tmp_path, train="a a b", valid="a b", test="b")
    corpus = load_text(p["train"], p["valid"], p["test"], min_count=2, use_cache=False)
    assert corpus.vocab.words == ["<unk>", "a"]


def test_cache_is_keyed_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    p = write_splits(tmp_path, train="a b", valid="a", test="b")
    first = load_text(p["train"], p["valid"], p["test"])
    assert first.info["from_cache"] is False
    assert load_text(p["train"], p["valid"], p["test"]).info["from_cache"] is True
    p["train"].write_text("a b c")
    changed = load_text(p["train"], p["valid"], p["test"])
    assert changed.info["from_cache"] is False and len(changed.vocab) == 4


@pytest.mark.parametrize("content, message", [(b"", "holds no tokens"),
                                              (b"caf\xe9 au lait", "not UTF-8")])
def test_bad_files_are_refused_with_the_fix(tmp_path, content, message):
    p = write_splits(tmp_path, train=content, valid="a", test="a")
    with pytest.raises(LMBenchError, match=message):
        load_text(p["train"], p["valid"], p["test"], use_cache=False)


def test_missing_file(tmp_path):
    p = write_splits(tmp_path, valid="a", test="a")
    with pytest.raises(LMBenchError, match="does not exist"):
        load_text(tmp_path / "nope.txt", p["valid"], p["test"], use_cache=False)
