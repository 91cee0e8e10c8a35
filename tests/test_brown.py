import numpy as np

from corpora.brown import load_brown, paragraphs


def test_paper_protocol_counts(brown):
    assert len(brown.train) == 800_000
    assert len(brown.valid) == 200_000
    assert len(brown.test) == 177_359
    assert len(brown.vocab) == 17_907
    assert brown.vocab.word(0) == "<unk>"
    assert brown.train.dtype == np.int32
    # every type kept occurs >= 4 times in the whole stream; no kept type below the threshold
    counts = np.bincount(np.concatenate([brown.train, brown.valid, brown.test]),
                         minlength=len(brown.vocab))
    assert counts[1:].min() >= 4
    first = brown.vocab.decode(brown.train[:6].tolist())
    assert first == ["The", "Fulton", "County", "Grand", "Jury", "said"]
    assert brown.vocab.decode(brown.test[-1:].tolist()) == ["</d>"]


def test_second_load_comes_from_the_cache(brown):
    """(How fast: bench/pipeline_bench.py.)"""
    again = load_brown()
    assert again.info["from_cache"] is True
    assert np.array_equal(again.valid, brown.valid)
    assert again.vocab.words == brown.vocab.words


def test_vocabulary_from_train_only(brown):
    train_only = load_brown(vocab_from="train")
    assert len(train_only.train) == 800_000
    counts = np.bincount(train_only.train, minlength=len(train_only.vocab))
    assert counts[3:].min() >= 4  # ids 1, 2 are the reserved markers
    assert len(train_only.vocab) < len(brown.vocab)
    for split in ("train", "valid", "test"):  # the raw word behind every <unk>, none of them in V
        ids, raw = train_only.split(split), train_only.unk_words[split]
        assert len(raw) == np.count_nonzero(ids == train_only.vocab.unk_id)
        assert not any(word in train_only.vocab for word in raw[:1000].tolist())


def test_paragraphs_are_read_as_nltk_reads_them(tmp_path, monkeypatch):
    """The fast reader of a Brown file against nltk's own reader of the same file: a word holding a `/`
    (`1/2/cd`: the tag after the last one), a token with none, blank lines of spaces, tabs, a last
    paragraph without a blank line after it."""
    import nltk
    from nltk.corpus.reader import TaggedCorpusReader
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])  # a folder nltk may read
    text = ("\n\n\tThe/at Fulton/np-tl said/vbd ./.\n\tIt/pps 1/2/cd was/bedz\n   \n"
            "\n\tnotag ``/`` Yes/rb ''/''\n\tAnd/cc so/rb\n \t\n\tLast/ap one/cd")
    (tmp_path / "ca01").write_text(text, encoding="ascii")
    reader = TaggedCorpusReader(str(tmp_path), ["ca01"], encoding="ascii")
    expected = [[word for sentence in paragraph for word in sentence] for paragraph in reader.paras("ca01")]
    assert paragraphs(text) == expected
    assert expected == [["The", "Fulton", "said", ".", "It", "1/2", "was"],
                        ["notag", "``", "Yes", "''", "And", "so"], ["Last", "one"]]
