"""The bounded-memory path (baselines/disk_counts.py) against the in-memory one: the same counts, the
same discounts and bit-for-bit the same probabilities under a cap small enough to force many runs;
resuming a killed build; a full disk; the --memory options."""

import errno
import json

import numpy as np
import pytest

import baselines.counts
from baselines.arpa_writer import write_arpa
from baselines.counts import count_ngrams
from baselines.disk_counts import Column, DiskCounts, Workspace, folder_name, build_identity, parse_size, workspace
from baselines.katz import Katz
from baselines.kneser_ney import KneserNey, KneserNeyBackoff
from lmbench.errors import LMBenchError
from lmbench_cli import main
from lmbench.model import split_logprobs
from tests.lm_checks import assert_normalised, make_corpus
from tests.test_kneser_ney import markov_text

TINY_CAP = 100_000  # bytes: 48K of stream, then chunks of ~930 positions (13 runs), blocks of ~300 rows


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(markov_text(12000, 150, 0), markov_text(1500, 170, 1), markov_text(1500, 170, 2))


def assert_same_model(a, b, corpus):
    discounts = "ratios" if isinstance(a, Katz) else "discounts"
    assert getattr(a, discounts).keys() == getattr(b, discounts).keys()
    for n in getattr(a, discounts):
        assert np.array_equal(getattr(a, discounts)[n], getattr(b, discounts)[n]), n
    for n in range(1, a.order + 1):
        assert np.array_equal(a.table.keys[n], b.table.keys[n]), n
        assert np.array_equal(a.table.grams[n], b.table.grams[n]), n
        assert np.array_equal(a.logp[n], b.logp[n]), n          # exactly, not approximately
        if n < a.order:
            assert np.array_equal(a.logbow[n], b.logbow[n]), n
    for split in ("valid", "test"):
        assert np.array_equal(split_logprobs(a, corpus, split), split_logprobs(b, corpus, split))


def disk_counts(tmp_path, stream, order, vocab_size, memory=TINY_CAP):
    with workspace(tmp_path, {"test": order, "stream": str(len(stream))}) as ws:
        return DiskCounts(ws, stream, order, vocab_size, memory).count()


ORDER_5 = pytest.param(5, marks=pytest.mark.slow)  # the longest builds: in `make test`, not test-fast


@pytest.mark.parametrize("packed", [None, False])
def test_counts_equal_the_in_memory_counts(tmp_path, corpus, monkeypatch, packed):
    if packed is False:  # prefix-rank keys at every order (as AP's 5-grams need)
        monkeypatch.setattr(baselines.counts, "packs", lambda vocab_size, n: False)
    V, N = len(corpus.vocab), 5
    memory = count_ngrams(corpus.train, N, V)
    disk = disk_counts(tmp_path, corpus.train, N, V)
    assert len(corpus.train) / disk.chunk > 10                      # many runs to merge
    assert np.array_equal(disk.counts1, memory.counts[1])
    for n in range(2, N + 1):
        assert np.array_equal(disk.col("keys", n).read(), memory.table.keys[n]), n
        assert np.array_equal(disk.col("counts", n).read(), memory.counts[n]), n
        assert np.array_equal(disk.col("grams", n, np.int32, n).read(), memory.table.grams[n]), n
        assert np.array_equal(disk.col("prefix", n, disk.row_dtype).read(), memory.prefix[n]), n
        assert np.array_equal(disk.col("suffix", n, disk.row_dtype).read(), memory.suffix[n]), n
    for n in range(1, N):
        assert disk.start[n] == memory.at[n][0]


@pytest.mark.parametrize("cls", [KneserNey, KneserNeyBackoff, Katz])
@pytest.mark.parametrize("order", [2, 3, ORDER_5])
def test_every_probability_equals_the_in_memory_model(tmp_path, corpus, cls, order):
    in_memory = cls(order).fit(corpus)
    bounded = cls(order, memory=TINY_CAP, tmp_dir=tmp_path).fit(corpus)
    assert isinstance(bounded.table.keys[order], np.memmap)        # it did take the bounded path
    assert_same_model(in_memory, bounded, corpus)
    assert_normalised(bounded, corpus)
    assert list(tmp_path.iterdir()) == []                          # nothing left on disk
    a, b = tmp_path / "a.arpa", tmp_path / "b.arpa"
    write_arpa(in_memory, corpus.vocab, a)
    write_arpa(bounded, corpus.vocab, b)
    assert a.read_bytes() == b.read_bytes()


def test_prefix_rank_keys_on_the_bounded_path(tmp_path, corpus, monkeypatch):
    monkeypatch.setattr(baselines.counts, "packs", lambda vocab_size, n: False)
    assert_same_model(KneserNey(5).fit(corpus), KneserNey(5, memory=TINY_CAP, tmp_dir=tmp_path).fit(corpus), corpus)


def test_brown_sized_corpus_many_runs(tmp_path, brown):
    in_memory = KneserNey(5).fit(brown)
    bounded = KneserNey(5, memory=brown.train.nbytes + parse_size("6M"), tmp_dir=tmp_path).fit(brown)
    assert isinstance(bounded.table.keys[5], np.memmap)
    assert_same_model(in_memory, bounded, brown)


def test_the_cap_chooses_the_path(tmp_path, corpus):
    assert not isinstance(KneserNey(3, memory=parse_size("4G"), tmp_dir=tmp_path).fit(corpus).table.keys[3],
                          np.memmap)                                # it fits: in memory
    assert isinstance(KneserNey(3, memory=TINY_CAP, tmp_dir=tmp_path).fit(corpus).table.keys[3], np.memmap)


@pytest.mark.parametrize("packed", [None, False])
@pytest.mark.parametrize("cls", [KneserNeyBackoff, Katz])
@pytest.mark.parametrize("order", [3, ORDER_5])
def test_count_cutoffs_on_the_bounded_path(tmp_path, corpus, monkeypatch, packed, cls, order):
    """SRILM's cutoffs (the paper's back-off rows): the listed rows, renumbered keys included, and every
    probability and weight equal the in-memory model's."""
    if packed is False:  # prefix-rank keys, whose prefix rows the cutoff renumbers
        monkeypatch.setattr(baselines.counts, "packs", lambda vocab_size, n: False)
    in_memory = cls(order, min_count=2).fit(corpus)
    bounded = cls(order, min_count=2, memory=TINY_CAP, tmp_dir=tmp_path).fit(corpus)
    assert isinstance(bounded.table.keys[order], np.memmap)
    assert in_memory.table.size(order) < len(np.unique(np.lib.stride_tricks.sliding_window_view(
        corpus.train, order), axis=0))                              # the cutoff did leave rows out
    assert_same_model(in_memory, bounded, corpus)
    assert_normalised(bounded, corpus)
    assert list(tmp_path.iterdir()) == []


class Killed(Exception):
    """Stands for the process being killed outright between two chunks (kill -9: nothing cleans up, so
    Workspace.remove is disabled meanwhile; tests/test_hostile.py kills a real process)."""


def test_a_killed_build_resumes_to_the_same_model(tmp_path, corpus, monkeypatch):
    counted = []
    count_chunk = DiskCounts._count_chunk

    def dies_at_order_4(self, n, c, s, at_prev):
        if n == 4 and c == 3:
            raise Killed
        counted.append((n, c))
        count_chunk(self, n, c, s, at_prev)

    monkeypatch.setattr(DiskCounts, "_count_chunk", dies_at_order_4)
    with monkeypatch.context() as killed, pytest.raises(Killed):
        killed.setattr(Workspace, "remove", lambda self: None)
        KneserNey(5, memory=TINY_CAP, tmp_dir=tmp_path).fit(corpus)
    assert len(list(tmp_path.iterdir())) == 1                       # the folder stays, to resume
    before = len(counted)
    monkeypatch.setattr(DiskCounts, "_count_chunk", lambda self, *args: (counted.append(args[:2]),
                                                                         count_chunk(self, *args)))
    resumed = KneserNey(5, memory=TINY_CAP, tmp_dir=tmp_path).fit(corpus)
    assert (2, 0) not in counted[before:] and (4, 0) not in counted[before:] and (4, 3) in counted[before:]
    assert_same_model(KneserNey(5).fit(corpus), resumed, corpus)
    assert list(tmp_path.iterdir()) == []


def test_leftover_files_that_cannot_be_resumed_are_refused(tmp_path, corpus):
    model = KneserNey(3, memory=TINY_CAP, tmp_dir=tmp_path)
    model.vocab_size = len(corpus.vocab)
    folder = tmp_path / folder_name(build_identity(model, corpus.train))
    folder.mkdir()
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(LMBenchError, match="leftover files of an interrupted n-gram build") as err:
        KneserNey(3, memory=TINY_CAP, tmp_dir=tmp_path).fit(corpus)
    assert str(folder) in str(err.value) and "\n" not in str(err.value)


def full_disk_after(monkeypatch, writes):
    """Column.write fails with ENOSPC after `writes` successful writes."""
    write = Column.write
    done = []

    def failing(self, blocks):
        if len(done) >= writes:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        done.append(self.path)
        write(self, blocks)

    monkeypatch.setattr(Column, "write", failing)


def test_a_full_disk_ends_in_one_line_and_leaves_nothing(tmp_path, corpus, monkeypatch):
    full_disk_after(monkeypatch, 40)
    model = KneserNey(4, memory=TINY_CAP, tmp_dir=tmp_path)
    with pytest.raises(LMBenchError, match="ran out of disk space") as err:
        model.fit(corpus)
    assert "--tmp-dir" in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == [] and model.table is None


def test_cli_memory_options(tmp_path, corpus, monkeypatch, capsys):
    monkeypatch.setenv("LMBENCH_CACHE", str(tmp_path / "cache"))
    files = []
    for split in ("train", "valid", "test"):
        path = tmp_path / f"{split}.txt"
        path.write_text(" ".join(corpus.vocab.decode(corpus.split(split))))
        files.append(f"--{split}={path}")
    work = tmp_path / "work"
    base = ["ngram", "--method", "kneser-ney", "--order", "4", "--corpus", "text", *files, "--json"]
    assert main(base) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main([*base, "--memory", "100K", "--tmp-dir", str(work), "--arpa", str(tmp_path / "m.arpa")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert all(result[f"{s}_perplexity"] == expected[f"{s}_perplexity"] for s in ("train", "valid", "test"))
    assert list(work.iterdir()) == []
    assert main([*base, "--memory", "lots"]) == 2
    err = capsys.readouterr().err
    assert "--memory" in err and "4G" in err and err.count("\n") == 1
    assert main([*base[:2], "add-one-unigram", *base[3:], "--memory", "1G"]) == 2
    err = capsys.readouterr().err  # (the methods that take it, from their registrations: baselines.methods)
    assert "--memory applies to" in err and "deleted-interpolation" in err and "katz" in err and err.count("\n") == 1
    full_disk_after(monkeypatch, 10)
    arpa = tmp_path / "full.arpa"
    assert main([*base, "--memory", "100K", "--tmp-dir", str(work), "--arpa", str(arpa)]) == 2
    err = capsys.readouterr().err
    assert "ran out of disk space" in err and err.count("\n") == 1
    assert not arpa.exists() and list(work.iterdir()) == []


def test_parse_size():
    assert parse_size("4G") == 4 << 30 and parse_size("512m") == 512 << 20 and parse_size("1000") == 1000
    assert parse_size("1.5K") == 1536
    for bad in ("", "G", "-1M", "lots", "nanG"):
        with pytest.raises(ValueError):
            parse_size(bad)
