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


def test_the_default_vocabulary_makes_unk_a_train_word(tmp_path):
    """By default the words seen once in train are <unk> there, as the words train never saw are in
    valid and test; a train with a literal <unk> of its own keeps its vocabulary, every word; with every
    train word kept on a train without <unk>, one line warns that <unk> is priced by accident."""
    from corpora.corpus import unk_warning
    p = write_splits(tmp_path, train="a a b c c d", valid="a e b", test="c")
    corpus = load_text(p["train"], p["valid"], p["test"], use_cache=False)
    assert corpus.vocab.words == ["<unk>", "a", "c"] and corpus.info["min_count"] == 2
    assert corpus.summary()["unk_tokens"] == {"train": 2, "valid": 2, "test": 0}
    assert unk_warning(corpus.summary()) is None
    (tmp_path / "own").mkdir()
    own = write_splits(tmp_path / "own", train="a a b <unk> c", valid="a e", test="b")
    brought = load_text(own["train"], own["valid"], own["test"], use_cache=False)
    assert brought.vocab.words == ["<unk>", "a", "b", "c"] and brought.info["min_count"] == 1
    every = load_text(p["train"], p["valid"], p["test"], min_count=1, use_cache=False)
    assert every.vocab.words == ["<unk>", "a", "c", "b", "d"]
    assert every.summary()["unk_tokens"] == {"train": 0, "valid": 1, "test": 0}
    warning = unk_warning(every.summary())
    assert warning.startswith("no train token is <unk> while 33.3% of valid and 0.0% of test are")
    assert "--min-count 2" in warning and "\n" not in warning


def test_cache_is_keyed_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    p = write_splits(tmp_path, train="a b", valid="a", test="b")
    first = load_text(p["train"], p["valid"], p["test"], min_count=1)
    assert first.info["from_cache"] is False
    assert load_text(p["train"], p["valid"], p["test"], min_count=1).info["from_cache"] is True
    p["train"].write_text("a b c")
    changed = load_text(p["train"], p["valid"], p["test"], min_count=1)
    assert changed.info["from_cache"] is False and len(changed.vocab) == 4


@pytest.mark.parametrize("content, message", [(b"", "holds no tokens"),
                                              (b"caf\xe9 au lait", "not UTF-8")])
def test_bad_files_are_refused_with_the_fix(tmp_path, content, message):
    p = write_splits(tmp_path, train=content, valid="a", test="b")
    with pytest.raises(LMBenchError, match=message):
        load_text(p["train"], p["valid"], p["test"], use_cache=False)


def test_missing_file(tmp_path):
    p = write_splits(tmp_path, valid="a", test="b")
    with pytest.raises(LMBenchError, match="does not exist"):
        load_text(tmp_path / "nope.txt", p["valid"], p["test"], use_cache=False)


def test_one_file_is_cut_by_lines_contiguous_train_first(tmp_path):
    from corpora.text import line_cut, load_text_file
    assert line_cut(10, (0.8, 0.1, 0.1)) == {"train": [0, 8], "valid": [8, 9], "test": [9, 10]}
    assert line_cut(7, (0.5, 0.25, 0.25)) == {"train": [0, 4], "valid": [4, 5], "test": [5, 7]}
    path = tmp_path / "all.txt"
    path.write_text("".join(f"l{i} a\n" for i in range(10)))
    corpus = load_text_file(path, min_count=1, use_cache=False)
    decode = lambda split: corpus.vocab.decode(corpus.split(split).tolist())  # noqa: E731
    assert decode("train")[::2] == [f"l{i}" for i in range(8)]
    assert decode("valid") == ["<unk>", "a"] and corpus.unk_words["valid"].tolist() == ["l8"]
    assert corpus.unk_words["test"].tolist() == ["l9"]
    assert corpus.summary()["cut"] == {"split": [0.8, 0.1, 0.1], "lines": line_cut(10, (0.8, 0.1, 0.1))}
    with pytest.raises(LMBenchError, match=r"all.txt: cut 80/10/10 by lines \(2 lines\), valid and test hold no"):
        path.write_text("a\nb\n")
        load_text_file(path, use_cache=False)


def test_one_file_is_cached_by_content_and_cut(tmp_path):
    from corpora.text import load_text_file
    path = tmp_path / "all.txt"
    path.write_text("".join(f"w{i % 7}\n" for i in range(40)))
    assert load_text_file(path).info["from_cache"] is False
    assert load_text_file(path).info["from_cache"] is True
    assert load_text_file(path, (0.5, 0.25, 0.25)).info["from_cache"] is False  # another cut
    path.write_text("".join(f"w{i % 5}\n" for i in range(40)))
    assert load_text_file(path).info["from_cache"] is False  # another content


def test_files_are_read_in_chunks_to_the_same_corpus(tmp_path, monkeypatch):
    """Chunks of a few characters (cut at whitespace, so no token is split) give the corpus of one chunk:
    the same vocabulary, ids and words behind <unk>, from three files and from one cut by lines."""
    import numpy as np
    import corpora.text
    from corpora.text import load_text_file, token_chunks
    text = "the  cat\tsat\n on the mat <unk> a zebra\n\nthe end  "
    assert [t for chunk in token_chunks(text, 3) for t in chunk] == text.split()
    assert len(list(token_chunks(text, 3))) > 5
    p = write_splits(tmp_path, train="the cat sat on the mat <unk> the dog\nsat " * 20,
                     valid="the yak sat\n on a mat zebra", test="the cat <unk> ate")
    lines = tmp_path / "all.txt"
    lines.write_text("".join(f"the cat sat {'yak' if i % 7 == 0 else 'mat'} line {i % 5} once{i}\n" for i in range(60)))
    loaders = [lambda: load_text(p["train"], p["valid"], p["test"], min_count=2, use_cache=False),
               lambda: load_text_file(lines, min_count=2, use_cache=False)]
    for load in loaders:
        whole = load()
        monkeypatch.setattr(corpora.text, "CHUNK_CHARS", 4)
        chunked = load()
        monkeypatch.undo()
        assert chunked.vocab.words == whole.vocab.words and len(whole.vocab) > 3
        for split in ("train", "valid", "test"):
            assert np.array_equal(chunked.split(split), whole.split(split)), split
            assert chunked.unk_words[split].tolist() == whole.unk_words[split].tolist(), split
        assert sum(len(whole.unk_words[s]) for s in ("train", "valid", "test")) > 0


def test_a_prepared_corpus_written_as_text_reads_back_as_the_same_streams(tmp_path, capsys):
    """`lmbench corpus ... --write-text DIR --first N,N,N`: the first tokens of each split as words
    (<unk> literal), which `--corpus text` reads back to the same ids under the same vocabulary: how
    results/ap89-1m's corpus is made from AP."""
    from tests.helpers import run_cli
    p = write_splits(tmp_path, train="a b c a b\nd a e", valid="a z b\nc", test="y b a a")
    code, _, err = run_cli(capsys, "corpus", "text", *[w for s in p for w in (f"--{s}", p[s])],
                           "--min-count", "2", "--write-text", tmp_path / "out", "--first", "6,9,3")
    assert code == 0, err
    assert (tmp_path / "out" / "train.txt").read_text() == "a b <unk> a b <unk>\n"
    assert (tmp_path / "out" / "valid.txt").read_text() == "a <unk> b <unk>\n"  # shorter than 9: all of it
    assert (tmp_path / "out" / "test.txt").read_text() == "<unk> b a\n"
    again = load_text(*(tmp_path / "out" / f"{s}.txt" for s in ("train", "valid", "test")), use_cache=False)
    assert again.vocab.words[1:] == ["a", "b"]  # <unk> counted from the file like any word, then dropped
    assert again.train.tolist() == [1, 2, 0, 1, 2, 0]


def test_first_needs_three_token_counts(tmp_path, capsys):
    from tests.helpers import run_cli
    p = write_splits(tmp_path, train="a b", valid="a", test="b")
    code, _, err = run_cli(capsys, "corpus", "text", *[w for s in p for w in (f"--{s}", p[s])],
                           "--write-text", tmp_path / "out", "--first", "6,9")
    assert code == 2 and "--first takes three token counts" in err and len(err.strip().splitlines()) == 1
