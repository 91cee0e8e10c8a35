"""The AP News pipeline on tiny synthetic TREC SGML files, and briefly on the real $AP_DIR."""

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from corpora import ap
from corpora.ap import (DEFAULT_VOCAB_SIZE, documents_suffice, is_number, load_ap, split_documents,
                        split_sentences, tokenize_text)
from lmbench_cli import main
from lmbench.errors import LMBenchError


def sgml(docs) -> str:
    """TREC/Tipster SGML for (docno, text) pairs, with headers that must not be read."""
    return "".join(
        f"<DOC>\n<DOCNO> {docno} </DOCNO>\n<FILEID>AP-NR {docno}</FILEID>\n"
        f"<HEAD>Headline Headword</HEAD>\n<BYLINE>By Bylinename</BYLINE>\n"
        f"<DATELINE>DATELINEPLACE (AP) </DATELINE>\n<TEXT>\n{text}</TEXT>\n</DOC>\n"
        for docno, text in docs)


def write(directory: Path, name: str, docs, *, gz: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = sgml(docs).encode("latin-1")
    path = directory / name
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def load(directory, **options):
    options = {"use_cache": False, "workers": 1, "split_sizes": (1, 1, 1), **options}
    return load_ap(directory, **options)


def words(corpus, split):
    return corpus.vocab.decode(corpus.split(split).tolist())


TRAIN = "   The cat saw Smith.\n   Smith saw the cat.\n"
VALID = "   Jones saw Brown.\n"
TEST = "   The Cat saw the dog.\n"


@pytest.fixture
def three_docs(tmp_path):
    return write(tmp_path / "ap", "ap890101", [("AP890101-0001", TRAIN), ("AP890101-0002", VALID),
                                              ("AP890101-0003", TEST)]).parent


def test_proper_nouns_from_train_statistics(three_docs):
    corpus = load(three_docs)
    # "Smith" is capitalised in its one non-initial train occurrence, so every Smith is <proper>
    # (the sentence-initial one too); sentence-initial "The" is the common word "the"
    assert words(corpus, "train") == ["the", "cat", "saw", "<proper>", ".",
                                      "<proper>", "saw", "the", "cat", ".", "</d>"]
    # valid: no train statistics for jones/brown: capitalised mid-sentence -> <proper>;
    # sentence-initial "Jones" -> "jones", not in the vocabulary -> <unk>
    assert words(corpus, "valid") == ["<unk>", "saw", "<proper>", ".", "</d>"]
    # test: "cat" is lower case in train, so a capitalised "Cat" stays a word; "dog" is unknown
    assert words(corpus, "test") == ["the", "cat", "saw", "the", "<unk>", ".", "</d>"]
    # header tags (HEAD, BYLINE, DATELINE) are never read
    assert corpus.vocab.words[:4] == ["<unk>", "<num>", "<proper>", "</d>"]
    assert not any("head" in w or "byline" in w or "dateline" in w for w in corpus.vocab.words)


def test_proper_noun_threshold_is_ninety_percent(tmp_path):
    text = ("   We saw Apple and Pear.\n" * 8 + "   We saw Apple and pear.\n"
            "   We saw apple and pear.\n")  # Apple: 9/10 capitalised, Pear: 8/10
    directory = write(tmp_path, "ap1", [("A-1", text), ("A-2", "   Apple.\n"), ("A-3", "   Pear.\n")]).parent
    corpus = load(directory)
    train = words(corpus, "train")
    assert train[:6] == ["we", "saw", "<proper>", "and", "pear", "."]
    assert "apple" not in corpus.vocab and "pear" in corpus.vocab
    assert words(corpus, "valid") == ["<proper>", ".", "</d>"]  # sentence-initial, still proper
    assert words(corpus, "test") == ["pear", ".", "</d>"]


def test_the_pronoun_i_is_never_proper(tmp_path):
    directory = write(tmp_path, "ap1", [("A-1", "   Then I left and I came.\n"), ("A-2", "   So I ran.\n"),
                                        ("A-3", "   I ran.\n")]).parent
    corpus = load(directory)
    assert words(corpus, "train")[:4] == ["then", "i", "left", "and"]
    assert words(corpus, "valid")[:3] == ["<unk>", "i", "<unk>"]
    assert words(corpus, "test")[0] == "i"


def test_numbers_and_punctuation(tmp_path):
    text = "   In 1989, 1,000 people paid $3.50 (10%) for 21st-floor rooms of the '60s and 1960s B-52 jets.\n"
    directory = write(tmp_path, "ap1", [("A-1", text), ("A-2", "   In 10:30.\n"),
                                        ("A-3", "   Now 1966-67.\n")]).parent
    corpus = load(directory)
    assert words(corpus, "train") == [
        "in", "<num>", ",", "<num>", "people", "paid", "$", "<num>", "(", "<num>", "%", ")", "for",
        "21st-floor", "rooms", "of", "the", "<num>", "and", "<num>", "<proper>", "jets", ".", "</d>"]
    assert words(corpus, "valid") == ["in", "<num>", ".", "</d>"]
    assert words(corpus, "test") == ["<unk>", "<num>", ".", "</d>"]


@pytest.mark.parametrize("token, number", [
    ("1,000", True), ("3.5", True), ("1966-67", True), ("10:30", True), ("'60s", True),
    ("1960s", True), ("21st", True), ("3rd", True), ("B-52", False), ("21st-floor", False),
    ("abc", False), (".", False), ("--", False)])
def test_is_number(token, number):
    assert is_number(token) is number


def test_sentence_rule_keeps_abbreviations():
    text = ("He met Mr. Smith at 10 a.m. Tuesday in Calif. ``It's over,'' he said. The U.S. Army left. "
            "John J. Anderson came! Why? Then 5 left. it goes on")
    assert split_sentences(text) == [  # "Calif." is an abbreviation: the sentence end is missed
        "He met Mr. Smith at 10 a.m. Tuesday in Calif. ``It's over,'' he said.",
        "The U.S. Army left.", "John J. Anderson came!", "Why?", "Then 5 left. it goes on"]


def test_sentence_ends_before_closing_quotes_and_ellipses():
    """Treebank splits only a string's final period: a sentence left running past one keeps it glued."""
    text = ("``It is ever valid.'' _ British leaders agree. It is a baby. ... All of it. ``I won.'' "
            "he said. We met at the U.S.'' (rally).")
    sentences = split_sentences(text)
    assert sentences == ["``It is ever valid.''", "_ British leaders agree.", "It is a baby.", "...", "All of it.",
                         "``I won.''", "he said.", "We met at the U.S.'' (rally)."]
    tokens, _ = tokenize_text("   " + text)
    assert [t for t in tokens if len(t) > 1 and t.endswith(".")] == ["...", "U.S."]


def test_tokenize_text_flags_first_word_with_a_letter():
    tokens, initial = tokenize_text("   ``Go home,'' she said. Now\nthen &amp; there.\n   New paragraph")
    assert tokens == ["``", "Go", "home", ",", "''", "she", "said", ".", "Now", "then", "&", "there",
                      ".", "New", "paragraph"]
    assert [t for t, i in zip(tokens, initial) if i] == ["Go", "Now", "New"]


def test_plain_and_gzip_files_and_docno_order(tmp_path):
    docs = [("AP890102-0002", "   Second doc here.\n"), ("AP890102-0001", "   First doc here.\n")]
    later = [("AP890103-0001", "   Third doc here.\n")]
    plain = tmp_path / "plain"
    write(plain, "ap890102", docs)
    write(plain, "ap890103", later)
    (plain / "readme").write_text("Informal notes, no documents here.\n")
    packed = tmp_path / "packed"
    write(packed, "ap890102.gz", docs, gz=True)
    write(packed, "ap890103", later, gz=True)  # gzip is recognised by content, not name
    a, b = load(plain), load(packed)
    assert words(a, "train") == ["first", "doc", "here", ".", "</d>"]
    assert words(a, "valid") == words(a, "test") == ["<unk>", "doc", "here", ".", "</d>"]
    assert a.vocab.words == b.vocab.words
    for split in ("train", "valid", "test"):
        assert np.array_equal(a.split(split), b.split(split))
    assert a.info["docnos"] == {"train": ["AP890102-0001", "AP890102-0001"],
                                "valid": ["AP890102-0002", "AP890102-0002"],
                                "test": ["AP890103-0001", "AP890103-0001"]}


def test_files_out_of_docno_order_are_logged(tmp_path, caplog):
    write(tmp_path, "ap1", [("AP890105-0001", TRAIN)])
    write(tmp_path, "ap2", [("AP890101-0001", VALID), ("AP890101-0002", TEST)])
    corpus = load(tmp_path)
    assert "ap2 starts at DOCNO AP890101-0001, before" in caplog.text
    assert corpus.info["docnos"]["train"] == ["AP890105-0001", "AP890105-0001"]  # still file by file


def test_vocabulary_cap_keeps_most_frequent_train_symbols(tmp_path):
    directory = write(tmp_path, "ap1", [("A-1", "   a a a b b c c d\n"), ("A-2", "   d a e\n"),
                                        ("A-3", "   b\n")]).parent
    corpus = load(directory, vocab_size=6)
    assert corpus.vocab.words == ["<unk>", "<num>", "<proper>", "</d>", "a", "b"]  # b, c tie: alphabetical
    assert words(corpus, "train") == ["a", "a", "a", "b", "b", "<unk>", "<unk>", "<unk>", "</d>"]
    assert words(corpus, "valid") == ["<unk>", "a", "<unk>", "</d>"]
    assert load(directory).vocab.words[4:] == ["a", "b", "c", "d"]  # the default cap is not reached
    summary = corpus.summary()
    assert summary["unk_tokens"] == {"train": 3, "valid": 2, "test": 0}


def test_split_documents_by_cumulative_targets():
    lengths = np.array([5, 5, 5, 5, 5])
    assert split_documents(lengths, (10, 5, 5)) == (2, 3, 4)  # the fifth document is unused
    assert split_documents(lengths, (6, 1, 1)) == (2, 3, 4)  # whole documents: first end >= target
    assert split_documents(lengths, (100, 50, 50)) == (3, 4, 5)  # scaled to 12.5, 18.75, 25
    assert split_documents(lengths[:3], (1000, 1, 1)) == (1, 2, 3)  # one document per split at least
    assert split_documents(lengths, (1, 1, 1)) == (1, 2, 3)
    assert not documents_suffice(lengths[:2], (1, 1, 1))  # reading goes on until the splits fill
    assert documents_suffice(lengths[:3], (1, 1, 1)) and not documents_suffice(lengths, (20, 5, 1))
    with pytest.raises(LMBenchError, match="at least 3"):
        split_documents(lengths[:2], (1, 1, 1))


def test_workers_do_not_change_the_result(three_docs, monkeypatch):
    one, two = load(three_docs), load(three_docs, workers=2)
    assert one.vocab.words == two.vocab.words
    assert all(np.array_equal(one.split(s), two.split(s)) for s in ("train", "valid", "test"))

    def no_pool(*args, **kwargs):
        raise AssertionError("a folder of fewer than POOL_MIN_FILES files started worker processes")
    monkeypatch.setattr(ap, "ProcessPoolExecutor", no_pool)  # a small folder, by default: this process
    default = load(three_docs, workers=None)
    assert all(np.array_equal(one.split(s), default.split(s)) for s in ("train", "valid", "test"))


def test_cache_is_keyed_by_files_and_options(three_docs, monkeypatch, tmp_path):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    first = load(three_docs, use_cache=True)
    again = load(three_docs, use_cache=True)
    assert first.info["from_cache"] is False and again.info["from_cache"] is True
    assert again.vocab.words == first.vocab.words and np.array_equal(again.test, first.test)
    assert load(three_docs, use_cache=True, vocab_size=5).info["from_cache"] is False
    write(three_docs, "ap890102", [("AP890102-0001", "   More text.\n")])
    assert load(three_docs, use_cache=True).info["from_cache"] is False


def test_missing_directory_names_the_fix(tmp_path):
    with pytest.raises(LMBenchError, match="does not exist.*--ap-dir.*AP_DIR"):
        load(tmp_path / "nowhere")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(LMBenchError, match="is not a folder"):
        load(tmp_path / "afile")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LMBenchError, match="holds no files"):
        load(tmp_path / "empty")


def test_folder_without_sgml_documents(tmp_path):
    (tmp_path / "readme").write_text("Informal notes\n")
    with pytest.raises(LMBenchError, match="no SGML documents.*--ap-dir"):
        load(tmp_path)


def test_too_few_documents(tmp_path):
    write(tmp_path, "ap1", [("A-1", "   One.\n"), ("A-2", "   Two.\n")])
    with pytest.raises(LMBenchError, match="only 2 document"):
        load(tmp_path)


@pytest.mark.parametrize("damage", [lambda data: data[:-12], lambda data: data[:10] + b"garbage" * 9])
def test_corrupt_gzip_names_the_file(tmp_path, damage):
    write(tmp_path, "ap890101.gz", [("A-1", TRAIN)], gz=True)
    bad = write(tmp_path, "ap890102.gz", [("A-2", VALID), ("A-3", TEST)], gz=True)
    bad.write_bytes(damage(bad.read_bytes()))
    with pytest.raises(LMBenchError, match="ap890102.gz"):
        load(tmp_path, split_sizes=(100, 10, 10))


def test_bad_options(three_docs):
    with pytest.raises(LMBenchError, match="vocab-size"):
        load(three_docs, vocab_size=4)
    with pytest.raises(LMBenchError, match="split sizes"):
        load(three_docs, split_sizes=(10, 0, 10))


def test_cli(three_docs, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    assert main(["corpus", "ap", "--ap-dir", str(three_docs), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["tokens"] == {"train": 11, "valid": 5, "test": 7}  # scaled down: one document each
    assert stats["vocab_size"] == 8 < DEFAULT_VOCAB_SIZE  # the specials, the, cat, saw, .
    assert main(["corpus", "ap", "--ap-dir", str(tmp_path / "nowhere")]) == 2
    assert "--ap-dir" in capsys.readouterr().err


@pytest.fixture
def ap_dir():
    directory = os.environ.get("AP_DIR")
    if not directory or not Path(directory).is_dir():
        pytest.skip("the real AP data is absent: set AP_DIR to a folder of TREC/Tipster AP SGML files")
    return Path(directory)


@pytest.mark.slow
def test_real_ap_files_small_splits(ap_dir):
    """Only the first file is read for splits this small; everything is whole documents."""
    corpus = load(ap_dir, split_sizes=(20_000, 2_000, 2_000), vocab_size=2_000)
    info = corpus.info
    assert info["files_read"] == 1
    sizes = [len(corpus.split(s)) for s in ("train", "valid", "test")]
    assert 20_000 <= sizes[0] < 22_000 and 1_000 < sizes[1] < 4_000 and 1_000 < sizes[2] < 4_000
    assert len(corpus.vocab) == 2_000
    docnos = info["docnos"]
    assert docnos["train"][0] < docnos["train"][1] < docnos["valid"][0] < docnos["test"][0]
    for split in ("train", "valid", "test"):
        stream = words(corpus, split)
        assert stream[-1] == "</d>"
        assert all(w == w.lower() for w in stream)
    counts = np.bincount(corpus.train, minlength=len(corpus.vocab))
    ranked = [corpus.vocab.word(i) for i in np.argsort(-counts)[:8]]
    assert "the" in ranked and "<proper>" in ranked and "," in ranked
    assert counts[corpus.vocab.id("<num>")] > 100
    assert 0.02 < np.mean(corpus.valid == 0) < 0.25  # <unk> rate of a 2,000-word vocabulary
