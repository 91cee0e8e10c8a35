"""The paper's claims as checks on our numbers: each gives the paper's figure, ours and a verdict.

The claims are about the paper's network (`reports.records.paper_network`): a row of another family
(the energy network, or any family added later) or of our own design never takes part. Our own
networks get claims of their own, as relations on the same rows: NPLM (ours) against interpolated
KN 5 (`ours_claims`), and the networks beyond 2003 (the registry's: LSTM, GRU, Transformer), where the run has
them (`beyond_2003`); the ∞-gram, alone with KN 5 and added to the best network's mixture, where the
run has those rows (`count_claims`).

Every claim that compares rows is made of checks (`Check`: one row below or above another by more than
a threshold, 0 for "A beats B"), each with a paired bootstrap test on the rows' test blocks
(lmbench.bootstrap): the claim records the relative perplexity `difference` (%), its 95% interval
`difference_ci95` and whether it is `significant`, and its verdict reads "holds (-4.1%, 95% CI -5.0%
to -3.2%)", "fails (...)" or "not significant (...)". Results whose rows keep no blocks (written
before rows kept them) keep the verdicts of the perplexities alone, "holds" or "does not hold", and
no interval (`NO_INTERVAL`).
"""

from __future__ import annotations

from typing import NamedTuple

from lmbench.bootstrap import MIN_BLOCKS, TOO_FEW, paired_splits
from neural.families import FAMILIES
from reports.experiments import INFINI_GRAM, PAPER_FAMILY, STREAM_NETWORKS, WITH_COUNTS
from reports.records import network_of, paper_network

TOO_FEW_NOTE = (f"No interval: the test split holds fewer than {MIN_BLOCKS} bootstrap blocks, too few for one, so "
                "no claim gets a verdict (\"too few blocks\"); score a longer test split.")
NO_INTERVAL = ("No interval: these results keep no per-block sums of log-probabilities (written before rows "
               "kept them), so the verdicts compare the perplexities alone; running the reproduction again "
               "adds them (finished rows come from the row cache).")


class Check(NamedTuple):
    """One comparison a claim makes: row `a`'s test perplexity lies below (`below`) or above row `b`'s,
    by more than `threshold` % of b's: 100 (ppl_a / ppl_b - 1) < threshold (below) or > threshold."""
    a: str
    b: str
    threshold: float = 0.0
    below: bool = True

    def margin(self, low: float, high: float) -> float:
        """How far an interval (low, high) of the difference (a point: low = high) reaches past the
        threshold on the wrong side (negative: it stops short, all of it on the claim's side)."""
        return high - self.threshold if self.below else self.threshold - low


def _tested(rows: dict, check: Check) -> dict:
    """A check's difference (%) and, when both rows keep their test blocks, the paired bootstrap's 95%
    interval of it (lmbench.bootstrap.paired_splits) and where it lies: "holds" (all of it on the
    claim's side of the threshold), "fails" (all on the other side) or "not significant"."""
    a, b = rows[check.a], rows[check.b]
    found = {"difference": gap(a["test_ppl"], b["test_ppl"]), "difference_ci95": None, "side": None}
    blocks = [row.get("blocks", {}).get("test") for row in (a, b)]
    interval = paired_splits(*blocks)[1] if all(blocks) else None
    if all(blocks) and interval is None:
        found["side"] = TOO_FEW
    elif all(blocks):
        interval = [100 * bound for bound in interval]
        flipped = check._replace(below=not check.below)
        found["difference_ci95"] = interval
        found["side"] = ("holds" if check.margin(*interval) < 0 else
                         "fails" if flipped.margin(*interval) < 0 else "not significant")
    return found


def _judged(rows: dict, checks: list[Check]) -> dict:
    """The verdict of a claim made of `checks`, all of which must hold, and the numbers of the check that
    decides it. With intervals: "holds" when every check's interval lies on the claim's side of its
    threshold, "fails" when one lies on the other side, else "not significant" (so a claim that a model
    beats another is never "holds" while the interval crosses 0), with the difference and interval of
    the deciding check (of the checks with that verdict, the one reaching furthest to the wrong side).
    Without intervals (a row keeps no blocks): "holds" or "does not hold" on the perplexities alone."""
    tested = [(check, _tested(rows, check)) for check in checks]
    few = [(check, found) for check, found in tested if found["side"] == TOO_FEW]
    if few:  # no verdict: fewer test blocks than an interval needs (lmbench.bootstrap.enough_blocks)
        check, found = few[0]
        return {"verdict": f"{TOO_FEW} ({found['difference']:+.1f}%; fewer than {MIN_BLOCKS} test blocks)",
                "difference": found["difference"], "difference_ci95": None, "significant": None,
                "threshold": check.threshold}
    if any(found["side"] is None for _, found in tested):
        check, found = max(tested, key=lambda cf: cf[0].margin(cf[1]["difference"], cf[1]["difference"]))
        return {"verdict": "holds" if check.margin(found["difference"], found["difference"]) < 0 else "does not hold",
                "difference": found["difference"], "difference_ci95": None, "significant": None,
                "threshold": check.threshold}
    verdict = next((side for side in ("fails", "not significant") if any(f["side"] == side for _, f in tested)),
                   "holds")
    check, found = max(((c, f) for c, f in tested if f["side"] == verdict),
                       key=lambda cf: cf[0].margin(*cf[1]["difference_ci95"]))
    low, high = found["difference_ci95"]
    places = decimals(found["difference"], low, high)
    claimed = "" if check.threshold == 0 else f"; claimed: {'below' if check.below else 'above'} {check.threshold:+.0f}%"
    return {"verdict": f"{verdict} ({found['difference']:+.{places}f}%, 95% CI {low:+.{places}f}% to "
                       f"{high:+.{places}f}%{claimed})",
            "difference": found["difference"], "difference_ci95": found["difference_ci95"],
            "significant": verdict != "not significant", "threshold": check.threshold}


def _test(rows: dict, row_id: str) -> float | None:
    row = rows.get(row_id)
    return None if row is None else row.get("test_ppl")


def _best(rows: dict, chosen) -> tuple[str, float] | None:
    """The row with the lowest test perplexity (ties: first id) among those `chosen(row, rows)` picks."""
    candidates = [(r["test_ppl"], r["id"]) for r in rows.values() if chosen(r, rows) and r.get("test_ppl") is not None]
    return None if not candidates else min(candidates)[::-1]


def _network_alone(row: dict, rows: dict) -> bool:
    return paper_network(row, rows) and not row["mix"]


def _network_mixed(row: dict, rows: dict) -> bool:
    return paper_network(row, rows) and bool(row["mix"])


def _mixed_with_trigram(row: dict, rows: dict) -> bool:
    return _network_mixed(row, rows) and any(rows.get(part, {}).get("method") == "deleted-interpolation"
                                                   for part in row["parts"])


def _ngram(row: dict, rows: dict) -> bool:
    return bool(row["method"])  # an n-gram model of `lmbench ngram --method`


def _claim(text: str, paper: str, rows: dict, checks: list[Check] | None, ours: str) -> dict:
    """A claim of the paper's: "not run" without checks (rows missing), else judged (`_judged`)."""
    if not checks:
        return {"claim": text, "paper": paper, "ours": ours, "verdict": "not run"}
    return {"claim": text, "paper": paper, "ours": ours, **_judged(rows, checks)}


def gap(ours: float, other: float) -> float:
    """How far `ours` lies above `other`, in % of `other` (negative: below; the paper's "24% lower"
    is 1 - nplm / ngram)."""
    return 100 * (ours / other - 1)


def decimals(*percents: float) -> int:
    """The decimal places (1 to 3) that show every non-zero one of `percents` as non-zero, so that a
    difference of 0.04% with its interval reads "-0.04%, 95% CI -0.05% to -0.03%", not "-0.0%"."""
    return next((places for places in (1, 2) if all(round(p, places) != 0 for p in percents if p != 0)), 3)


def versus(ours: tuple[str, float], other: tuple[str, float]) -> str:
    """The evidence of every claim comparing two rows, in one wording: 'mlp1 77.6 vs kn-interp-5 63.5:
    22.2% higher' (or 'x% lower'), the percentage of `other`'s perplexity."""
    difference = gap(ours[1], other[1])
    return (f"{ours[0]} {ours[1]:.1f} vs {other[0]} {other[1]:.1f}: "
            f"{abs(difference):.{decimals(difference)}f}% {'higher' if difference > 0 else 'lower'}")


def check_claims(results: dict) -> list[dict]:
    rows = {r["id"]: r for r in results["rows"]}
    corpus = results["corpus"]
    ours = ours_claims(rows) + beyond_2003(rows) + count_claims(rows)
    if corpus not in ("brown", "ap"):
        return relations(rows) + ours
    return paper_claims(rows, corpus) + [{**claim, "paper": "not in the paper (2003)"} for claim in ours]


def paper_claims(rows: dict, corpus: str) -> list[dict]:
    """The paper's claims on Table 1 (Brown) or Table 2 (AP)."""
    claims = []
    best_nplm = _best(rows, _network_alone)
    best_ngram = _best(rows, _ngram)
    paper_gap = {"brown": "24% (class-based 3-gram, 500 classes: 312 vs MLP10 252)", "ap": "about 8%"}[corpus]
    alone_text = "The NPLM alone, unmixed, beats the best n-gram model"
    alone_paper = "MLP1 268 vs class-based 312 (14% lower)" if corpus == "brown" else "no unmixed row in Table 2"
    if best_nplm and best_ngram:
        mixed_nplm = _best(rows, _network_mixed)
        nplm_id, nplm_ppl = min([best_nplm] + ([mixed_nplm] if mixed_nplm else []), key=lambda x: x[1])
        claims.append(_claim("The best NPLM has a lower test perplexity than the best n-gram model", paper_gap,
                             rows, [Check(nplm_id, best_ngram[0])], versus((nplm_id, nplm_ppl), best_ngram)))
        claims.append(_claim(alone_text, alone_paper, rows, [Check(best_nplm[0], best_ngram[0])],
                             versus(best_nplm, best_ngram)))
    else:
        claims.append(_claim("The best NPLM has a lower test perplexity than the best n-gram model",
                             paper_gap, rows, None, "missing rows"))
        claims.append(_claim(alone_text, alone_paper, rows, None, "missing rows"))
    di = _test(rows, "del-int")
    if corpus == "brown":
        if di and best_nplm:
            mixed = _best(rows, _network_mixed)
            best_id, best_ppl = min([best_nplm] + ([mixed] if mixed else []), key=lambda x: x[1])
            claims.append(_claim("The deleted-interpolation trigram is far above the best NPLM",
                                 "33% above (336 vs 252)", rows, [Check("del-int", best_id, 10, below=False)],
                                 versus(("del-int", di), (best_id, best_ppl))))
        pairs = [("mlp1", "mlp2"), ("mlp3", "mlp4"), ("mlp5", "mlp6"), ("mlp7", "mlp8"), ("mlp9", "mlp10")]
    else:
        claims += _ap_claims(rows, di)
        pairs = [("mlp-ap", "mlp10")]
    done = [(a, b) for a, b in pairs if _test(rows, a) and _test(rows, b)]
    claims.append(_claim("Mixing the NPLM with the trigram always helps", "every mixed row is lower", rows,
                         [Check(mixed, alone) for alone, mixed in done], _pairs(rows, done)))
    if corpus == "brown":
        for text, paper, better, worse in [
                ("The hidden layer helps (MLP1 beats MLP3)", "268 vs 310", "mlp1", "mlp3"),
                ("A longer context helps the NPLM (n = 5, MLP5, beats n = 3, MLP7)", "279 vs 293", "mlp5", "mlp7")]:
            a, b = _test(rows, better), _test(rows, worse)
            claims.append(_claim(text, paper, rows, None if not (a and b) else [Check(better, worse)],
                                 "missing rows" if not (a and b) else versus((better, a), (worse, b))))
        kn = {n: _test(rows, f"kn-backoff-{n}") for n in (3, 5)}
        if all(kn.values()):
            claims.append(_claim("Kneser-Ney gains little from n = 3 to n = 5", "323 -> 321 (0.6%)", rows,
                                 [Check("kn-backoff-5", "kn-backoff-3", -3, below=False)],
                                 versus(("kn-backoff-5", kn[5]), ("kn-backoff-3", kn[3]))))
        mlp1, kn5 = _test(rows, "mlp1"), _test(rows, "kn-interp-5")
        claims.append(_claim("MLP1 is at least 15% below the interpolated modified-KN 5-gram",
                             "268 vs KN back-off 321 (17% below)", rows,
                             None if not (mlp1 and kn5) else [Check("mlp1", "kn-interp-5", -15)],
                             "missing rows" if not (mlp1 and kn5) else versus(("mlp1", mlp1), ("kn-interp-5", kn5))))
    return claims


def _ap_claims(rows: dict, di: float | None) -> list[dict]:
    """Table 2: the mixed network against Kneser-Ney back-off, and the deleted-interpolation trigram."""
    backoff = [(_test(rows, f"kn-backoff-{n}"), f"kn-backoff-{n}") for n in (3, 4, 5)]
    backoff = [(ppl, row_id) for ppl, row_id in backoff if ppl]
    kn_ppl, kn_id = min(backoff) if backoff else (None, None)
    mixed, alone = _test(rows, "mlp10"), _test(rows, "mlp-ap")
    claims = []
    for text, paper, ours_id, ours in [
            ("The mixed network (MLP10) is below the best Kneser-Ney back-off model",
             "MLP10 109 vs back-off KN 5-gram 117 (7% lower)", "mlp10", mixed),
            ("The network alone is below the best Kneser-Ney back-off model",
             "no unmixed row in Table 2", "mlp-ap", alone)]:
        ran = bool(ours and kn_ppl)
        claims.append(_claim(text, paper, rows, [Check(ours_id, kn_id)] if ran else None,
                             versus((ours_id, ours), (kn_id, kn_ppl)) if ran else "missing rows"))
    ran = bool(di and kn_ppl and mixed)
    claims.append(_claim("The deleted-interpolation trigram is above both KN back-off and the mixed network",
                         "132 vs 117 and 109", rows,
                         [Check("del-int", kn_id, below=False), Check("del-int", "mlp10", below=False)] if ran else None,
                         f"{versus(('del-int', di), (kn_id, kn_ppl))}; {versus(('del-int', di), ('mlp10', mixed))}"
                         if ran else "missing rows"))
    return claims


def _relation(rows: dict, text: str, better: tuple[str, float] | None, worse: tuple[str, float] | None) -> dict:
    """A claim on a user's corpus: row `better` has a lower test perplexity than row `worse`."""
    if not (better and worse):
        return {"claim": text, "ours": "missing rows", "verdict": "not run"}
    return {"claim": text, "ours": versus(better, worse), **_judged(rows, [Check(better[0], worse[0])])}


def _pairs(rows: dict, pairs: list[tuple[str, str]]) -> str:
    """The evidence of a claim over (network, its mixture) pairs: each mixture against its network."""
    return "; ".join(versus((mixed, _test(rows, mixed)), (alone, _test(rows, alone))) for alone, mixed in pairs) \
        or "missing rows"


def _row(rows: dict, row_id: str) -> tuple[str, float] | None:
    ppl = _test(rows, row_id)
    return (row_id, ppl) if ppl else None


def relations(rows: dict) -> list[dict]:
    """The paper's questions asked of a user's corpus (no published numbers): does the best network beat
    the best n-gram model, alone and mixed with the trigram; does mixing help every network; does a
    longer context help each family."""
    best_ngram = _best(rows, _ngram)
    claims = [_relation(rows, "The best network alone beats the best n-gram model", _best(rows, _network_alone),
                        best_ngram),
              _relation(rows, "The best network mixed with the trigram beats the best n-gram model",
                        _best(rows, _mixed_with_trigram), best_ngram)]
    halves = [(network_of(r, rows)["id"], r["id"]) for r in rows.values()
              if r["mix"] == "0.5/0.5" and _mixed_with_trigram(r, rows)]
    done = [(a, b) for a, b in halves if _test(rows, a) and _test(rows, b)]
    mixing = {"claim": "Mixing each network with the trigram (0.5/0.5) helps", "ours": _pairs(rows, done)}
    claims.append({**mixing, **(_judged(rows, [Check(mixed, alone) for alone, mixed in done]) if done
                                else {"verdict": "not run"})})
    for family, short, long in [("Kneser-Ney back-off", "kn-backoff-3", "kn-backoff-5"),
                                ("interpolated Kneser-Ney", "kn-interp-3", "kn-interp-5"),
                                ("the network (MLP7 shape, n = 3, against MLP5, n = 5)", "mlp7", "mlp5")]:
        claims.append(_relation(rows, f"A longer context helps {family}", _row(rows, long), _row(rows, short)))
    return claims


def ours_claims(rows: dict) -> list[dict]:
    """NPLM (ours)'s claims, where the run has it: alone it beats interpolated KN 5, the strongest
    n-gram model here; mixing it with KN 5 (EM) helps."""
    ours = _row(rows, "nplm-ours")
    if ours is None:
        return []
    return [_relation(rows, "NPLM (ours) alone beats interpolated KN 5", ours, _row(rows, "kn-interp-5")),
            _mixing_with_kn5_helps(rows, "NPLM (ours)", ours)]


def count_claims(rows: dict) -> list[dict]:
    """What counts of unbounded order still add (issue 37), asked where the run has the rows: ∞-gram +
    KN 5 beats interpolated KN 5 alone; the best network (chosen on valid, among those mixed both ways)
    mixed with KN 5 and the ∞-gram beats the same network mixed with KN 5 alone."""
    claims = []
    infini_gram = _row(rows, INFINI_GRAM)
    if infini_gram:
        claims.append(_relation(rows, "∞-gram + KN 5 beats interpolated KN 5", infini_gram, _row(rows, "kn-interp-5")))
    with_counts = {row["parts"][0]: row["id"] for row in rows.values()
                   if row["mix"] == WITH_COUNTS and _test(rows, row["id"])}
    networks = [rows[network] for network in with_counts
                if _test(rows, f"{network}-kn-interp-5-em") and rows[network].get("valid_ppl") is not None]
    if networks:
        best = min(networks, key=lambda row: (row["valid_ppl"], row["id"]))["id"]
        claims.append(_relation(rows, "The best network + KN 5 + ∞-gram beats the best network + KN 5",
                                _row(rows, with_counts[best]), _row(rows, f"{best}-kn-interp-5-em")))
    return claims


def _mixing_with_kn5_helps(rows: dict, label: str, network: tuple[str, float]) -> dict:
    """The claim that `network` mixed with interpolated KN 5 by EM (its row `<id>-kn-interp-5-em`) is
    below `network` alone."""
    return _relation(rows, f"Mixing {label} with interpolated KN 5 helps", _row(rows, f"{network[0]}-kn-interp-5-em"),
                     network)


def _feed_forward(row: dict, rows: dict) -> bool:
    """A network of equation 1 alone (a paper shape or NPLM (ours)): the feed-forward side of 2003."""
    return row.get("family") == PAPER_FAMILY and not row["mix"]


def beyond_2003(rows: dict) -> list[dict]:
    """The claims of our networks beyond 2003 (the families `neural.families` registers so: the LSTM, the
    Transformer, ...), asked of the rows the run has (none without them): each against the best
    feed-forward network alone; mixing each with interpolated KN 5 helps; then each against every one
    registered before it (the Transformer against the LSTM)."""
    feed_forward = _best(rows, _feed_forward)
    present = [(name, FAMILIES[name].label, _row(rows, name)) for name in STREAM_NETWORKS]
    present = [(name, label, network) for name, label, network in present if network is not None]
    claims = []
    for _, label, network in present:
        claims.append(_relation(rows, f"The {label} (ours) beats the best feed-forward network", network, feed_forward))
        claims.append(_mixing_with_kn5_helps(rows, f"the {label} (ours)", network))
    for later, (_, label, network) in enumerate(present):
        for _, earlier_label, earlier in present[:later]:
            claims.append(_relation(rows, f"The {label} (ours) beats the {earlier_label} (ours)", network, earlier))
    return claims
