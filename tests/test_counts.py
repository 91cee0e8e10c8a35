"""N-gram counting and lookup against brute-force Python counts, packed and prefix-rank keys."""

from collections import Counter

import numpy as np
import pytest

from baselines.counts import NgramTable, count_ngrams, count_of_counts, packs
from lmbench.errors import LMBenchError


def brute_counts(stream, n):
    return Counter(tuple(stream[t:t + n].tolist()) for t in range(len(stream) - n + 1))


def repetitive_stream(vocab_size, length, seed):
    """Random ids with repeated stretches, so high-order n-grams repeat too."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, vocab_size, size=length // 3).astype(np.int32)
    few = min(4, vocab_size)
    small = rng.integers(0, few, size=length // 3).astype(np.int32) + vocab_size - few  # few types
    return np.concatenate([base, small, base[: length - 2 * (length // 3)]])


CASES = [  # (vocab size, order, force packed off)
    (7, 4, None),
    (7, 4, False),            # prefix-rank keys at every order
    (1_000_000, 4, None),     # 20 bits * 4 = 80 > 63: order 4 cannot pack
    (20_000, 6, None),        # 15 bits * 6 = 90 > 63: orders 5, 6 cannot pack
    (2, 6, None),
]


@pytest.mark.parametrize("vocab_size, order, packed", CASES)
def test_counts_match_brute_force(vocab_size, order, packed):
    stream = repetitive_stream(vocab_size, 600, seed=vocab_size)
    counts = count_ngrams(stream, order, vocab_size, packed=packed)
    assert counts.counts[1].shape == (vocab_size,)
    assert np.array_equal(counts.counts[1], np.bincount(stream, minlength=vocab_size))
    for n in range(2, order + 1):
        expected = brute_counts(stream, n)
        grams = counts.table.grams[n]
        assert {tuple(g): int(c) for g, c in zip(grams.tolist(), counts.counts[n])} == dict(expected)
        assert grams.tolist() == sorted(grams.tolist()), "rows are in lexicographic order"
        assert np.all(np.diff(counts.table.keys[n]) > 0)
        windows = np.lib.stride_tricks.sliding_window_view(stream, n)
        assert np.array_equal(counts.table.grams[n][counts.at[n]], windows)
        assert np.array_equal(counts.table.grams[n - 1][counts.prefix[n]], grams[:, :-1])
        assert np.array_equal(counts.table.grams[n - 1][counts.suffix[n]], grams[:, 1:])


def test_key_kinds():
    assert packs(17_907, 4) and not packs(17_907, 5)
    assert not packs(1_000_000, 4) and packs(1_000_000, 3)
    assert count_ngrams(np.arange(10) % 3, 4, 1_000_000).table.packed == [False, True, True, True, False]


def as_rows(grams: np.ndarray) -> np.ndarray:
    """(N,) one opaque value per row of the (N, n) array: equal exactly when the rows are."""
    grams = np.ascontiguousarray(grams)
    return grams.view(np.dtype((np.void, grams.dtype.itemsize * grams.shape[1]))).ravel()


@pytest.mark.parametrize("vocab_size, order, packed", CASES)
def test_lookup_of_present_and_absent_ngrams(vocab_size, order, packed):
    stream = repetitive_stream(vocab_size, 600, seed=1)
    table = count_ngrams(stream, order, vocab_size, packed=packed).table
    rng = np.random.default_rng(2)
    for n in range(1, order + 1):
        present = table.grams[n][rng.integers(0, table.size(n), 50)]
        assert np.array_equal(table.grams[n][table.index(n, present)], present)
        mutated = present.copy()
        mutated[:, rng.integers(0, n)] = rng.integers(0, vocab_size, 50)
        expected = np.isin(as_rows(mutated), as_rows(table.grams[n]))  # by the rows' bytes, not the search
        assert ((table.index(n, mutated) >= 0) == expected).all()


@pytest.mark.parametrize("vocab_size, order, packed", CASES)
def test_index_stream_matches_one_by_one_lookup(vocab_size, order, packed):
    train = repetitive_stream(vocab_size, 600, seed=3)
    table = count_ngrams(train, order, vocab_size, packed=packed).table
    other = np.concatenate([train[:40], np.random.default_rng(4).integers(0, vocab_size, 60)])
    idx = table.index_stream(other)
    for n in range(1, order + 1):
        for t in range(len(other)):
            expected = -1 if t < n - 1 else int(table.index(n, other[t - n + 1:t + 1][None, :])[0])
            assert idx[n][t] == expected, (n, t)


def test_table_from_grams_equals_counted_table_and_children():
    stream = repetitive_stream(50, 400, seed=5)
    counted = count_ngrams(stream, 3, 50).table
    shuffled = {n: counted.grams[n][np.random.default_rng(n).permutation(counted.size(n))] for n in (2, 3)}
    rebuilt = NgramTable(50, shuffled)
    for n in (1, 2, 3):
        assert np.array_equal(rebuilt.grams[n], counted.grams[n])
        assert np.array_equal(rebuilt.keys[n], counted.keys[n])
    row = int(counted.index(2, counted.grams[3][7][None, :2])[0])
    lo, hi = counted.children(3, row)
    assert np.all(counted.grams[3][lo:hi, :2] == counted.grams[2][row])
    assert hi - lo == sum(1 for g in counted.grams[3].tolist() if g[:2] == counted.grams[2][row].tolist())


def test_table_rejects_missing_prefix_and_duplicates():
    with pytest.raises(LMBenchError, match="not an 2-gram"):
        NgramTable(5, {2: np.array([[1, 2]]), 3: np.array([[3, 3, 3]])})
    with pytest.raises(LMBenchError, match="duplicates"):
        NgramTable(5, {2: np.array([[1, 2], [1, 2]])})


def test_count_errors_and_count_of_counts():
    with pytest.raises(LMBenchError, match="outside"):
        count_ngrams(np.array([0, 5]), 2, 5)
    with pytest.raises(LMBenchError, match="no 3-grams"):
        count_ngrams(np.array([0, 1]), 3, 5)
    assert count_of_counts(np.array([0, 1, 1, 2, 5, 9]), 3).tolist() == [0, 2, 1, 0]
