"""Confidence intervals on perplexities, and paired tests between two models, by a block bootstrap.

The tokens of a scored split are not independent (a document's words share a topic, and a model that
misjudges a document misjudges many of its tokens), so the bootstrap resamples whole blocks: the
documents where the corpus marks their ends with `</d>` (Brown, AP), else contiguous blocks of
BLOCK_TOKENS tokens (a user's corpus without the mark). A split of fewer than MIN_BLOCKS documents is
cut into MIN_BLOCKS contiguous blocks instead; more than MAX_BLOCKS documents (or blocks) are grouped,
consecutive ones together, into MAX_BLOCKS blocks of nearly equal numbers of documents.

Everything is computed from per-block sums: the sum of the natural-log probabilities of a block's
tokens and its token count, the few hundred numbers per split that every row of results.json keeps
(`row_blocks`), so that anyone can recompute the intervals from the committed files:
- `perplexity_interval`: the 95% percentile interval of exp(-sum lp / sum n) over RESAMPLES resamples
  of the blocks with replacement;
- `paired_difference`: two models scored on the same blocks, the relative perplexity ppl_a / ppl_b - 1
  and its 95% interval, both models resampled on the same blocks each time (a model against itself:
  exactly 0).
The resamples are drawn by numpy's default generator from `seed`: one seed, one interval.

Two things the documents alone do not give:
- **Correlated documents.** Consecutive documents of a newswire (or a genre of Brown) share topics, so
  a bootstrap over single documents treats as independent what is not, and its interval is too narrow
  (AP's KN 5 on valid: +-3.9% over 500 blocks of documents, +-4.8% over 100, +-5.7% over 50, +-7.6%
  over 20). `choose_grouping` groups consecutive blocks into fewer (`group`) for as long as that widens
  the interval: it measures one row's valid interval at the blocks as cut and at each of GROUPINGS
  below them, coarser and coarser down to MIN_BLOCKS blocks, the fewest an interval rests on, and
  stops where the half-width stops growing (a coarser grouping that narrows the interval is the noise
  of fewer blocks, not less correlation). Not the widest of all: the half-width over 20 blocks is
  itself noisy (about +-16%), so the widest of six is often the coarsest even for independent
  documents. Where the half-width grows all the way to MIN_BLOCKS (`Grouping.still_widening`), the
  correlation reaches further than MIN_BLOCKS blocks can show, and the report says that its intervals
  may be too narrow; the half-width at every grouping is recorded, and the claims are judged at each. It is chosen on
  valid and applied to valid and test alike; the claims are judged at every grouping tried as well,
  and a verdict that changes with the grouping says so (reports.building.claims).
- **Training randomness.** A paired difference cancels most of the test set's sampling, so the spread
  of a network over training seeds is no longer small beside it. `difference_draws` adds it where a
  row was run under K >= 2 seeds: each seed's difference on the whole test split (their sd s) says how
  far the seeds' mean difference lies from the one expected over training runs, s / sqrt(K) times a
  Student t with K - 1 degrees of freedom (K seeds estimate s); each bootstrap draw of the test set's
  sampling gets one draw of that term added (the paired interval widened by the seeds' variance of the
  difference; with 3 seeds the t's heavy tails make it wide, as 3 seeds warrant).
  `two_sided_p` gives a comparison's p-value from the same draws, for the Holm adjustment over a
  report's claims (reports.building.significance); none of the draws beyond the threshold says only that p is below
  the bootstrap's resolution, 1 / RESAMPLES, and `p_text` prints it so ("< 1/10000").

A split of fewer than MIN_BLOCKS blocks (a split of fewer than MIN_BLOCKS tokens: one token a block) gets
no interval and no paired test: `split_interval` and `paired_splits` give None ("too few blocks", with
one warning line), where a bootstrap over a handful of blocks would give an interval of almost no width.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np

from lmbench.errors import LMBenchError

log = logging.getLogger(__name__)

DOCUMENT_END = "</d>"  # the corpora's document-end marker (corpora/brown.py, corpora/ap.py)
BLOCK_TOKENS = 1000    # a block's tokens where the split marks no documents
MIN_BLOCKS = 20        # fewer documents than this: contiguous blocks instead
MAX_BLOCKS = 500       # more documents than this: grouped into this many blocks
RESAMPLES = 10_000      # (p-values down to 1e-4: a Holm adjustment over a report's claims needs them)
SEED = 0
QUANTILES = (0.025, 0.975)  # a 95% interval
DECIMALS = 3           # a block's log-probability sum as kept in results.json: at least these decimals (nats),
SIGNIFICANT = 12       # and at least these significant digits (`kept_sums`)
GROUPINGS = (100, 50, 40, 30, 20)  # the coarser and coarser groupings `choose_grouping` walks (>= MIN_BLOCKS)
TOO_FEW = "too few blocks"  # what stands for an interval (and a verdict) on fewer than MIN_BLOCKS blocks


def block_ends(ids: np.ndarray, end_id: int | None) -> tuple[np.ndarray, str]:
    """The blocks of a split of token `ids`: their end offsets (exclusive, the last one len(ids)) and
    a line saying how they were cut. `end_id`: the id of `</d>` (None: the vocabulary has none)."""
    ids = np.asarray(ids)
    n = len(ids)
    if n == 0:
        raise LMBenchError("cannot cut an empty split into bootstrap blocks: score a split of at least one token")
    ends = np.zeros(0, dtype=np.int64)
    if end_id is not None:
        ends = np.flatnonzero(ids == end_id) + 1
        if len(ends) == 0 or ends[-1] != n:
            ends = np.append(ends, n)  # the tail after the last mark: a document cut by the split
    if len(ends) >= MIN_BLOCKS:
        rule = f"{len(ends)} documents (each closed by {DOCUMENT_END})"
    else:
        size = max(1, min(BLOCK_TOKENS, n // MIN_BLOCKS))
        ends = np.append(np.arange(size, n, size), n)
        rule = f"{len(ends)} contiguous {size}-token blocks"
    if len(ends) > MAX_BLOCKS:
        ends = ends[(np.arange(1, MAX_BLOCKS + 1) * len(ends)) // MAX_BLOCKS - 1]
        rule += f", grouped into {MAX_BLOCKS} blocks of consecutive ones"
    return ends.astype(np.int64), rule


def block_sums(logprobs: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum of log-probabilities, token count) of every block ending at `ends`."""
    logprobs = np.asarray(logprobs, dtype=np.float64)
    if len(ends) == 0 or ends[-1] != len(logprobs):
        raise LMBenchError(f"the blocks cover {ends[-1] if len(ends) else 0} tokens but the split has "
                           f"{len(logprobs)} log-probabilities: cut the blocks from the split that was scored")
    starts = np.concatenate([[0], ends[:-1]])
    return np.add.reduceat(logprobs, starts), np.diff(ends, prepend=0)


def kept_sums(sums: np.ndarray) -> list[float]:
    """Block sums as results.json keeps them: each rounded to DECIMALS places, or to SIGNIFICANT
    significant digits where that keeps more. Decimals alone made the sums of a model that is nearly
    certain (1.6e-5 nats a token) all 0.0: an interval [1.0, 1.0] around a perplexity 1.0000156 computed
    from the unrounded log-probabilities, outside it; significant digits keep every sum to a part in
    1e12, so a perplexity and its interval come from the same numbers."""
    sums = np.asarray(sums, dtype=np.float64)
    magnitude = np.floor(np.log10(np.maximum(np.abs(sums), 1e-300)))
    places = np.maximum(DECIMALS, SIGNIFICANT - 1 - magnitude).astype(np.int64)
    return [float(round(value, int(digits))) for value, digits in zip(sums.tolist(), places.tolist())]


def row_blocks(logprobs: np.ndarray, ends: np.ndarray) -> dict:
    """A split's blocks as results.json keeps them: `logprob` (sums, `kept_sums`) and `tokens`."""
    sums, counts = block_sums(logprobs, ends)
    return {"logprob": kept_sums(sums), "tokens": counts.tolist()}


def _resampled(blocks: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, blocks) block indices drawn with replacement."""
    return np.random.default_rng(seed).integers(0, blocks, size=(resamples, blocks))


def _interval(values: np.ndarray) -> tuple[float, float]:
    low, high = np.quantile(values, QUANTILES)
    return float(low), float(high)


def perplexity_interval(sums: np.ndarray, counts: np.ndarray, *, resamples: int = RESAMPLES,
                        seed: int = SEED) -> tuple[float, float]:
    """The 95% bootstrap interval of the perplexity of blocks of log-probability `sums` and token `counts`."""
    sums, counts = np.asarray(sums, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    chosen = _resampled(len(sums), resamples, seed)
    with np.errstate(over="ignore"):
        return _interval(np.exp(-sums[chosen].sum(axis=1) / counts[chosen].sum(axis=1)))


def paired_difference(sums_a: np.ndarray, sums_b: np.ndarray, counts: np.ndarray, *, resamples: int = RESAMPLES,
                      seed: int = SEED) -> tuple[float, tuple[float, float]]:
    """Model a against model b on the same blocks: ppl_a / ppl_b - 1 (negative: a is lower) and its 95%
    bootstrap interval, the difference in mean log-probability taken on the same resampled blocks."""
    sums_a, sums_b = np.asarray(sums_a, dtype=np.float64), np.asarray(sums_b, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.int64)
    if not sums_a.shape == sums_b.shape == counts.shape:
        raise LMBenchError(f"the two models are not scored on the same blocks ({len(sums_a)} and {len(sums_b)} "
                           f"sums, {len(counts)} counts): compare rows scored on the same split of one corpus")
    gain = sums_b - sums_a  # how much more log-probability b gives each block than a
    chosen = _resampled(len(gain), resamples, seed)
    difference = float(np.expm1(gain.sum() / counts.sum()))
    return difference, _interval(np.expm1(gain[chosen].sum(axis=1) / counts[chosen].sum(axis=1)))


def enough_blocks(blocks: dict) -> bool:
    """Whether a split's blocks (as results.json keeps them) are enough for an interval: MIN_BLOCKS or more."""
    return len(blocks["tokens"]) >= MIN_BLOCKS


def split_interval(blocks: dict) -> tuple[float, float] | None:
    """`perplexity_interval` of one split's blocks as results.json keeps them (`row_blocks`); None for
    too few blocks (`enough_blocks`)."""
    return perplexity_interval(blocks["logprob"], blocks["tokens"]) if enough_blocks(blocks) else None


def intervals(blocks: dict) -> dict:
    """`{split}_ppl_ci95` of a row from its blocks of each split ({split: blocks}, as results.json keeps
    them); null for a split of too few blocks."""
    found = {split: split_interval(split_blocks) for split, split_blocks in blocks.items()}
    for split in (split for split, interval in found.items() if interval is None):
        log.warning("%s: %s holds %d tokens in %d blocks, fewer than the %d an interval needs: no interval and "
                    "no verdict on it; score a %s split of at least %d tokens", TOO_FEW, split,
                    sum(blocks[split]["tokens"]), len(blocks[split]["tokens"]), MIN_BLOCKS, split, MIN_BLOCKS)
    return {f"{split}_ppl_ci95": None if interval is None else list(interval) for split, interval in found.items()}


def _same_blocks(blocks: list[dict], *, fix: str) -> None:
    """One line, naming `fix`, unless every one of `blocks` holds the same token counts (the same blocks)."""
    if any(found["tokens"] != blocks[0]["tokens"] for found in blocks):
        raise LMBenchError(f"the blocks hold different token counts, so they are not the same blocks: {fix}")


def mean_blocks(runs: list[dict]) -> dict:
    """One split's blocks (as `row_blocks` keeps them) of several runs of a model, under several seeds,
    as one: each block's log-probability sum the mean of the runs', so that `split_interval` is the
    interval of the seeds' mean log-probability (its centre the geometric mean of their perplexities)."""
    _same_blocks(runs, fix="average runs scored on the same split")
    return {"logprob": kept_sums(np.mean([run["logprob"] for run in runs], axis=0)),
            "tokens": runs[0]["tokens"]}


def paired_splits(blocks_a: dict, blocks_b: dict) -> tuple[float, tuple[float, float] | None]:
    """`paired_difference` of two rows' blocks of one split as results.json keeps them; the interval None
    for too few blocks (`enough_blocks`), the difference still given."""
    _same_blocks([blocks_a, blocks_b], fix="compare rows of one results.json, scored on the same split")
    difference, interval = paired_difference(blocks_a["logprob"], blocks_b["logprob"], blocks_a["tokens"])
    return difference, interval if enough_blocks(blocks_a) else None


def group(blocks: dict, groups: int) -> dict:
    """One split's blocks (as `row_blocks` keeps them) grouped, consecutive ones together, into `groups`
    blocks of nearly equal numbers of them (all of them when there are no more than `groups`)."""
    count = len(blocks["tokens"])
    if count <= groups:
        return blocks
    ends = (np.arange(1, groups + 1) * count) // groups
    starts = np.concatenate([[0], ends[:-1]])
    return {"logprob": kept_sums(np.add.reduceat(np.asarray(blocks["logprob"], dtype=np.float64), starts)),
            "tokens": np.add.reduceat(np.asarray(blocks["tokens"], dtype=np.int64), starts).tolist()}


def half_width(blocks: dict) -> float:
    """Half the width of a split's 95% interval, relative to its perplexity (0.035: +-3.5%)."""
    low, high = split_interval(blocks)
    return (high - low) / 2 / float(np.exp(-np.sum(blocks["logprob"]) / np.sum(blocks["tokens"])))


class Grouping(NamedTuple):
    """The grouping `choose_grouping` picks: the number of blocks (`blocks`), the relative half-width at
    every grouping tried ({blocks: half-width}, the blocks as cut first), and whether the half-width was
    still growing at the coarsest grouping there is (`still_widening`: the intervals may be too narrow)."""
    blocks: int
    widths: dict[int, float]
    still_widening: bool


def groupings(count: int) -> list[int]:
    """The numbers of blocks a split of `count` blocks is tried at: as cut, then each of GROUPINGS below
    it (none below MIN_BLOCKS), coarser and coarser."""
    return [count] + [groups for groups in GROUPINGS if MIN_BLOCKS <= groups < count]


def choose_grouping(blocks: dict) -> Grouping:
    """The number of blocks to group a split into (module docstring), from one row's blocks of valid:
    walking from the blocks as cut through each coarser grouping of `groupings`, the last one before the
    half-width stops growing; the half-widths at every grouping, and whether it grew all the way."""
    count = len(blocks["tokens"])
    if not enough_blocks(blocks):  # no interval to widen: the blocks as cut
        return Grouping(count, {}, False)
    tried = groupings(count)
    widths = {groups: half_width(group(blocks, groups)) for groups in tried}
    chosen = tried[0]
    for coarser in tried[1:]:
        if widths[coarser] <= widths[chosen]:
            break
        chosen = coarser
    return Grouping(chosen, widths, len(tried) > 1 and chosen == tried[-1])


def difference_draws(blocks_a: dict, blocks_b: dict, seed_gaps: list[float] | None = None, *,
                     resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, np.ndarray]:
    """Row a against row b on the same blocks of one split: log(ppl_a / ppl_b) and `resamples` bootstrap
    draws of it (both rows resampled on the same blocks each time). With `seed_gaps`, each seed's
    log(ppl_a / ppl_b) (K >= 2 of them), each draw also gets the training term (module docstring)."""
    _same_blocks([blocks_a, blocks_b], fix="compare rows of one results.json, scored on the same split")
    gain = np.asarray(blocks_b["logprob"], dtype=np.float64) - np.asarray(blocks_a["logprob"], dtype=np.float64)
    counts = np.asarray(blocks_a["tokens"], dtype=np.int64)
    chosen = _resampled(len(gain), resamples, seed)
    draws = gain[chosen].sum(axis=1) / counts[chosen].sum(axis=1)
    if seed_gaps is not None and len(seed_gaps) >= 2:
        spread = float(np.std(seed_gaps, ddof=1)) / np.sqrt(len(seed_gaps))
        draws = draws + spread * np.random.default_rng([seed, 1]).standard_t(len(seed_gaps) - 1, size=resamples)
    return float(gain.sum() / counts.sum()), draws


def percentile_interval(draws: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap draws."""
    return _interval(draws)


def two_sided_p(draws: np.ndarray, threshold: float) -> float:
    """The bootstrap's two-sided p-value of `threshold`: twice the share of the draws on its less
    crowded side (0: none of the draws, p below 1 / len(draws), `p_text`); at most 0.05 when the 95%
    percentile interval leaves `threshold` out (to within the interpolation between two draws)."""
    return float(min(1.0, 2 * min(np.mean(draws <= threshold), np.mean(draws >= threshold))))


def p_text(p: float | None, resamples: int = RESAMPLES) -> str:
    """A bootstrap p-value as a report prints it: to 2 significant figures, or "< 1/N" where it is below
    the resolution of N resamples (none of the draws beyond the threshold: 0 says only that much);
    blank for none."""
    if p is None:
        return ""
    return f"< 1/{resamples}" if p < 1 / resamples else f"{p:.2g}"
