"""A network mixed with KN 5 and the ∞-gram (issue 37): the rows beside every "+ KN 5" row, the three-part
EM per effective-n bucket on valid (mixing.saved.mix_with_counts), its claims and its lines in the figure."""

import json

import numpy as np
import pytest
from scipy.special import logsumexp

from lmbench.errors import LMBenchError
from mixing import saved
from reports.building.claims import count_claims
from lmbench.model import perplexity
from reports.experiments import (INFINI_GRAM, WITH_COUNTS, ap_rows, brown_rows, energy_rows, rows_beyond_2003,
                                 text_rows)
from tests.helpers import run_cli
from tests.lm_checks import make_corpus


@pytest.mark.parametrize("table", [brown_rows() + energy_rows() + rows_beyond_2003(), ap_rows() + rows_beyond_2003(),
                                   text_rows(1000), text_rows(1000, only="nplm")])
def test_every_kn5_mixture_has_its_counts_mixture_beside_it(table):
    ids = [row.id for row in table]
    assert INFINI_GRAM in ids
    kn5 = [i for i, row in enumerate(table) if row.id.endswith("-kn-interp-5-em")]
    assert kn5 and len(kn5) == sum(row.mix == WITH_COUNTS for row in table)
    for i in kn5:
        network = table[i].parts[0]
        beside = table[i + 1]
        assert beside.id == f"{network}-kn-interp-5-infini-gram" and beside.model == f"{table[i].model} + ∞-gram"
        assert beside.kind == "mix" and beside.mix == WITH_COUNTS
        assert beside.parts == (network, "kn-interp-5", INFINI_GRAM)


def _parts(seed: int, valid: int = 4000, test: int = 3000):
    """Saved files of a network, KN 5 and the ∞-gram (+ KN 5, with log P∞, effective n and its buckets) over
    random streams: P∞ is sharp where the effective n is high, and 0 for a share of tokens."""
    rng = np.random.default_rng(seed)
    files = [{}, {}, {}]
    for split, size in (("valid", valid), ("test", test)):
        buckets = np.minimum(rng.geometric(0.3, size), 16) - 1
        network, kn = np.log(rng.uniform(0.01, 0.3, size)), np.log(rng.uniform(0.005, 0.2, size))
        seen = rng.uniform(size=size) < 0.2 + 0.05 * buckets
        p_inf = np.where(seen, np.log(rng.uniform(0.2, 1.0, size)), -np.inf)
        with np.errstate(divide="ignore"):
            files[0][split], files[1][split] = network, kn
            files[2].update({split: np.logaddexp(np.log(0.3) + p_inf, np.log(0.7) + kn), f"p_inf_{split}": p_inf,
                             f"effective_n_{split}": buckets + 1, f"buckets_{split}": buckets})
    return files


def test_counts_mixture_weights_per_bucket_on_valid_only():
    network, kn, infini_gram = _parts(0)
    mixed, weights = saved.mix_with_counts([network, kn], infini_gram)
    buckets = infini_gram["buckets_valid"]
    assert weights.shape == (buckets.max() + 1, 3)
    assert np.allclose(weights.sum(axis=1), 1) and (weights > 0).all() and (weights <= 1).all()
    # a distribution-weighted combination, token by token: log sum_k w_k(q_t) P_k(w_t)
    parts = np.stack([network["valid"], kn["valid"], infini_gram["p_inf_valid"]])
    assert np.allclose(mixed["valid"], logsumexp(parts + np.log(weights[buckets].T), axis=0))
    assert np.isfinite(mixed["test"]).all()
    # EM on valid cannot lose to a part there: each of them is a choice of the weights (up to the shrinking)
    for part in (network, kn, infini_gram):
        assert mixed["valid"].sum() > part["valid"].sum()
    # the weights depend on valid alone: another test split leaves them and valid's scores as they were
    other = _parts(1)
    for mine, theirs in zip((network, kn, infini_gram), other):
        mine.update({key: value for key, value in theirs.items() if key.endswith("test")})
    mixed_again, weights_again = saved.mix_with_counts([network, kn], infini_gram)
    assert np.array_equal(weights_again[:len(weights)], weights[:len(weights_again)])
    assert np.array_equal(mixed_again["valid"], mixed["valid"])
    assert not np.array_equal(mixed_again["test"], mixed["test"])


def test_counts_mixture_needs_log_p_inf():
    network, kn, infini_gram = _parts(2)
    del infini_gram["p_inf_valid"]
    with pytest.raises(LMBenchError, match="p_inf_valid"):
        saved.mix_with_counts([network, kn], infini_gram)


def test_cli_mixes_with_counts(tmp_path, capsys):
    paths, corpus = [], make_corpus("a b a b", "a b", "b a")  # the stream the three files record
    for name, arrays in zip(("network", "kn", "infini"), _parts(3)):
        paths.append(tmp_path / f"{name}.npz")
        saved.save(paths[-1], arrays, corpus)
    code, stdout, stderr = run_cli(capsys, "mix", *paths[:2], "--with-counts", paths[2], "--json")
    assert code == 0, stderr
    result = json.loads(stdout)
    mixed, weights = saved.mix_with_counts([saved.load(path) for path in paths[:2]], saved.load(paths[2]))
    assert result["method"] == "with counts" and np.allclose(result["weights"], weights, atol=1e-6)
    assert result["test_perplexity"] == pytest.approx(perplexity(mixed["test"]))
    code, _, stderr = run_cli(capsys, "mix", *paths[:2], "--with-counts", paths[2], "--method", "em")
    assert code != 0 and "--with-counts fits its own weights" in stderr


def _row(row_id, ppl, valid=None, mix=None, parts=()):
    return {"id": row_id, "test_ppl": ppl, "valid_ppl": valid or ppl, "mix": mix, "parts": list(parts)}


def test_count_claims_ask_of_the_best_network_on_valid():
    rows = [_row("kn-interp-5", 200), _row(INFINI_GRAM, 195),
            _row("a", 150, valid=170), _row("a-kn-interp-5-em", 140, mix="EM", parts=("a", "kn-interp-5")),
            _row("a-kn-interp-5-infini-gram", 141, mix=WITH_COUNTS, parts=("a", "kn-interp-5", INFINI_GRAM)),
            _row("b", 140, valid=180), _row("b-kn-interp-5-em", 130, mix="EM", parts=("b", "kn-interp-5")),
            _row("b-kn-interp-5-infini-gram", 120, mix=WITH_COUNTS, parts=("b", "kn-interp-5", INFINI_GRAM))]
    claims = {claim["claim"]: claim for claim in count_claims({row["id"]: row for row in rows})}
    assert claims["∞-gram + KN 5 beats interpolated KN 5"]["verdict"] == "holds"
    network = claims["The best network + KN 5 + ∞-gram beats the best network + KN 5"]
    assert network["ours"].startswith("a-kn-interp-5-infini-gram 141.0 vs a-kn-interp-5-em 140.0")  # a: best on valid
    assert network["verdict"] == "does not hold"
    assert count_claims({"kn-interp-5": rows[0]}) == []  # asked only where the rows exist


def test_figure_draws_the_best_network_and_its_counts_mixture(tmp_path, monkeypatch):
    from reports.building import figures
    drawn = {}
    monkeypatch.setattr(figures, "save_figure", lambda fig, directory, name: drawn.__setitem__(name, fig))
    profile = {"n": list(range(1, 17)), "tokens": [5] * 16, "p_inf_nonzero": [0.5] * 16,
               "kn_mean_logprob": [-5.0] * 16, "mixed_mean_logprob": [-4.9] * 16}
    by_bucket = {"network_mean_logprob": [-4.5] * 16, "mixed_mean_logprob": [-4.4] * 16}
    rows = [{"id": INFINI_GRAM, "effective_n": profile},
            {**_row("a", 150, valid=170), "model": "A"}, {**_row("b", 140, valid=180), "model": "B"},
            *[{**_row(f"{n}-kn-interp-5-infini-gram", 120, mix=WITH_COUNTS, parts=(n, "kn-interp-5", INFINI_GRAM)),
               "model": f"{n.upper()} + KN interpolated 5 + ∞-gram", "effective_n": by_bucket} for n in "ab"]]
    figures.effective_n({"rows": rows}, tmp_path)
    labels = [line.get_label() for line in drawn["effective_n"].axes[1].get_lines()]
    assert labels == ["interpolated KN 5", "∞-gram + KN 5", "A", "A + KN interpolated 5 + ∞-gram"]
    figures.effective_n({"rows": rows[:3]}, tmp_path)  # no mixture with counts: KN 5 and ∞-gram + KN 5
    assert [line.get_label() for line in drawn["effective_n"].axes[1].get_lines()][2:] == []
