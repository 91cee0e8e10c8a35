"""The block bootstrap of lmbench.bootstrap: its 95% interval covers the true perplexity about 95% of
the time on a stream of known distribution, a model compared with itself differs by exactly 0, a
seed gives one interval, and blocks follow the corpus's documents."""

import numpy as np
import pytest

from lmbench.bootstrap import (BLOCK_TOKENS, MAX_BLOCKS, MIN_BLOCKS, block_ends, block_sums, paired_difference,
                               perplexity_interval, row_blocks)
from lmbench.errors import LMBenchError

END = 3  # the id of `</d>` in the synthetic streams


def synthetic_split(rng, documents: int = 80):
    """Token ids with `</d>` closing each document, and per-token log-probabilities of known mean -4:
    minus a Gamma(2, scale) draw, each document with its own scale (uniform on 1..3, mean 2), so that
    the tokens of a document are correlated as a real model's are."""
    lengths = rng.integers(50, 400, size=documents)
    ids = rng.integers(4, 50, size=lengths.sum()).astype(np.int32)
    ids[np.cumsum(lengths) - 1] = END
    scales = np.repeat(rng.uniform(1.0, 3.0, size=documents), lengths)
    return ids, -rng.gamma(2.0, scales)


def test_the_interval_covers_the_true_perplexity_about_95_times_in_100():
    rng = np.random.default_rng(2003)
    true_ppl = np.exp(4.0)
    covered = 0
    for repetition in range(200):
        ids, logprobs = synthetic_split(rng)
        ends, _ = block_ends(ids, END)
        low, high = perplexity_interval(*block_sums(logprobs, ends), seed=repetition)
        covered += low <= true_ppl <= high
    assert 0.90 <= covered / 200 <= 0.99


def test_the_paired_interval_covers_the_true_difference_about_95_times_in_100():
    """Model b gives every token 0.02 nats more than model a on average, with a spread of its own per
    token and per document: the true relative perplexity ppl_a / ppl_b - 1 is expm1(0.02)."""
    rng = np.random.default_rng(1989)
    covered = 0
    for repetition in range(200):
        ids, model_a = synthetic_split(rng)
        ends, _ = block_ends(ids, END)
        lengths = np.diff(ends, prepend=0)
        model_b = model_a + 0.02 + rng.normal(0, 0.3, size=len(ids)) + np.repeat(rng.normal(0, 0.05, len(ends)), lengths)
        counts = block_sums(model_a, ends)[1]
        _, (low, high) = paired_difference(block_sums(model_a, ends)[0], block_sums(model_b, ends)[0], counts,
                                           seed=repetition)
        covered += low <= np.expm1(0.02) <= high
    assert 0.90 <= covered / 200 <= 0.99


def test_a_model_against_itself_differs_by_exactly_zero():
    ids, logprobs = synthetic_split(np.random.default_rng(1))
    sums, counts = block_sums(logprobs, block_ends(ids, END)[0])
    difference, (low, high) = paired_difference(sums, sums, counts)
    assert difference == 0.0 and low == 0.0 and high == 0.0


def test_the_paired_difference_is_the_relative_perplexity_and_sees_a_small_shift():
    """A model whose every log-probability is 0.01 nats lower: about 1% higher perplexity, which the
    paired test finds significant though each model's own interval is far wider than 1%."""
    ids, logprobs = synthetic_split(np.random.default_rng(2))
    ends, _ = block_ends(ids, END)
    sums, counts = block_sums(logprobs, ends)
    worse, _ = block_sums(logprobs - 0.01, ends)
    difference, (low, high) = paired_difference(worse, sums, counts)
    assert difference == pytest.approx(np.exp(0.01) - 1)
    assert 0 < low <= high
    own_low, own_high = perplexity_interval(sums, counts)
    assert own_high / own_low - 1 > 0.05


def test_identical_seeds_give_identical_intervals():
    ids, logprobs = synthetic_split(np.random.default_rng(3))
    sums, counts = block_sums(logprobs, block_ends(ids, END)[0])
    assert perplexity_interval(sums, counts, seed=7) == perplexity_interval(sums, counts, seed=7)
    assert perplexity_interval(sums, counts, seed=7) != perplexity_interval(sums, counts, seed=8)
    assert paired_difference(sums, sums * 1.01, counts, seed=7) == paired_difference(sums, sums * 1.01, counts, seed=7)


def test_blocks_are_whole_documents_and_the_tail_after_the_last_one():
    ids = np.array([5, 6, END, 7, END, 8, 9], dtype=np.int32)
    ids = np.tile(ids, MIN_BLOCKS)  # enough documents to resample them
    ends, rule = block_ends(ids, END)
    assert ends[:3].tolist() == [3, 5, 10] and ends[-1] == len(ids) and "documents" in rule
    sums, counts = block_sums(np.arange(len(ids), dtype=np.float64), ends)
    assert counts[:3].tolist() == [3, 2, 5] and sums[:2].tolist() == [0 + 1 + 2, 3 + 4]
    assert counts.sum() == len(ids)


def test_many_documents_are_grouped_into_at_most_max_blocks_consecutive_blocks():
    ids = np.tile(np.array([5, END], dtype=np.int32), 3 * MAX_BLOCKS + 7)
    ends, rule = block_ends(ids, END)
    assert len(ends) == MAX_BLOCKS and ends[-1] == len(ids) and np.all(np.diff(ends) > 0)
    assert set(np.diff(ends)) <= {6, 8} and "grouped" in rule


def test_a_split_without_document_marks_is_cut_into_contiguous_blocks():
    ends, rule = block_ends(np.full(100 * BLOCK_TOKENS + 3, 5, dtype=np.int32), None)
    assert np.diff(ends[:-1]).tolist() == [BLOCK_TOKENS] * 99 and ends[-1] == 100 * BLOCK_TOKENS + 3
    assert f"{BLOCK_TOKENS}-token" in rule
    short_ends, _ = block_ends(np.full(2000, 5, dtype=np.int32), END)  # too few documents: shorter blocks
    assert len(short_ends) == MIN_BLOCKS


def test_row_blocks_round_trip_through_json_numbers():
    ids, logprobs = synthetic_split(np.random.default_rng(4))
    blocks = row_blocks(logprobs, block_ends(ids, END)[0])
    assert sum(blocks["tokens"]) == len(logprobs)
    assert sum(blocks["logprob"]) == pytest.approx(logprobs.sum(), abs=1e-3 * len(blocks["tokens"]))
    assert all(type(x) is float for x in blocks["logprob"]) and all(type(n) is int for n in blocks["tokens"])


def test_blocks_of_different_splits_are_refused_in_one_line():
    with pytest.raises(LMBenchError, match="same blocks"):
        paired_difference(np.zeros(3), np.zeros(4), np.ones(3, dtype=np.int64))


def test_a_seeded_rows_blocks_are_its_seeds_mean_and_its_claims_test_that_mean():
    """A row under two seeds (reports.running.seeds.over_seeds): its blocks are the seeds' mean block sums, its
    interval theirs (centred on the geometric mean of the seeds' perplexities, not on the first seed's),
    and a paired test of the row against its first seed sees the second seed's shift."""
    from lmbench.bootstrap import mean_blocks, paired_splits, split_interval
    from reports.running.seeds import over_seeds

    rng = np.random.default_rng(5)
    ids, logprobs = synthetic_split(rng)
    ends, _ = block_ends(ids, END)
    runs = [{"id": "net", "test_ppl": float(np.exp(-lp.mean())), "seconds": 1.0,
             "blocks": {"test": row_blocks(lp, ends)}} for lp in (logprobs, logprobs - 1.0)]
    row = over_seeds([0, 1], *runs)
    assert row["blocks"]["test"] == mean_blocks([run["blocks"]["test"] for run in runs])
    assert row["blocks"]["test"]["logprob"] == pytest.approx(np.mean([run["blocks"]["test"]["logprob"] for run in runs],
                                                                     axis=0), abs=1e-3)
    assert row["test_ppl_ci95"] == list(split_interval(row["blocks"]["test"]))
    geometric = np.exp(np.mean([np.log(run["test_ppl"]) for run in runs]))
    low, high = row["test_ppl_ci95"]
    first_low, first_high = split_interval(runs[0]["blocks"]["test"])
    assert low < geometric < high and not first_low < geometric < first_high
    difference, _ = paired_splits(row["blocks"]["test"], runs[0]["blocks"]["test"])
    assert difference == pytest.approx(np.exp(0.5) - 1, rel=1e-4)  # half the second seed's 1 nat
    with pytest.raises(LMBenchError, match="not the same blocks"):
        mean_blocks([runs[0]["blocks"]["test"], {"logprob": [0.0], "tokens": [1]}])
