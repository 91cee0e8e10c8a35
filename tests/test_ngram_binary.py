"""Binary n-gram model files and the compiled scorer (issue 67, item 2): `lmbench build-binary` and `lmbench ngram
--binary` write a model that `lmbench.load` opens memory-mapped, whose scores are the ARPA file's to float32's
rounding (float64: to the last bits); the compiled walk (BackoffModel.walk) scores as the vectorised back-off
rule does, whole streams and many short texts at once; the ARPA reader reads every way of writing a number
as Python's float does, and files whose n-grams' suffixes are not all listed; a damaged binary file is refused
in one line."""

import json
import math

import numpy as np
import pytest

import lmbench
from baselines.arpa_reader import read_arpa, read_arpa_own
from baselines.arpa_writer import write_arpa
from baselines.binary import read_binary, write_binary
from baselines.katz import Katz
from baselines.kneser_ney import KneserNey, KneserNeyBackoff
from lmbench.errors import LMBenchError
from tests.helpers import corpus_args, markov_text, run_cli, write_splits
from tests.lm_checks import make_corpus

FLOAT32 = 2 ** -23  # float32's relative rounding


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(markov_text(6000, 60, 11), markov_text(800, 60, 12), markov_text(800, 60, 13))


@pytest.fixture(scope="module")
def arpa(corpus, tmp_path_factory):
    """KN 4 written as an ARPA file with KenLM's markers, as lmbench writes it."""
    path = tmp_path_factory.mktemp("binary") / "kn4.arpa"
    write_arpa(KneserNey(4).fit(corpus), corpus.vocab, path)
    return path


def random_sentences(vocab, rng, count=200) -> list[str]:
    """Sentences of the vocabulary's words, words it lacks, <unk> and the markers, of 0 to 30 words."""
    words = vocab.words + ["zzz", "never-seen", "<s>", "</s>", "<unk>"]
    return [" ".join(rng.choice(words, size=rng.integers(0, 30))) for _ in range(count)]


@pytest.mark.parametrize("values", ["float32", "float64"])
def test_a_binary_file_scores_as_its_arpa_file(arpa, tmp_path, values):
    """Round trip ARPA -> binary (`lmbench build-binary`) -> scores: every token's log10 probability, n-gram
    length and oov flag of full_scores, each sentence's score and perplexity, with and without markers."""
    path = tmp_path / "kn4.lmb"
    assert lmbench_main(["build-binary", str(arpa), str(path), *(["--float64"] if values == "float64" else [])]) == 0
    text, binary = lmbench.load(arpa), lmbench.load(path)
    assert binary.vocab.words == text.vocab.words and binary.order == text.order == 4
    tolerance = 4 * FLOAT32 if values == "float32" else 1e-14
    for sentence in random_sentences(text.vocab, np.random.default_rng(0)):
        for bos, eos in ((True, True), (False, False), (True, False)):
            ours, theirs = list(binary.full_scores(sentence, bos, eos)), list(text.full_scores(sentence, bos, eos))
            assert [s[1:] for s in ours] == [s[1:] for s in theirs]   # lengths and oov, exactly
            assert np.allclose([s[0] for s in ours], [s[0] for s in theirs], rtol=tolerance, atol=0)
            assert binary.score(sentence, bos=bos, eos=eos) == pytest.approx(text.score(sentence, bos=bos, eos=eos),
                                                                             rel=tolerance, abs=1e-12)
    assert binary.next_words("w1 w2", k=5)[0][0] == text.next_words("w1 w2", k=5)[0][0]


def test_a_binary_file_opens_memory_mapped(arpa, tmp_path):
    """Nothing is parsed or copied: the model's keys and values are views of the file, read-only."""
    path = tmp_path / "kn4.lmb"
    model, vocab = read_arpa_own(arpa)
    write_binary(model, vocab, path)
    loaded, _ = read_binary(path)
    for array in (loaded.table.keys[4], loaded.logp[4], loaded.logbow[3], loaded.table.child_starts(3)):
        base = array
        while base.base is not None and not isinstance(base, np.memmap):
            base = base.base
        assert isinstance(base, np.memmap) and not array.flags.writeable


def test_the_file_is_a_safetensors_file(arpa, tmp_path):
    """Any safetensors reader opens it: the same arrays, and the document under __metadata__."""
    safetensors = pytest.importorskip("safetensors")
    path = tmp_path / "kn4.lmb"
    model, vocab = read_arpa_own(arpa)
    write_binary(model, vocab, path)
    loaded, _ = read_binary(path)
    with safetensors.safe_open(str(path), framework="numpy") as f:
        document = json.loads(f.metadata()["lmbench"])
        assert document["vocab"] == vocab.words and document["order"] == 4
        assert np.array_equal(f.get_tensor("keys.3"), loaded.table.keys[3])
        assert np.array_equal(f.get_tensor("logp.2"), loaded.logp[2])


def test_every_method_written_by_ngram_binary_loads_with_its_figures(tmp_path, capsys):
    """`lmbench ngram --binary`: the loaded model's test perplexity is the fitted model's (float64 values), for
    a back-off model, interpolated KN, class-based, deleted interpolation, the add-one unigram and the
    infini-gram."""
    files = write_splits(tmp_path, train=markov_text(3000, 40, 1), valid=markov_text(400, 40, 2),
                         test=markov_text(400, 40, 3))
    history = files["train"].read_text() + " " + files["valid"].read_text()
    for method, extra in (("katz", ["--order", "3"]), ("kneser-ney", ["--order", "4"]), ("class", ["--classes", "5"]),
                          ("deleted-interpolation", []), ("add-one-unigram", []), ("infini-gram", ["--order", "3"])):
        path = tmp_path / f"{method}.lmb"
        code, out, err = run_cli(capsys, "ngram", "--method", method, *extra, *corpus_args(files), "--binary",
                                 str(path), "--float64", "--json")
        assert code == 0, err
        figures = json.loads(out)
        model = lmbench.load(path)
        found = model.perplexity(files["test"].read_text(), bos=False, eos=False, history=history)
        assert found == pytest.approx(figures["test_perplexity"], rel=1e-9), method


@pytest.mark.parametrize("order", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("packed", [None, False])
def test_the_walk_scores_as_the_back_off_rule(corpus, order, packed):
    """BackoffModel.walk (compiled) against the vectorised rule (BackoffModel._score), on packed and
    prefix-rank keys, from every start; segments read alone equal their separate scores."""
    from baselines.counts import NgramTable
    model = (KneserNeyBackoff(order) if order > 1 else Katz(2)).fit(corpus)
    if packed is False:  # the same model over prefix-rank keys at every order
        table = NgramTable(model.vocab_size, {n: model.table.grams[n] for n in range(2, model.order + 1)}, packed=False)
        rows = [None] + [table.index(n, model.table.grams[n]) for n in range(1, model.order + 1)]
        logp = [None] + [np.empty_like(model.logp[n]) for n in range(1, model.order + 1)]
        logbow = [None] + [np.empty_like(model.logbow[n]) for n in range(1, model.order)]
        for n in range(1, model.order + 1):
            logp[n][rows[n]] = model.logp[n]
            if n < model.order:
                logbow[n][rows[n]] = model.logbow[n]
        model.set_parameters(table, logp, logbow)
    stream = np.concatenate([corpus.test, np.random.default_rng(order).integers(0, len(corpus.vocab), 300)])
    for start in (0, 1, 4, 250):
        walked, lengths = model.walk(stream, start)
        assert np.allclose(walked, model._score(stream, start), rtol=0, atol=1e-12)
        found = model.table.index_stream(stream, model.order)
        assert np.array_equal(lengths, np.max([np.where(found[n] >= 0, n, 1) for n in range(1, model.order + 1)],
                                              axis=0)[start:])
    segments = np.array([[0, 1, 40], [40, 40, 41], [41, 45, 300], [300, 302, 302], [302, 303, len(stream)]])
    expected = np.concatenate([model._score(stream[a:c], b - a) for a, b, c in segments])
    assert np.allclose(model.score_segments(stream, segments), expected, rtol=0, atol=1e-12)


def test_score_many_is_score_of_each(arpa):
    """score_many: each text's score; score_lines (`lmbench score FILE`): full_scores' sums and counts."""
    model = lmbench.load(arpa)
    sentences = random_sentences(model.vocab, np.random.default_rng(1)) + ["", "   "]
    for bos, eos in ((True, True), (False, False), (False, True)):
        expected = [model.score(sentence, bos=bos, eos=eos) for sentence in sentences]
        assert np.allclose(model.score_many(sentences, bos=bos, eos=eos), expected, rtol=1e-12, atol=1e-12)
        logprobs, tokens, oov = model.score_lines(sentences, bos=bos, eos=eos)
        scores = [np.array(list(model.full_scores(sentence, bos, eos))).reshape(-1, 3) for sentence in sentences]
        assert tokens.tolist() == [len(s) for s in scores] and oov.tolist() == [int(s[:, 2].sum()) for s in scores]
        assert np.allclose(logprobs, [s[:, 0].sum() for s in scores], rtol=1e-12, atol=1e-12)


NUMBERS = ("-5.0103", "-5.0103e0", "-50103E-4", "-.50103e1", "-5.01030000000000000000000000000001", "-5.",
           "-0.00000000000000000000000005e26", "-5000000000000000000000000000e-27", "-5e23", "-7.7e307", "-99",
           "-5.2345678901234567", "-5.5E+0", "-0")  # (many digits, exponents beyond 22, and a probability of 1)


def test_the_reader_reads_every_way_of_writing_a_number_as_python_does(tmp_path):
    """A unigram file whose log10 probabilities are written in many forms (exponents, a leading + or ., more
    digits than a float holds): each value is float(text) * ln 10, exactly. (Its unigrams sum to 1 only with
    one word of probability 1, "-0": the others are all but 0.)"""
    words = [f"w{i}" for i in range(len(NUMBERS))]
    values = np.array([float(text) for text in NUMBERS])
    lines = [f"{text}\t{word}" for text, word in zip(NUMBERS, words)] + ["-99\t<unk>"]
    path = tmp_path / "numbers.arpa"
    path.write_text(f"\\data\\\nngram 1={len(lines)}\n\n\\1-grams:\n" + "\n".join(lines) + "\n\n\\end\\\n")
    model, vocab = read_arpa_own(path)
    ids = vocab.encode(words)
    assert np.array_equal(model.logp[1][ids], values * np.log(10.0))


# A trigram model over a, b, <unk> whose trigram "b b a" has no listed suffix "b a": its P(a | b) is reached by
# backing off (bow(b) P(a)); unigrams 0.2 0.4 0.4, bigrams "a b" 0.5 and "b b" 0.3, trigram "b b a" 0.6.
UNLISTED_SUFFIX = """\\data\\
ngram 1=3
ngram 2=2
ngram 3=1

\\1-grams:
{unk}\t<unk>\t0
{p4}\ta\t{bow_a}
{p4}\tb\t{bow_b}

\\2-grams:
{p5}\ta b\t0
{p3}\tb b\t{bow_bb}

\\3-grams:
{p6}\tb b a

\\end\\
"""


def unlisted_suffix(p6: float = 0.6, normalised_for: float = 0.6) -> str:
    """The file, with bow("b b") making P(. | b b) sum to 1 for a trigram probability of `normalised_for`."""
    bow_bb = (1 - normalised_for) / (1 - 0.7 / 0.6 * 0.4)
    return UNLISTED_SUFFIX.format(unk=math.log10(0.2), p4=math.log10(0.4), p5=math.log10(0.5), p3=math.log10(0.3),
                                  p6=math.log10(p6), bow_a=math.log10(0.5 / 0.6), bow_b=math.log10(0.7 / 0.6),
                                  bow_bb=math.log10(bow_bb))


def test_a_file_whose_suffixes_are_not_all_listed_is_read_and_checked(tmp_path):
    """P(a | b b) is listed, P(a | b) backs off (no "b a"): the check's mass below is that of the back-off rule,
    so the file reads, P(. | b b) sums to 1, and the same file with P(a | b b) raised to 0.7 is refused."""
    path = tmp_path / "suffix.arpa"
    path.write_text(unlisted_suffix())
    model, vocab = read_arpa_own(path)
    after = model.distribution(vocab.encode(["b", "b"]))
    assert after.sum() == pytest.approx(1.0) and after[vocab.id("a")] == pytest.approx(0.6)
    path.write_text(unlisted_suffix(p6=0.7))
    with pytest.raises(LMBenchError, match="after 'b b' sums to"):
        read_arpa(path, vocab)


@pytest.mark.parametrize("damage", ["cut short", "random bytes", "a foreign safetensors file", "an ARPA's name"])
def test_a_damaged_binary_file_is_refused_in_one_line(arpa, tmp_path, damage):
    path = tmp_path / "kn4.lmb"
    model, vocab = read_arpa_own(arpa)
    write_binary(model, vocab, path)
    data = path.read_bytes()
    if damage == "cut short":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "random bytes":
        path.write_bytes(data[:100] + bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)))
    elif damage == "a foreign safetensors file":
        header = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
        path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    else:
        assert data.count(b'order\\": 4') == 1
        path.write_bytes(data.replace(b'order\\": 4', b'order\\": 9'))
    with pytest.raises(LMBenchError) as refused:
        lmbench.load(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and ("build-binary" in message or "ARPA" in message), message


def lmbench_main(argv):
    from lmbench_cli import main
    return main(argv)


def test_the_reader_reads_a_file_a_block_at_a_time(arpa, tmp_path, monkeypatch):
    """Blocks far shorter than the file (and than some of its lines, which double the block): the same model,
    and a refusal names the entry of the section that holds the bad value, as with one block."""
    import baselines.arpa_parser
    whole, vocab = read_arpa_own(arpa)
    lines = arpa.read_text().split("\n")
    at = lines.index("\\3-grams:") + 40                               # an entry beyond the first blocks
    lines[at] = "\t".join(["nan", *lines[at].split("\t")[1:]])
    bad = tmp_path / "bad.arpa"
    bad.write_text("\n".join(lines))
    with pytest.raises(LMBenchError) as at_once:
        read_arpa(bad, vocab)
    monkeypatch.setattr(baselines.arpa_parser, "BLOCK", 16)
    blocked, _ = read_arpa_own(arpa)
    for n in range(1, whole.order + 1):
        assert np.array_equal(blocked.table.keys[n], whole.table.keys[n])
        assert np.array_equal(blocked.logp[n], whole.logp[n])
    with pytest.raises(LMBenchError) as blockwise:
        read_arpa(bad, vocab)
    assert str(blockwise.value) == str(at_once.value) and "entry 40 of its \\3-grams: section" in str(at_once.value)
