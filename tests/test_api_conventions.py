"""KenLM's and nltk.lm's names on a loaded model (reports.api.TextModel, docs/api.md "Two libraries' names"):
each means what it means in its library. nltk.lm's calls are made beside nltk's own module on the same model
(an nltk Laplace bigram model written as an ARPA file listing every bigram, so that the two give the same
probabilities), KenLM's beside KenLM's module where it is installed and against the values KenLM documents
otherwise; a call that neither form answers is refused in one line. Then the docs' history figure, for the
quick run of docs/api.md's example on files longer than the quick run's slice."""

import json
import math
import random
import re
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from nltk.lm import Laplace
from nltk.lm import Vocabulary as NltkVocabulary
from nltk.lm.preprocessing import pad_both_ends, padded_everygram_pipeline
from nltk.util import bigrams, everygrams

import lmbench
from lmbench.errors import LMBenchError
from lmbench_cli import main
from tests.helpers import chain_text, corpus_args, run_cli, write_splits
from tests.test_api import KENLM_STYLE

ROOT = Path(__file__).resolve().parents[1]
WORDS = [f"w{i}" for i in range(8)]


@pytest.fixture(scope="module")
def nltk_pair(tmp_path_factory):
    """(nltk's Laplace bigram model, lmbench's model of the same probabilities, nltk's words): nltk's model
    fitted on padded sentences ("rare", seen once, below the cutoff of 2, is <unk>), written as an ARPA file
    of every unigram and every bigram of its vocabulary, <s>, </s> and <unk> included, and loaded."""
    rng = np.random.default_rng(0)
    sentences = [[WORDS[i] for i in rng.integers(0, len(WORDS), size=rng.integers(2, 7))] for _ in range(40)]
    sentences.append(["rare", "w1"])
    vocab = NltkVocabulary([w for s in sentences for w in pad_both_ends(s, n=2)], unk_cutoff=2, unk_label="<unk>")
    nltk_model = Laplace(2, vocabulary=vocab)
    nltk_model.fit(padded_everygram_pipeline(2, sentences)[0])
    words = sorted(vocab)
    lines = ["\\data\\", f"ngram 1={len(words)}", f"ngram 2={len(words) ** 2}", "", "\\1-grams:"]
    lines += [f"{math.log10(nltk_model.score(w)):.15f}\t{w}\t0" for w in words]
    lines += ["", "\\2-grams:"]
    lines += [f"{math.log10(nltk_model.score(w, [c])):.15f}\t{c} {w}" for c in words for w in words]
    path = tmp_path_factory.mktemp("nltk") / "laplace2.arpa"
    path.write_text("\n".join([*lines, "", "\\end\\", ""]))
    return nltk_model, lmbench.load(path), words


def test_nltks_score_and_logscore_are_nltks(nltk_pair):
    """score(word, context) is P(word | context), a probability, and logscore its log2; a word or context word
    outside the vocabulary is read as <unk>; no context (None) is nltk's unigram."""
    theirs, ours, words = nltk_pair
    for context, word in product([*words, "zzz"], [*words, "zzz"]):
        for given in ([context], (context,)):
            assert ours.score(word, given) == pytest.approx(theirs.score(word, given), rel=1e-12)
        assert ours.logscore(word, [context]) == pytest.approx(theirs.logscore(word, [context]), rel=1e-12)
    for word in [*words, "zzz"]:
        assert ours.score(word, None) == pytest.approx(theirs.score(word, None), rel=1e-12)
        assert ours.score(word, context=None) == pytest.approx(theirs.score(word), rel=1e-12)
        assert ours.logscore(word) == pytest.approx(theirs.logscore(word), rel=1e-12)
    assert sum(ours.score(word, ["w3"]) for word in words) == pytest.approx(1.0)


def test_nltks_entropy_and_perplexity_of_ngrams_are_nltks(nltk_pair):
    """entropy and perplexity of a list of n-gram tuples (bigrams, everygrams: unigrams among them), or of a
    generator of them: nltk's cross-entropy in bits and 2 ** it, unknown words read as <unk>."""
    theirs, ours, _ = nltk_pair
    test = [["w1", "w2", "zzz", "w3"], ["w0", "rare", "w7", "w7"]]
    for ngrams in ([g for s in test for g in bigrams(pad_both_ends(s, n=2))],
                   [g for s in test for g in everygrams(list(pad_both_ends(s, n=2)), max_len=2)]):
        assert ours.entropy(ngrams) == pytest.approx(theirs.entropy(ngrams), rel=1e-12)
        assert ours.perplexity(ngrams) == pytest.approx(theirs.perplexity(ngrams), rel=1e-12)
        assert ours.perplexity(iter(ngrams)) == pytest.approx(theirs.perplexity(ngrams), rel=1e-12)
        assert ours.perplexity(ngrams) == pytest.approx(2 ** ours.entropy(ngrams), rel=1e-12)


def test_nltks_generate_answers_nltks_types_from_a_list_seed(nltk_pair):
    """generate(1) is a word (str), generate(n > 1) a list of n; num_words defaults to 1; the seed may be a list
    of words (nltk's) or a text (lmbench's), the same context; random_seed may be a random.Random, as in nltk."""
    theirs, ours, words = nltk_pair
    for model in (theirs, ours):
        one, default = model.generate(1, text_seed=["w1", "w2"], random_seed=3), model.generate(random_seed=3)
        assert isinstance(one, str) and one in words and isinstance(default, str) and default in words
        some = model.generate(5, text_seed=["w1", "w2"], random_seed=random.Random(3))
        assert isinstance(some, list) and len(some) == 5 and all(isinstance(w, str) and w in words for w in some)
    assert ours.generate(6, text_seed=["w1", "w2"], random_seed=4) == ours.generate(6, text_seed="w1 w2", random_seed=4)
    assert ours.generate(6, random_seed=random.Random(5)) == ours.generate(6, random_seed=random.Random(5))
    # the seed's last word is the bigram's context: drawn near the argmax, the word nltk finds likeliest after it
    top = {c: sorted(((theirs.score(w, [c]), w) for w in words), reverse=True) for c in WORDS}
    context = next(c for c in WORDS if top[c][0][0] > top[c][1][0])  # one likeliest word after it
    likeliest = top[context][0][1]
    assert ours.generate(1, text_seed=["w5", context], random_seed=0, temperature=1e-3) == likeliest


def test_vocab_lookup_and_membership_are_nltks(nltk_pair):
    """model.vocab is nltk's Vocabulary to look words up in: lookup maps a word outside it to the unknown label
    (a sequence, nested ones too, to a tuple), and the unknown label is in it (`'<UNK>' in vocab`)."""
    theirs, ours, words = nltk_pair
    for probe in ("w1", "zzz", "<unk>", "<s>", "rare", ["w1", "zzz"], ("w2", ["zzz", "w3"]), []):
        assert ours.vocab.lookup(probe) == theirs.vocab.lookup(probe)
    for word in [*words, "zzz", "rare", "<UNK>"]:
        assert (word in ours.vocab) == (word in theirs.vocab)
    assert ours.vocab.unk_label == theirs.vocab.unk_label == "<unk>" and "<unk>" in ours.vocab
    assert sorted(ours.vocab) == sorted(theirs.vocab) and len(ours.vocab) == len(theirs.vocab)


@pytest.fixture(scope="module")
def kenlm_style(tmp_path_factory):
    path = tmp_path_factory.mktemp("kenlm") / "kenlm.arpa"
    path.write_text(KENLM_STYLE)
    return path


def test_kenlms_names_give_kenlms_documented_values(kenlm_style):
    """`word in model` is KenLM's: <unk> is not in it (KenLM's id 0, an unknown word's), <s> and </s> are; a
    text of no token scores 0.0 without markers and full_scores yields nothing; bytes are UTF-8 text. (KenLM
    0.3.0's module gives each value here.)"""
    model = lmbench.load(kenlm_style)
    assert [word in model for word in ("a", "zzz", "<unk>", "<s>", "</s>", "", "a b", b"a")] == \
        [True, False, False, True, True, False, False, True]
    assert "<unk>" in model.vocab  # nltk.lm's membership: the unknown label is in the vocabulary
    assert model.score("", bos=False, eos=False) == 0.0 and model.score("", bos=True, eos=False) == 0.0
    assert list(model.full_scores("", bos=False, eos=False)) == [] and list(model.full_scores(" ", False, False)) == []
    assert model.score("") == pytest.approx(-0.2622116 - 1.0)  # </s> after <s>: bow(<s>) + p(</s>)
    assert model.perplexity("") == pytest.approx(10 ** (0.2622116 + 1.0))
    assert model.score(b"a b") == model.score("a b") == pytest.approx(-1.65)
    assert list(model.full_scores("a", False, False)) == list(model.full_scores("a", bos=False, eos=False))


def test_kenlms_names_agree_with_kenlms_module(kenlm_style, nltk_pair, tmp_path):
    """Where KenLM's module is installed: `in`, score, perplexity and full_scores of each text with each bos and
    eos, as KenLM's (its float32), for a file with KenLM's markers and for nltk's model written out."""
    kenlm = pytest.importorskip("kenlm")
    nltk_arpa = tmp_path / "laplace2.arpa"
    nltk_arpa.write_text(Path(nltk_pair[1].name).read_text())
    for path, probes in ((kenlm_style, ["a", "b", "d", "zzz"]), (nltk_arpa, ["w1", "w7", "rare", "zzz"])):
        theirs, ours = kenlm.Model(str(path)), lmbench.load(path)
        for word in [*probes, "<unk>", "<s>", "</s>", "", b"<s>"]:
            assert (word in ours) == (word in theirs), word
        texts = ["", " ".join(probes), f"{probes[1]} {probes[0]} {probes[0]}", b" ".join(p.encode() for p in probes)]
        for text in texts:
            assert ours.perplexity(text) == pytest.approx(theirs.perplexity(text), rel=1e-5)
            for bos, eos in product((True, False), repeat=2):
                assert ours.score(text, bos=bos, eos=eos) == pytest.approx(theirs.score(text, bos=bos, eos=eos),
                                                                            rel=1e-6, abs=1e-6)
                found = list(ours.full_scores(text, bos, eos))
                expected = list(theirs.full_scores(text, bos, eos))
                assert [(length, oov) for _, length, oov in found] == [(length, oov) for _, length, oov in expected]
                assert np.allclose([p for p, _, _ in found], [p for p, _, _ in expected], rtol=0, atol=1e-6)


REFUSED = [  # a call neither library answers this way, and what its one line names
    (lambda m: m.score("a b", False), "bos and eos are keyword arguments"),
    (lambda m: m.score("b", "a"), "the context 'a' is a text"),
    (lambda m: m.score("a b", ["a"]), "the word 'a b' is no single word"),
    (lambda m: m.score("b", ["a"], bos=False), "nltk.lm's form"),
    (lambda m: m.score(["a", "b"]), "['a', 'b'] is of type list"),
    (lambda m: m.score("b", [1]), "the context [1]"),
    (lambda m: m.perplexity([]), "holds no n-gram"),
    (lambda m: m.perplexity(["a", "b"]), "the n-gram 'a' is a str"),
    (lambda m: m.perplexity([("a", "b")], eos=False), "nltk.lm's form"),
    (lambda m: m.perplexity("", bos=False, eos=False), "holds no token"),
    (lambda m: m.entropy("a b"), "is a text"),
    (lambda m: m.generate(2, random_seed=1.5), "random_seed=1.5"),
    (lambda m: m.generate(2, random_seed=-1), "random_seed=-1"),
    (lambda m: m.generate(2, text_seed=["a", 2]), "the seed text"),
    (lambda m: 5 in m, "the word 5 is of type int"),
    (lambda m: m.vocab.lookup(5), "cannot look up 5 (int)"),
]


@pytest.mark.parametrize("call, named", REFUSED, ids=[named for _, named in REFUSED])
def test_a_call_neither_library_answers_is_refused_in_one_line(kenlm_style, call, named):
    model = lmbench.load(kenlm_style)
    with pytest.raises(LMBenchError) as refused:
        call(model)
    assert named in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


# The quick run of docs/api.md's example, on files longer than its slice (reports.running.settings.QUICK_SLICE: 10,000
# train tokens, 2,000 valid, 2,000 test)
SIZES = {"train": 12_000, "valid": 2_500, "test": 2_500}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    root = tmp_path_factory.mktemp("quick")
    files = write_splits(root, **{split: chain_text(tokens, seed) for seed, (split, tokens) in enumerate(SIZES.items(), 1)})
    assert main(["reproduce", "text", "--quick", "--name", "mine", *corpus_args(files)[2:], "--networks", "mlp1,lstm",
                 "--work-dir", str(root / "runs" / "mine-quick"), "--report-dir", str(root / "runs" / "reports" / "mine-quick"),
                 "--threads", "1"]) == 0
    results = json.loads((root / "runs" / "reports" / "mine-quick" / "results.json").read_text())
    return root, {row["id"]: row for row in results["rows"]}


@pytest.mark.slow
def test_the_docs_example_prints_a_quick_rows_test_perplexity(quick, monkeypatch, capsys):
    """docs/api.md's Python block, run where its quick run ran, prints the LSTM row's test perplexity of the
    report (the quick run scored the first tokens of each file, which the block reads from corpus.json)."""
    root, rows = quick
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), flags=re.S)
    monkeypatch.chdir(root)
    (root / "sentences.txt").write_text("w0 w50 w26 w6\n\nw31 w75 w0\n")
    exec(compile(blocks[0], "docs/api.md", "exec"), {})
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("LSTM test perplexity")]
    assert len(printed) == 1 and float(printed[0].split()[3]) == pytest.approx(rows["lstm"]["test_ppl"], rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("row", ["kn-interp-5", "mlp1", "lstm"])
def test_nltks_form_on_a_row_is_the_models_probability(quick, row):
    """On an n-gram row, a window network and a stream network: score(word, context) is the probability whose
    log10 full_scores gives for the word after the context, logscore its log2, and the probabilities after a
    context sum to 1 over the vocabulary."""
    root, _ = quick
    model = lmbench.load(root / "runs" / "mine-quick", row=row)
    context = ["w3", "w17", "w40", "w2"]
    for word in ("w5", "w60", "zzz"):
        last = list(model.full_scores(" ".join([*context, word]), bos=False, eos=False))[-1][0]
        assert model.score(word, context) == pytest.approx(10 ** last, rel=1e-5)  # a network's float32, batched apart
        assert model.logscore(word, context) == pytest.approx(math.log2(model.score(word, context)), rel=1e-9)
    assert sum(model.score(word, context) for word in model.vocab.words) == pytest.approx(1.0, rel=1e-5)


def test_the_generate_command_prints_one_word_for_words_1(kenlm_style, capsys):
    """`lmbench generate --words 1` prints the word and lists it under --json, whatever nltk's `generate` returns
    for one word (a str)."""
    code, out, _ = run_cli(capsys, "generate", kenlm_style, "--words", "1", "--seed", "0")
    assert code == 0 and len(out.split()) == 1 and out.split()[0] in lmbench.load(kenlm_style).vocab
    code, out, _ = run_cli(capsys, "generate", kenlm_style, "--words", "1", "--seed", "0", "--json")
    assert code == 0 and json.loads(out)["words"] == [lmbench.load(kenlm_style).generate(1, random_seed=0)]
