"""The paper's claims as checks on our numbers: each gives the paper's figure, ours and a verdict.

The claims are about the paper's network (`reports.records.paper_network`): a row of another family
(the energy network, or any family added later) or of our own design never takes part. Our own
networks get claims of their own, as relations on the same rows: NPLM (ours) against interpolated
KN 5 (`ours_claims`), the best network of any family against the best n-gram model (`ours_claims`),
and the networks beyond 2003 (the registry's: LSTM, GRU, Transformer), where the run has them
(`beyond_2003`); the ∞-gram, alone with KN 5 and added to the best network's mixture, where the run
has those rows (`count_claims`). Every "best" row is the one with the lowest VALID perplexity among
those a claim names ("the best paper-shape network": the paper's network, equation 1 in a shape of
its tables; "the best network": any family), never chosen on test; the evidence names it
("mlp9 (best on valid) 247.4 vs ...") and `best_on_valid` lists it.

Each claim is judged by reports.building.significance: the checks it is made of, a paired bootstrap test of each
(with the training randomness of rows run under several seeds), its verdict and Holm's adjustment over
a report's claims.
"""

from __future__ import annotations

from typing import NamedTuple

from neural.families import FAMILIES
from reports.experiments import INFINI_GRAM, NETWORKS_BEYOND_2003, PAPER_FAMILY, WITH_COUNTS
from reports.records import network_of, paper_network
from reports.building.significance import Check, compare, decimals, gap, judge, networks_behind, verdict_word, with_holm

EQUIVALENCE_MARGIN = 3.0  # %: "gains little" holds when the difference lies within +-3% (the paper's gain is 0.6%)


def _test(rows: dict, row_id: str) -> float | None:
    row = rows.get(row_id)
    return None if row is None else row.get("test_ppl")


class Pick(NamedTuple):
    """A row a claim compares: its id and test perplexity, whether it was picked as the best (on valid),
    and the rows it was picked among."""
    id: str
    ppl: float
    best: bool = False
    candidates: tuple[str, ...] = ()


def _best(rows: dict, chosen) -> Pick | None:
    """The row with the lowest VALID perplexity (ties: first id) among those `chosen(row, rows)` picks and
    that ran; never chosen on test."""
    candidates = [(r["valid_ppl"], r["id"]) for r in rows.values()
                  if chosen(r, rows) and r.get("test_ppl") is not None and r.get("valid_ppl") is not None]
    if not candidates:
        return None
    chosen_id = min(candidates)[1]
    return Pick(chosen_id, rows[chosen_id]["test_ppl"], True, tuple(row_id for _, row_id in sorted(candidates)))


def _network_alone(row: dict, rows: dict) -> bool:
    return paper_network(row, rows) and not row["mix"]


def _network_mixed(row: dict, rows: dict) -> bool:
    return paper_network(row, rows) and bool(row["mix"])


def _mixed_with_trigram(row: dict, rows: dict) -> bool:
    """A mixture of the paper's network with the deleted-interpolation trigram and nothing else (at 0.5/0.5,
    by EM, or EM per bucket of context frequency: the three mixtures section 4 of the paper describes)."""
    return _network_mixed(row, rows) and {rows.get(part, {}).get("method") for part in row["parts"]
                                          if not rows.get(part, {}).get("family")} == {"deleted-interpolation"}


def _paper_described(row: dict, rows: dict) -> bool:
    """The paper's network alone or mixed with the trigram (`_mixed_with_trigram`): what the paper calls
    the NPLM; never a mixture with KN 5 or the ∞-gram, which would hold its opponent in a claim against
    the best n-gram model."""
    return _network_alone(row, rows) or _mixed_with_trigram(row, rows)


def _ngram(row: dict, rows: dict) -> bool:
    return bool(row["method"])  # an n-gram model of `lmbench ngram --method`


def _claim(text: str, paper: str, rows: dict, checks: list[Check] | None, ours: str,
           best: tuple[Pick | None, ...] = (), paper_pair: tuple[str, str] | None = None) -> dict:
    """A claim of the paper's: "not run" without checks (rows missing), else judged (`judge`); `best`:
    the rows it picked as the best on valid; `paper_pair`: the two rows of ours the paper's own
    comparison names (MLP10 and the class-based trigram), where the claim picks others, compared beside
    it (`paper_pair` of the record: its evidence, difference and paired interval; not part of the verdict)."""
    if not checks:
        return {"claim": text, "paper": paper, "ours": ours, "verdict": "not run"}
    record = {"claim": text, "paper": paper, "ours": ours, **judge(rows, checks), **_picked(best)}
    a, b = paper_pair or (None, None)
    if a and b and _test(rows, a) and _test(rows, b) and (a, b) != (checks[0].a, checks[0].b):
        found = compare(rows, Check(a, b, checks[0].threshold, checks[0].below))
        record["paper_pair"] = {"ours": versus((a, _test(rows, a)), (b, _test(rows, b))),
                                **{key: found[key] for key in ("a", "b", "difference", "difference_ci95")}}
    return record


def _paper(ours: tuple[str, float], other: tuple[str, float], note: str = "") -> str:
    """The paper's comparison in the words of ours (`versus`): 'MLP10 252 vs class-based 3-gram 312:
    19.2% lower', and `note` after it."""
    difference = gap(ours[1], other[1])
    return (f"{ours[0]} {ours[1]:g} vs {other[0]} {other[1]:g}: {abs(difference):.1f}% "
            f"{'higher' if difference > 0 else 'lower'}{note}")



def _named(pick: tuple) -> str:
    return f"{pick[0]} (best on valid)" if getattr(pick, "best", False) else pick[0]


def versus(ours: tuple[str, float], other: tuple[str, float]) -> str:
    """The evidence of every claim comparing two rows, in one wording: 'mlp1 77.6 vs kn-interp-5 63.5:
    22.2% higher' (or 'x% lower'), the percentage of `other`'s perplexity; a row picked as the best
    says so: 'mlp9 (best on valid) 247.4 vs ...'."""
    difference = gap(ours[1], other[1])
    return (f"{_named(ours)} {ours[1]:.1f} vs {_named(other)} {other[1]:.1f}: "
            f"{abs(difference):.{decimals(difference)}f}% {'higher' if difference > 0 else 'lower'}")


def check_claims(results: dict) -> list[dict]:
    """Every claim asked of the results (module docstring), each judged at every grouping of the blocks
    tried as well (`by_grouping`), with its verdict after Holm's adjustment over the report's claims
    beside its own (`with_holm`)."""
    return with_holm(by_grouping(results, at_budget(results, _claims(results))))


def at_budget(results: dict, claims: list[dict]) -> list[dict]:
    """`claims` with, on each whose verdict rests on a network a compute budget cut short of its recipe's
    end, the budget it was reached at after the verdict ("holds (...), at 20m: lstm at 20m, 21% of its
    recipe, valid still falling"; reports.running.budget.row_terms) and in `budget`: a budgeted verdict cannot be
    read as the converged one."""
    from reports.running.budget import row_terms
    budget = results.get("budget")
    if not budget:
        return claims
    rows = {r["id"]: r for r in results["rows"]}
    found = []
    for claim in claims:
        networks = dict.fromkeys(net for row_id in claim.get("rows") or () if row_id in rows
                                 for net in networks_behind(rows, row_id))
        grouped: dict[str, list[str]] = {}  # the same terms said once for every network they hold for
        for net in networks:
            words = row_terms(budget, rows[net])
            if words:
                grouped.setdefault(words, []).append(net)
        terms = [f"{', '.join(nets)} {words}" for words, nets in grouped.items()]
        passed_over: dict[str, list[str]] = {}  # the candidates for a best not picked, cut short by the budget
        for net in dict.fromkeys(net for row_id in claim.get("candidates") or () if row_id in rows
                                 for net in networks_behind(rows, row_id)):
            words = row_terms(budget, rows[net])
            if words and net not in networks:
                passed_over.setdefault(words, []).append(net)
        if passed_over:
            terms.append("picked among candidates cut short by it: " + "; ".join(
                f"{', '.join(nets)} {words}" for words, nets in passed_over.items()))
        if terms and claim["verdict"] != "not run":
            claim = {**claim, "budget": "; ".join(terms),
                     "verdict": f"{claim['verdict']}, under a budget: {'; '.join(terms)}"}
        found.append(claim)
    return found


def _claims(results: dict) -> list[dict]:
    rows = {r["id"]: r for r in results["rows"]}
    corpus = results["corpus"]
    ours = best_network_claims(rows) + ours_claims(rows) + beyond_2003(rows) + count_claims(rows)
    if corpus not in ("brown", "ap"):
        return relations(rows) + ours
    return paper_claims(rows, corpus) + [{**claim, "paper": "not in the paper (2003)"} for claim in ours]




def by_grouping(results: dict, claims: list[dict]) -> list[dict]:
    """`claims` (judged at the grouping of the blocks the report chose, reports.records.grouped) with,
    on each claim whose verdict another grouping tried would change, `by_grouping` (the verdict at
    every grouping tried, {blocks: verdict}) and `grouping`, the line that says so: "changes with the
    grouping: holds at 30 blocks (the report's) and at 201, 100; not significant at 20"."""
    from reports.records import at_grouping, tried_groupings
    chosen = results.get("bootstrap", {}).get("grouping", {}).get("blocks")
    tried = tried_groupings(results)
    if len(tried) < 2:
        return claims
    verdicts = {groups: [verdict_word(claim["verdict"]) for claim in _claims(at_grouping(results, groups))]
                for groups in tried if groups != chosen}
    changed = []
    for index, claim in enumerate(claims):
        words = {chosen: verdict_word(claim["verdict"]), **{groups: found[index] for groups, found in verdicts.items()}}
        if len(set(words.values())) > 1:
            def at(word: str) -> str:
                return ", ".join(str(groups) for groups, found in words.items() if found == word and groups != chosen)
            same = at(words[chosen])
            others = "; ".join(f"{word} at {at(word)}" for word in dict.fromkeys(words.values()) if word != words[chosen])
            claim = {**claim, "by_grouping": {str(groups): word for groups, word in sorted(words.items(), reverse=True)},
                     "grouping": f"changes with the grouping: {words[chosen]} at {chosen} blocks (the report's)"
                                 f"{f' and at {same}' if same else ''}; {others}"}
        changed.append(claim)
    return changed


PAPER_PAIRS = {"brown": ("mlp10", "class-3-500"), "ap": ("mlp10", "kn-backoff-5")}  # the paper's "best" pair


def paper_claims(rows: dict, corpus: str) -> list[dict]:
    """The paper's claims on Table 1 (Brown) or Table 2 (AP), each with the paper's comparison beside ours
    (`paper`). "The NPLM" is the paper's network alone or mixed with the trigram (`_paper_described`), its
    best row the one best on valid; "the best n-gram model" the n-gram row best on valid, ours (KN 5,
    the ∞-gram) included; where the rows so picked are not the paper's own pair, `paper_pair` compares
    that pair of our rows beside them."""
    claims = []
    best_nplm = _best(rows, _network_alone)
    best_ngram = _best(rows, _ngram)
    best_any = _best(rows, _paper_described)
    if corpus == "brown":
        paper_gap = _paper(("MLP10", 252), ("class-based 3-gram (500 classes)", 312),
                           ' (the paper\'s "24%" is 312 / 252 - 1)')
        alone_paper = _paper(("MLP1", 268), ("class-based 3-gram (500 classes)", 312))
        alone_pair = ("mlp1", "class-3-500")
    else:
        paper_gap = _paper(("MLP10", 109), ("back-off KN 5-gram", 117), ' (the paper: "about 8%")')
        alone_paper, alone_pair = "no unmixed row in Table 2", None
    best_text = "The best NPLM (the network alone or mixed with the trigram) beats the best n-gram model"
    alone_text = "The NPLM alone, unmixed, beats the best n-gram model"
    if best_any and best_ngram:
        claims.append(_claim(best_text, paper_gap, rows, [Check(best_any.id, best_ngram.id)],
                             versus(best_any, best_ngram), (best_any, best_ngram), PAPER_PAIRS[corpus]))
    else:
        claims.append(_claim(best_text, paper_gap, rows, None, "missing rows"))
    if best_nplm and best_ngram:
        claims.append(_claim(alone_text, alone_paper, rows, [Check(best_nplm.id, best_ngram.id)],
                             versus(best_nplm, best_ngram), (best_nplm, best_ngram), alone_pair))
    else:
        claims.append(_claim(alone_text, alone_paper, rows, None, "missing rows"))
    di = _test(rows, "del-int")
    if corpus == "brown":
        if di and best_any:
            claims.append(_claim("The deleted-interpolation trigram is far above the best NPLM",
                                 _paper(("Del. Int.", 336), ("MLP10", 252)), rows,
                                 [Check("del-int", best_any.id, 10, below=False)],
                                 versus(("del-int", di), best_any), (best_any,), ("del-int", "mlp10")))
        pairs = [("mlp1", "mlp2"), ("mlp3", "mlp4"), ("mlp5", "mlp6"), ("mlp7", "mlp8"), ("mlp9", "mlp10")]
    else:
        claims += _ap_claims(rows, di)
        pairs = [("mlp-ap", "mlp10")]
    done = [(a, b) for a, b in pairs if _test(rows, a) and _test(rows, b)]
    mixing_paper = ("; ".join(_paper((f"MLP{2 * i + 2}", mixed), (f"MLP{2 * i + 1}", alone)) for i, (alone, mixed)
                              in enumerate([(268, 257), (310, 272), (279, 259), (293, 270), (276, 252)]))
                    if corpus == "brown" else "no unmixed row in Table 2")
    claims.append(_claim("Mixing the NPLM with the trigram always helps", mixing_paper, rows,
                         [Check(mixed, alone) for alone, mixed in done], _pairs(rows, done)))
    if corpus == "brown":
        for text, paper, better, worse in [
                ("The hidden layer helps (MLP1 beats MLP3)", _paper(("MLP1", 268), ("MLP3", 310)), "mlp1", "mlp3"),
                ("A longer context helps the NPLM (n = 5, MLP5, beats n = 3, MLP7)", _paper(("MLP5", 279), ("MLP7", 293)),
                 "mlp5", "mlp7")]:
            a, b = _test(rows, better), _test(rows, worse)
            claims.append(_claim(text, paper, rows, None if not (a and b) else [Check(better, worse)],
                                 "missing rows" if not (a and b) else versus((better, a), (worse, b))))
        kn = {n: _test(rows, f"kn-backoff-{n}") for n in (3, 5)}
        if all(kn.values()):
            claims.append(_claim(f"Kneser-Ney gains little from n = 3 to n = 5 (within ±{EQUIVALENCE_MARGIN:g}%)",
                                 _paper(("back-off KN 5-gram", 321), ("back-off KN 3-gram", 323)), rows,
                                 [Check("kn-backoff-5", "kn-backoff-3", within=EQUIVALENCE_MARGIN)],
                                 versus(("kn-backoff-5", kn[5]), ("kn-backoff-3", kn[3]))))
        mlp1, kn5 = _test(rows, "mlp1"), _test(rows, "kn-interp-5")
        claims.append(_claim("MLP1 is at least 15% below the interpolated modified-KN 5-gram",
                             _paper(("MLP1", 268), ("KN back-off 5-gram", 321), " (the paper has no interpolated KN)"),
                             rows, None if not (mlp1 and kn5) else [Check("mlp1", "kn-interp-5", -15)],
                             "missing rows" if not (mlp1 and kn5) else versus(("mlp1", mlp1), ("kn-interp-5", kn5))))
    return claims


def _ap_claims(rows: dict, di: float | None) -> list[dict]:
    """Table 2: the mixed network against the best Kneser-Ney back-off model (on valid), and the
    deleted-interpolation trigram."""
    kn = _best(rows, lambda row, rows: row["method"] == "kneser-ney-backoff")
    mixed, alone = _row(rows, "mlp10"), _row(rows, "mlp-ap")
    claims = []
    for text, paper, ours in [
            ("The mixed network (MLP10) is below the best Kneser-Ney back-off model",
             _paper(("MLP10", 109), ("back-off KN 5-gram", 117)), mixed),
            ("The network alone is below the best Kneser-Ney back-off model",
             "no unmixed row in Table 2", alone)]:
        ran = bool(ours and kn)
        claims.append(_claim(text, paper, rows, [Check(ours.id, kn.id)] if ran else None,
                             versus(ours, kn) if ran else "missing rows", (kn,)))
    ran = bool(di and kn and mixed)
    claims.append(_claim("The deleted-interpolation trigram is above both KN back-off and the mixed network",
                         f"{_paper(('Del. Int.', 132), ('back-off KN 5-gram', 117))}; "
                         f"{_paper(('Del. Int.', 132), ('MLP10', 109))}", rows,
                         [Check("del-int", kn.id, below=False), Check("del-int", "mlp10", below=False)] if ran else None,
                         f"{versus(('del-int', di), kn)}; {versus(('del-int', di), mixed)}" if ran else "missing rows",
                         (kn,)))
    return claims


def _relation(rows: dict, text: str, better: tuple | None, worse: tuple | None) -> dict:
    """A claim on a user's corpus: row `better` has a lower test perplexity than row `worse`."""
    if not (better and worse):
        return {"claim": text, "ours": "missing rows", "verdict": "not run"}
    return {"claim": text, "ours": versus(better, worse), **judge(rows, [Check(better[0], worse[0])]),
            **_picked((better, worse))}


def _picked(picks: tuple) -> dict:
    """A claim's record of the rows it picked as the best on valid (`best_on_valid`) and the rows they
    were picked among (`candidates`)."""
    picks = [pick for pick in picks if isinstance(pick, Pick) and pick.best]
    if not picks:
        return {}
    return {"best_on_valid": [pick.id for pick in picks],
            "candidates": list(dict.fromkeys(row_id for pick in picks for row_id in pick.candidates))}


def _pairs(rows: dict, pairs: list[tuple[str, str]]) -> str:
    """The evidence of a claim over (network, its mixture) pairs: each mixture against its network."""
    return "; ".join(versus((mixed, _test(rows, mixed)), (alone, _test(rows, alone))) for alone, mixed in pairs) \
        or "missing rows"


def _row(rows: dict, row_id: str) -> Pick | None:
    ppl = _test(rows, row_id)
    return Pick(row_id, ppl) if ppl else None


def relations(rows: dict) -> list[dict]:
    """The paper's questions asked of a user's corpus (no published numbers): does the best paper-shape
    network beat the best n-gram model, alone and mixed with the trigram; does mixing help every network;
    does a longer context help each family."""
    best_ngram = _best(rows, _ngram)
    claims = [_relation(rows, "The best paper-shape network alone beats the best n-gram model",
                        _best(rows, _network_alone), best_ngram),
              _relation(rows, "The best paper-shape network mixed with the trigram beats the best n-gram model",
                        _best(rows, _mixed_with_trigram), best_ngram)]
    halves = [(network_of(r, rows)["id"], r["id"]) for r in rows.values()
              if r["mix"] == "0.5/0.5" and _mixed_with_trigram(r, rows)]
    done = [(a, b) for a, b in halves if _test(rows, a) and _test(rows, b)]
    mixing = {"claim": "Mixing each network with the trigram (0.5/0.5) helps", "ours": _pairs(rows, done)}
    claims.append({**mixing, **(judge(rows, [Check(mixed, alone) for alone, mixed in done]) if done
                                else {"verdict": "not run"})})
    for family, short, long in [("Kneser-Ney back-off", "kn-backoff-3", "kn-backoff-5"),
                                ("interpolated Kneser-Ney", "kn-interp-3", "kn-interp-5"),
                                ("the network (MLP7 shape, n = 3, against MLP5, n = 5)", "mlp7", "mlp5")]:
        claims.append(_relation(rows, f"A longer context helps {family}", _row(rows, long), _row(rows, short)))
    return claims


def _any_network_alone(row: dict, rows: dict) -> bool:
    return bool(row.get("family")) and not row["mix"]


def best_network_claims(rows: dict) -> list[dict]:
    """The best network of any family alone (on valid: a paper shape, NPLM (ours), the LSTM, ...)
    against the best n-gram model, where the run has a network that is not the paper's (else it is the
    paper-shape claim's)."""
    if not any(_any_network_alone(row, rows) and not paper_network(row, rows) for row in rows.values()):
        return []
    return [_relation(rows, "The best network of any family alone beats the best n-gram model",
                      _best(rows, _any_network_alone), _best(rows, _ngram))]


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


def _mixing_with_kn5_helps(rows: dict, label: str, network: Pick) -> dict:
    """The claim that `network` mixed with interpolated KN 5 by EM (its row `<id>-kn-interp-5-em`) is
    below `network` alone."""
    return _relation(rows, f"Mixing {label} with interpolated KN 5 helps", _row(rows, f"{network.id}-kn-interp-5-em"),
                     network)


def _feed_forward(row: dict, rows: dict) -> bool:
    """A network of any window family alone (the NPLM in a paper shape or ours, the energy network, ...,
    every family the registry has of context "window"): the feed-forward side."""
    family = FAMILIES.get(row.get("family"))
    return family is not None and family.context == "window" and not row["mix"]


def _nplm_alone(row: dict, rows: dict) -> bool:
    """A network of equation 1 alone (a paper shape or NPLM (ours))."""
    return row.get("family") == PAPER_FAMILY and not row["mix"]


def beyond_2003(rows: dict) -> list[dict]:
    """The claims of our networks beyond 2003 (the families `neural.families` registers so: the LSTM, the
    Transformer, ...), asked of the rows the run has (none without them): a stream network against "the
    best feed-forward network" (on valid, among every window family's rows alone), a window network
    (feed-forward itself: a log-bilinear model, say) against "the best NPLM alone"; mixing each with
    interpolated KN 5 helps; then each against every one registered before it (the Transformer against
    the LSTM)."""
    rivals = {"stream": ("the best feed-forward network", _best(rows, _feed_forward)),
              "window": ("the best NPLM alone", _best(rows, _nplm_alone))}
    present = [(name, FAMILIES[name].label, _row(rows, name)) for name in NETWORKS_BEYOND_2003]
    present = [(name, label, network) for name, label, network in present if network is not None]
    claims = []
    for name, label, network in present:
        rival, best = rivals[FAMILIES[name].context]
        claims.append(_relation(rows, f"The {label} (ours) beats {rival}", network, best))
        claims.append(_mixing_with_kn5_helps(rows, f"the {label} (ours)", network))
    for later, (_, label, network) in enumerate(present):
        for _, earlier_label, earlier in present[:later]:
            claims.append(_relation(rows, f"The {label} (ours) beats the {earlier_label} (ours)", network, earlier))
    return claims
