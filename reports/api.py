"""lmbench as a library: `load(path)` opens any model the suite saved and returns a `TextModel`, which scores
and samples raw text the way KenLM's Python module and nltk.lm do (docs/api.md).

What `load` opens:
- an ARPA file (`lmbench ngram --arpa`, KenLM's lmplz, SRILM): its vocabulary is the words of its
  `\\1-grams:` section, `<unk>` first (`baselines.arpa_reader.read_arpa_words`);
- a network run folder (`lmbench train --out`): its best model (`neural.training.checkpoint.load_network`),
  over the vocabulary of the corpus its corpus.json records (`corpora.record.load_recorded`);
- a reproduction's work folder (`lmbench reproduce`, `runs/NAME`) and a row id in it (`row=`): a network
  row's best model from the row's training folder (`nplm/ID-FINGERPRINT`), an n-gram row refitted on the
  corpus the folder's corpus.json records (the folder keeps an n-gram row's log-probabilities, not its
  model; a refit is the same model, the method being deterministic, in seconds to minutes where the network
  took hours). A mixture row is no one model: load its parts. `row_model` is the same for a row whose
  corpus is at hand (the pipeline's samples, `reports.running.results_file.samples`).

A `TextModel` carries its vocabulary and its tokenization: whitespace-separated tokens, a word outside the
vocabulary read as `<unk>`. Sentence markers are the corpus's own (`markers`): KenLM's `<s>` and `</s>`
where the model prices `</s>` (an ARPA file of KenLM or SRILM); else the marker that ends a corpus's units,
`</p>` (Brown's paragraphs) or `</d>` (documents, AP), which is then both what `bos` puts before the text
(the context a unit starts from in the corpus's stream: the previous unit's end) and what `eos` scores after
it; a corpus without markers (a user's text, whose line breaks are whitespace) has neither, and `bos`
starts from an empty context, as the corpus's stream starts.

Each name borrowed from KenLM or nltk.lm means what it means in its library (`TextModel`): KenLM's
log-probabilities are in base 10, computed from the suite's natural logs (`LanguageModel.score`), and its
perplexity is 10^(-mean log10 probability) over every token scored, the end marker and `<unk>` included (the
benchmark's figure: `lmbench.model.perplexity`); nltk.lm's `score(word, context)` is a probability and its
`logscore` and `entropy` are in base 2. `history=` gives the text read before (its tokens are context, not
scored): an n-gram model reads its last order - 1 tokens, a window network (NPLM) its last n - 1, and a
stream network (LSTM, GRU, RNN, Transformer) all of it, as the benchmark scores test after train and valid:
`perplexity(test_text, bos=False, eos=False, history=train_text + valid_text)` is the row's test perplexity,
of the tokens the row ran on (a quick run's are the first of each file, its corpus.json's `slice`).
"""

from __future__ import annotations

import codecs
import math
import numbers
import random
from pathlib import Path
from typing import Iterator

import numpy as np

from baselines.arpa import LN10, LOG10_ZERO
from baselines.arpa_reader import read_arpa_own
from baselines.backoff import BackoffModel
from baselines.binary import is_binary
from corpora.record import load_recorded, read_record
from corpora.vocab import UNK, Vocabulary
from lmbench.errors import LMBenchError
from lmbench.files import DamagedFile, read_checked
from lmbench.model import SAMPLE_MAX, LanguageModel, perplexity
from lmbench.threads import THREADS_BOUND
from reports.work_folder import NGRAM_RECORD, WorkFolder

KENLM_MARKERS = ("<s>", "</s>")
KENLM_FORM = object()  # `score`'s context when none is given: KenLM's score(text), not nltk.lm's score(word, context)
LN2 = math.log(2)
# a network run folder's model files (neural.training.checkpoint's BEST, CHECKPOINT and the older OLDER: named
# here, since importing that module loads torch, which an ARPA file needs not)
NETWORK_FILES = ("best.safetensors", "checkpoint.safetensors", "best.pt", "checkpoint.pt")
UNIT_ENDS = ("</p>", "</d>")  # the corpora's markers (corpora.brown, corpora.ap), the shorter unit first


class TextModel:
    """A loaded model over its vocabulary and tokenization (module docstring), answering KenLM's calls and
    nltk.lm's, each as its library does (docs/api.md): KenLM's `score(text, *, bos, eos)` (log10), `perplexity`,
    `full_scores` and `word in model`; nltk.lm's `score(word, context)` (a probability), `logscore` (log2),
    `entropy` and `perplexity` of n-grams, `generate` and `vocab.lookup`; lmbench's own `logprob`, `next_words`
    and `sample`. A call that neither library's form answers is refused in one line."""

    def __init__(self, model: LanguageModel, vocab: Vocabulary, name: str):
        if len(vocab) != model.vocab_size:
            raise LMBenchError(f"{name}: the model has {model.vocab_size} words but its vocabulary {len(vocab)}: "
                               "load it with the corpus it was trained on")
        self.model, self.vocab, self.name = model, vocab, name
        self.begin, self.end = markers(model, vocab)

    def __repr__(self) -> str:
        return f"TextModel({self.name!r}, {_count(len(self.vocab), 'word')}, order {self.order})"

    @property
    def order(self) -> int | None:
        """Tokens read per prediction, the word included (an n-gram's N, a window network's n); None: a stream
        network, which reads all of them."""
        return self.model.order

    def __contains__(self, word: str | bytes) -> bool:
        """KenLM's `word in model`: whether the vocabulary holds the word, `<unk>` not (KenLM gives it id 0, an
        unknown word's); `<s>` and `</s>` where the model has them. nltk.lm's membership, `<unk>` in it, is
        `word in model.vocab`."""
        word = _text(word, "the word", "give a word (KenLM's `word in model`)")
        return word != UNK and word in self.vocab

    def _stream(self, text: str | bytes, bos: bool, eos: bool,
                history: str | bytes | None) -> tuple[np.ndarray, int, list[str]]:
        """(stream, start, words): the ids of the history, the begin marker (bos), the text's tokens and the end
        marker (eos); the positions from `start` on are scored, as `words` (none for a text of no token without
        eos, whose log10 probability is KenLM's 0.0)."""
        fix = "give a text of whitespace-separated words (KenLM's form; nltk.lm's score(word, context) takes a list)"
        words = _text(text, "the text", fix).split()
        if eos and self.end is not None:
            words.append(self.vocab.word(self.end))
        before = list(self.vocab.encode(_text(history, "the history", fix).split())) if history else []
        if bos and self.begin is not None:
            before.append(self.begin)
        stream = np.concatenate([np.asarray(before, dtype=np.int32), self.vocab.encode(words)])
        return stream, len(before), words

    def _logprobs(self, text: str | bytes, bos: bool, eos: bool, history: str | bytes | None) -> np.ndarray:
        stream, start, words = self._stream(text, bos, eos, history)
        return self.model.score(stream, start) if words else np.zeros(0)

    def score(self, text: str | bytes, context=KENLM_FORM, *, bos: bool = True, eos: bool = True,
              history: str | bytes | None = None) -> float:
        """Two libraries' `score`, told apart by a second argument:
        - KenLM's `score(text, *, bos=True, eos=True)`: log10 P(text), the sum of its tokens' log10
          probabilities, the end marker scored after them when `eos`, the text read after the begin marker
          when `bos` (0.0 for a text of no token); `history` is read before (lmbench's).
        - nltk.lm's `score(word, context)`: P(word | context), a probability, not a log; `context` a list or
          tuple of words (None: none), read as given (no marker before it), a word outside the vocabulary as
          `<unk>`.
        `bos` and `eos` are keywords: a second positional argument is nltk's context."""
        if context is not KENLM_FORM:
            if isinstance(context, bool):
                raise LMBenchError(f"score(text, {context}): bos and eos are keyword arguments here (score(text, bos="
                                   f"{context})), since a second positional argument is nltk.lm's context, a list of "
                                   "words")
            _nltk_form("score(word, context)", bos, eos, history)
            return math.exp(self._ngram_logprob(text, context))
        return float(self._logprobs(text, bos, eos, history).sum() / LN10)

    def logprob(self, text: str | bytes, *, bos: bool = True, eos: bool = True,
                history: str | bytes | None = None) -> float:
        """log10 P(text), as KenLM's `score(text, bos=..., eos=...)`."""
        return self.score(text, bos=bos, eos=eos, history=history)

    def logscore(self, word: str, context=None) -> float:
        """nltk.lm's `logscore`: log2 P(word | context) (base 2, nltk's), the log of `score(word, context)`."""
        return self._ngram_logprob(word, context) / LN2

    def entropy(self, text_ngrams) -> float:
        """nltk.lm's `entropy`: the cross-entropy in bits, -mean log2 P(ngram[-1] | ngram[:-1]) over the n-grams
        (tuples of words, e.g. nltk.util.bigrams's or everygrams's, a list or an iterator)."""
        logprobs = [self._ngram_logprob(ngram[-1], ngram[:-1]) for ngram in self._ngrams(text_ngrams)]
        return -math.fsum(logprobs) / len(logprobs) / LN2

    def perplexity(self, text, *, bos: bool = True, eos: bool = True, history: str | bytes | None = None) -> float:
        """Two libraries' `perplexity`, told apart by what is given:
        - a text, KenLM's `perplexity(text)`: 10^(-mean log10 probability) over the tokens scored, the end
          marker included when `eos` (KenLM's always), the text read after the begin marker when `bos`;
          `history` is read before (lmbench's); the benchmark's perplexity of the same tokens.
        - n-grams (a list or iterator of tuples of words), nltk.lm's `perplexity(text_ngrams)`: 2 ** `entropy`."""
        if not isinstance(text, (str, bytes)):
            _nltk_form("perplexity(text_ngrams)", bos, eos, history)
            return 2.0 ** self.entropy(text)
        logprobs = self._logprobs(text, bos, eos, history)
        if not len(logprobs):
            raise LMBenchError(f"the text {_text(text, 'the text', '')[:40]!r} holds no token to score: give some "
                               "words (or eos=True on a model with an end marker)")
        return perplexity(logprobs)

    def score_many(self, texts, *, bos: bool = True, eos: bool = True) -> np.ndarray:
        """lmbench's: KenLM's `score(text, bos=, eos=)` of each text of a list (log10 P, 0.0 for a text of no
        token without eos), as one array; each text is read alone, after the begin marker when `bos`. A back-off
        model scores them all in one compiled pass (`LanguageModel.score_segments`)."""
        return self.score_lines(texts, bos=bos, eos=eos)[0]

    def score_lines(self, texts, *, bos: bool = True, eos: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log10 P, tokens scored, words out of the vocabulary) of each text of a list, as `score_many` scores
        them and `full_scores` counts them: `lmbench score FILE`'s lines."""
        fix = "give a list of texts (str), each of whitespace-separated words"
        if isinstance(texts, (str, bytes)):
            raise LMBenchError(f"score_many takes a list of texts, not one text ({texts!r:.40}): {fix}, or score(text)")
        texts = [_text(text, "a text", fix).split() for text in texts]
        begin = 1 if bos and self.begin is not None else 0
        end = [self.vocab.word(self.end)] if eos and self.end is not None else []
        lengths = np.array([len(words) + len(end) for words in texts], dtype=np.int64)  # (k,) tokens scored
        scored = lengths > 0
        sizes = np.where(scored, lengths + begin, 0)                                   # (k,) each one's stream
        firsts = np.cumsum(sizes) - sizes
        ids = self.vocab.encode([word for words in texts if words or end for word in (*words, *end)])
        stream = np.full(int(sizes.sum()), self.begin if begin else 0, dtype=np.int32)
        read = np.ones(len(stream), dtype=bool)
        read[firsts[scored] if begin else []] = False                                   # (the begin markers)
        stream[read] = ids
        totals, oov = np.zeros(len(texts)), np.zeros(len(texts), dtype=np.int64)
        if scored.any():
            starts = np.cumsum(lengths[scored]) - lengths[scored]                       # each one's first token
            logprobs = self.model.score_segments(stream, np.column_stack([firsts, firsts + begin, firsts + sizes])[scored])
            with np.errstate(over="ignore"):  # a sum beyond a float's range: -inf
                totals[scored] = np.add.reduceat(logprobs / LN10, starts)
            oov[scored] = np.add.reduceat((ids == self.vocab.unk_id).astype(np.int64), starts)  # (full_scores' oov)
        return totals, lengths, oov

    def full_scores(self, text: str | bytes, bos: bool = True, eos: bool = True, *,
                    history: str | bytes | None = None) -> Iterator[tuple[float, int, bool]]:
        """(log10 probability, n-gram length, out of vocabulary) for each token scored (KenLM's `full_scores`;
        nothing for a text of no token without eos). The n-gram length is how many tokens the prediction read,
        the word included: for a back-off model (an ARPA file, Katz, Kneser-Ney) the longest n-gram it lists
        that ends at the word (KenLM's `ngram_length`), for another model the context it reads (its order's, a
        stream network's whole stream before the word) plus one."""
        stream, start, words = self._stream(text, bos, eos, history)
        if not words:
            return
        if isinstance(self.model, BackoffModel):
            logprobs, lengths = self.model.walk(stream, start)  # (lengths: the longest n-gram listed ending there)
        else:
            logprobs, positions = self.model.score(stream, start), np.arange(start, len(stream))
            lengths = positions + 1 if self.order is None else np.minimum(positions + 1, self.order)
        logprobs = logprobs / LN10
        oov = _oov(self.vocab, words)
        for logprob, length, unknown in zip(logprobs.tolist(), lengths.tolist(), oov):
            yield logprob, int(length), unknown

    def _ngram_logprob(self, word: str, context) -> float:
        """Natural-log P(word | context) (nltk.lm's form: the context's words as given, each outside the
        vocabulary read as <unk>, as nltk's `vocab.lookup` reads them), as `full_scores` scores the word after
        them: a model reads its order's last words of the context, a stream network all of them."""
        if isinstance(context, (str, bytes)):
            raise LMBenchError(f"the context {context!r:.60} is a text: nltk.lm's score(word, context) takes a list of "
                               f"words ({str(context.split())[:60]}), KenLM's score(text) a whole text")
        if not isinstance(word, str) or word.split() != [word]:
            raise LMBenchError(f"the word {word!r:.60} is no single word: nltk.lm's score(word, context) scores one "
                               "word (a str without whitespace); KenLM's score(text) scores a text")
        words = _words(context, "the context", "nltk.lm's score(word, context), logscore and entropy")
        ids = self.vocab.encode([*words, word])
        return float(self.model.score(ids, len(words))[0])

    def _ngrams(self, text_ngrams) -> list:
        """nltk.lm's n-grams as a list of tuples, each of one word or more (str); anything else refused."""
        fix = "give n-grams, tuples of words (e.g. list(nltk.util.bigrams(words))); KenLM's perplexity takes a text"
        if isinstance(text_ngrams, (str, bytes)):
            raise LMBenchError(f"the n-grams {text_ngrams!r:.60} is a text: {fix}")
        try:
            ngrams = list(text_ngrams)
        except TypeError:
            raise LMBenchError(f"the n-grams {text_ngrams!r:.60} ({type(text_ngrams).__name__}) are no sequence: "
                               f"{fix}") from None
        if not ngrams:
            raise LMBenchError(f"the list of n-grams holds no n-gram to score: {fix}")
        for ngram in ngrams:
            if isinstance(ngram, (str, bytes)) or not isinstance(ngram, (tuple, list)) or not ngram:
                raise LMBenchError(f"the n-gram {ngram!r:.60} is a {type(ngram).__name__}, not a tuple of words: {fix}")
        return ngrams

    def _context(self, text: str | list[str] | tuple[str, ...] | None, bos: bool, what: str) -> list[int]:
        """The ids of a context, a text or (nltk.lm's) a list of words (an empty list: none), after the begin
        marker when `bos`; a context of words the vocabulary lacks only, refused: the model would continue
        from <unk> alone."""
        if isinstance(text, (str, bytes)):
            text = _text(text, f"the {what}", "give a text or a list of words")
            words = text.split()
        elif text is None:
            words = []
        else:
            words = _words(text, f"the {what}", "a seed text (nltk.lm's text_seed) or a context")
            text = " ".join(words) if words else None
        known = [word for word in words if word in self.vocab and word != UNK]
        if text is not None and not known:
            examples = [word for word in self.vocab.words[:8] if word != UNK][:3]
            if not examples:  # (an ARPA file of <unk> alone)
                raise LMBenchError(f"the {what} {text[:60]!r} holds no word of the model's vocabulary, which holds "
                                   f"none but {UNK} ({self.name}): give no {what.split(' (')[0]}, or load a model "
                                   "of some words")
            raise LMBenchError(f"the {what} {text[:60]!r} holds no word of the model's vocabulary "
                               f"({_count(len(self.vocab) - 1, 'word')} besides {UNK}, e.g. {', '.join(examples)}): "
                               "give one with a known word")
        return ([self.begin] if bos and self.begin is not None else []) + self.vocab.encode(words).tolist()

    def next_words(self, context: str | list[str] | None = None, k: int = 10,
                   bos: bool = True) -> list[tuple[str, float]]:
        """The k most likely next words after `context` (a text or a list of words; None: the start of a unit)
        with their probabilities, most likely first (ties: the vocabulary's order)."""
        k = whole_number(k, "k", 1, fix="a number of words")
        p = self.model.distribution(self._context(context, bos, "context"))
        best = np.argsort(-p, kind="stable")[:k]
        return [(self.vocab.word(int(i)), float(p[i])) for i in best]

    def generate(self, num_words: int = 1, text_seed: str | list[str] | None = None, random_seed=None,
                 temperature: float = 1.0, bos: bool = True) -> str | list[str]:
        """nltk.lm's `generate`: `sample`'s words, one word (a str) when `num_words` is 1 and a list of them
        otherwise, as nltk returns them; `text_seed` a list of words (nltk's) or a text, `random_seed` a whole
        number, a random.Random (nltk's) or None."""
        words = self.sample(num_words, text_seed, random_seed, temperature, bos)
        return words[0] if len(words) == 1 else words

    def sample(self, num_words: int, text_seed: str | list[str] | None = None, random_seed=None,
               temperature: float = 1.0, bos: bool = True) -> list[str]:
        """A list of `num_words` words (at most SAMPLE_MAX) drawn one at a time from the model's distribution after
        the seed (a text or a list of words; the seed is not repeated in the answer, as in nltk.lm's `generate`),
        each given everything drawn before (a stream network its whole sample, an n-gram or window network its
        last order - 1), read as the model reads a stream (`LanguageModel.reader`: a recurrent network's state
        carried, each word fed once; a Transformer's window slid), so that a word costs the same however many
        came before. `temperature` divides the log-probabilities (below 1: likelier words; above 1: flatter).
        The same `random_seed` (a whole number) gives the same words; a random.Random draws the seed of the
        sample from itself (nltk's: consecutive calls continue it); None draws a fresh sample."""
        num_words, temperature = check_sampling(num_words, temperature)
        reader = self.model.reader(self._context(text_seed, bos, "seed text (--seed-text)"))
        rng = _generator(random_seed)
        drawn = []
        for _ in range(num_words):
            if drawn:
                reader.read(drawn[-1])
            drawn.append(draw(reader.distribution(), temperature, rng))
        return self.vocab.decode(drawn)


def _nltk_form(call: str, bos: bool, eos: bool, history) -> None:
    """Refuse KenLM's keywords beside nltk.lm's form, which reads its context as given."""
    if bos is not True or eos is not True or history is not None:
        raise LMBenchError(f"{call} is nltk.lm's form, which reads each context as given (no markers, no history):"
                           " drop bos, eos and history, or give a text (KenLM's form takes them)")


def _count(count: int, noun: str) -> str:
    """`1 word`, `2 words`."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _oov(vocab: Vocabulary, words: list[str]) -> list[bool]:
    """Whether each word is out of the vocabulary (read as <unk>), <unk> itself included: full_scores' oov."""
    return [word not in vocab or word == UNK for word in words]


def _text(value, what: str, fix: str) -> str:
    """A text as a str: bytes read as UTF-8, as KenLM reads them; anything else refused in one line."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as err:
            raise LMBenchError(f"{what} {value[:40]!r} is no UTF-8 ({err.reason} at byte {err.start}): give a str or "
                               "UTF-8 bytes") from None
    raise LMBenchError(f"{what} {value!r:.60} is of type {type(value).__name__}, not str: {fix}")


def _words(words, what: str, call: str) -> list[str]:
    """nltk.lm's words (a list or tuple of str; None: none) as a list, each one word; anything else refused."""
    if words is None:
        return []
    if not isinstance(words, (list, tuple)) or not all(isinstance(w, str) and w.split() == [w] for w in words):
        raise LMBenchError(f"{what} {words!r:.60} is no list of words: {call} takes a list or tuple of words (str, "
                           "each without whitespace)")
    return list(words)


def _generator(random_seed) -> np.random.Generator:
    """The sampler of `random_seed`: a whole number of at least 0 (the same words each time), a random.Random
    (nltk.lm's: the sample's seed drawn from it), a numpy Generator, or None (a fresh sample)."""
    if isinstance(random_seed, np.random.Generator):
        return random_seed
    if isinstance(random_seed, random.Random):
        return np.random.default_rng(random_seed.getrandbits(128))
    if random_seed is None:
        return np.random.default_rng()
    return np.random.default_rng(whole_number(random_seed, "random_seed", 0, option="--seed", fix="a seed", more=(
        "a random.Random (nltk.lm's), or None for a fresh sample")))


def whole_number(value, name: str, least: int, most: int | None = None, *, option: str = "", fix: str = "a number",
                 more: str = "") -> int:
    """The API's whole numbers (`k`, `num_words`, a seed, `threads`) as an int: an int or a numpy integer, not a
    bool (True is no count), from `least` to `most` (None: no bound); anything else refused in one line naming
    the argument (and its `option` on the command line), its value and what it takes (`fix`, what the number
    is; `more`, what else it may be)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= least \
            and (most is None or value <= most):
        return int(value)
    bounds = f"of at least {least:,}" if most is None else f"from {least:,} to {most:,}"
    raise LMBenchError(f"{_argument(name, value, option)}: give {fix}, a whole number {bounds}"
                       + (f", {more}" if more else ""))


def positive_number(value, name: str, *, option: str = "", fix: str = "") -> float:
    """The API's real numbers (`temperature`) as a float: a finite number above 0, an int or a numpy number
    included, not a bool; anything else refused in one line (`fix`: what the number does)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    raise LMBenchError(f"{_argument(name, value, option)}: give a finite number above 0" + (f" ({fix})" if fix else ""))


def _argument(name: str, value, option: str) -> str:
    """An argument as a refusal names it: `k=True (a bool)`, `num_words=0 (--words)`."""
    kind = "" if type(value) in (int, float, str) else f" (a {type(value).__name__})"
    return f"{name}={value!r:.60}{kind}" + (f" ({option})" if option else "")


def check_sampling(num_words: int, temperature: float) -> tuple[int, float]:
    """(num_words, temperature) checked (`whole_number`, `positive_number`): from 1 to SAMPLE_MAX words, a finite
    temperature above 0; refused in one line otherwise."""
    return (whole_number(num_words, "num_words", 1, SAMPLE_MAX, option="--words", fix=(
                f"a number of words (a sample draws one word at a time; {SAMPLE_MAX:,} at most, a longer text in "
                "several samples, each seeded with the last words of the one before)")),
            positive_number(temperature, "temperature", option="--temperature",
                            fix="1: the model's own distribution"))


def draw(p: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """One word drawn from the distribution `p` (V,) at `temperature`: p^(1 / temperature), renormalised, each
    log-probability taken from the largest before it is divided, so that the weights stay finite at any finite
    temperature above 0 (the likeliest words 1, the others at most 1; a temperature near 0 draws the likeliest)."""
    p = np.asarray(p, dtype=np.float64)
    if temperature != 1:
        with np.errstate(divide="ignore", over="ignore", under="ignore"):
            logits = np.log(p)
            p = np.exp((logits - logits.max()) / temperature)
    return int(rng.choice(len(p), p=p / p.sum()))


def markers(model: LanguageModel, vocab: Vocabulary) -> tuple[int | None, int | None]:
    """(begin, end) ids (module docstring): <s> and </s> where the model gives </s> a probability (an ARPA file
    of KenLM or SRILM; `baselines.arpa_writer` lists them at log10 0 for such tools, then they are no markers of
    the corpus), else the corpus's unit end both times, else (None, None)."""
    if all(marker in vocab for marker in KENLM_MARKERS):
        end = vocab.id("</s>")
        if model.distribution([vocab.id("<s>")])[end] > 10.0 ** (LOG10_ZERO + 1):
            return vocab.id("<s>"), end
    for marker in UNIT_ENDS:
        if marker in vocab:
            return vocab.id(marker), vocab.id(marker)
    return None, None


def load(path: str | Path, row: str | None = None, *, device: str = "auto", threads: int | None = None) -> TextModel:
    """The model saved at `path` (an ARPA file, a network run folder, or a work folder with `row`, the id of
    one of its rows; module docstring) as a `TextModel`. `device`: where a network runs ("auto": CUDA when
    there is one); `threads`: its CPU threads (None: the free cores)."""
    if threads is not None:
        threads = whole_number(threads, "threads", 1, THREADS_BOUND, option="--threads", fix="a count of CPU threads",
                               more="or None for the free cores")
    path = Path(path)
    if path.is_file():
        if row is not None:
            raise LMBenchError(f"row {row!r}: {path} is a file (an ARPA or binary model file has no rows); a row names "
                               "a model of a work folder (runs/NAME)")
        if is_binary(path):
            return TextModel(*_binary(path), str(path))
        with open(path, "rb") as f:  # (a UTF-8 byte order mark before it, as Windows editors write, is no text)
            first = f.read(1 << 12).removeprefix(codecs.BOM_UTF8).lstrip().split(b"\n", 1)[0].strip()
        if first != b"\\data\\":
            raise LMBenchError(f"{path} is a file that is no ARPA file (its first line is not \\data\\) nor a binary "
                               "model file (lmbench build-binary): give one of them, a network run folder (lmbench "
                               "train --out) or a work folder (runs/NAME) with a row")
        return TextModel(*read_arpa_own(path), str(path))
    if WorkFolder(path).is_work_folder():
        return _row(WorkFolder(path), row, device, threads)
    if path.is_dir() and any((path / name).exists() for name in (*NETWORK_FILES, "corpus.json")):
        if row is not None:
            raise LMBenchError(f"row {row!r}: {path} is a network run folder, which holds one model; a row names a "
                               "model of a work folder (runs/NAME)")
        return _network(path, load_recorded(path).vocab, device, threads, str(path))
    what = "a folder" if path.is_dir() else "no file or folder"
    raise LMBenchError(f"{path} is {what}, not a saved model: give an ARPA file, a network run folder "
                       "(lmbench train --out) or a work folder (runs/NAME) with a row")


def holds_network(path: str | Path, row: str | None = None) -> bool:
    """Whether `load(path, row)` would load a network (torch): a network run folder, or a work folder's network
    row; not a file (an ARPA or binary model file) nor a work folder's n-gram or mixture row. What load refuses
    (no such path, row or record) is left to it: False."""
    path = Path(path)
    if path.is_file() or not path.is_dir():
        return False
    work = WorkFolder(path)
    return not work.is_work_folder() or work.row_kind(row) == "network"


def _binary(path: Path, fix: str = "") -> tuple[LanguageModel, Vocabulary]:
    """(model, vocabulary) of a binary model file (baselines.binary), memory-mapped; a damaged one refused in one
    line naming it and `fix` (checked against its record where it has one: a work folder's)."""
    from baselines.binary import FIX, read_binary
    return read_checked(path, read_binary, what="binary model file", fix=fix or FIX)


def _network(run: Path, vocab: Vocabulary, device: str, threads: int | None, name: str,
             expected: dict | None = None, fix: str = "") -> TextModel:
    """The network of run folder `run` over `vocab`; `expected`: the configuration of the row it is read for
    (neural.training.checkpoint.network_mismatch), a file of another network refused in one line ending `fix`."""
    from types import SimpleNamespace

    from neural.training.checkpoint import load_network
    return TextModel(load_network(run, SimpleNamespace(vocab=vocab), device=device, threads=threads,
                                  expected=expected, fix=fix), vocab, name)


def _row(work: WorkFolder, row: str | None, device: str, threads: int | None) -> TextModel:
    """Row `row` of the work folder `work` (`row_model`), from what the folder keeps."""
    saved = work.row_ids()
    if row is None or row not in saved:
        asked = "name one of its rows" if row is None else f"it holds no row {row!r}"
        raise LMBenchError(f"{work.path} is a work folder: {asked} (row=ID, --row ID): "
                           f"{', '.join(saved) or 'none run yet'}")
    record = work.record(row, fix=f"delete it and run its `lmbench reproduce` command again, which runs row {row} "
                                  "again")
    if record["kind"] == "mix":
        raise LMBenchError(f"row {row} of {work.path} mixes {', '.join(record['parts'])}: a mixture is no one saved "
                           f"model; load a part (row={record['parts'][0]!r})")
    return row_model(work.path, record, device=device, threads=threads)


def row_model(work: Path, record: dict, corpus=None, *, device: str = "auto", threads: int | None = None) -> TextModel:
    """The model of a row of work folder `work` (`record`: its rows/ID.json, or its row of results.json): a
    network row's best model from its training folder (`nplm/ID-FINGERPRINT`) over the vocabulary the folder
    keeps, an n-gram row's kept model (reports.work_folder). A folder made before they were kept
    is read over `corpus` (the corpus it ran on; None: the one its corpus.json records, loaded), an n-gram row
    refitted on it (every method is deterministic)."""
    folder_of_rows = WorkFolder(Path(work))
    work = folder_of_rows.path
    name = f"{work}:{record['id']}"
    if record["kind"] == "network":
        folder = folder_of_rows.network_folder(record["id"], record["fingerprint"])
        config = record.get("config") if isinstance(record.get("config"), dict) else {}
        own = dict(expected={"model": record.get("family"), **config, "corpus": _recorded_digest(work)}, fix=(
            f"it is not row {record['id']}'s ({record.get('family')}); delete {folder} and run its `lmbench "
            f"reproduce` command again, which trains row {record['id']} again"))
        if corpus is None and folder_of_rows.vocabulary_path.is_file():
            return _network(folder, Vocabulary.load(folder_of_rows.vocabulary_path), device, threads, name, **own)
        corpus = corpus if corpus is not None else _recorded(work, record, "its vocabulary")
        return _network(folder, corpus.vocab, device, threads, name, **own)
    kept = folder_of_rows.model_path(record["id"], record["fingerprint"])
    if kept.is_file():
        from baselines.binary import kept_row
        fix = f"delete it and run its `lmbench reproduce` command again, which fits row {record['id']} again"
        made = read_checked(kept, kept_row, what="binary model file", fix=fix)
        if made is not None and (made["id"], made["fingerprint"]) != (record["id"], record["fingerprint"]):
            raise LMBenchError(f"{kept} holds the model of row {made['id']} (fingerprint {made['fingerprint']}), not "
                               f"of row {record['id']} (fingerprint {record['fingerprint']}): {fix}")
        return TextModel(*_binary(kept, fix=fix), name)
    from baselines.methods import NGramOptions, make_ngram
    corpus = corpus if corpus is not None else _recorded(work, record, "its model")
    options = NGramOptions(*(record[key] for key in NGRAM_RECORD))
    return TextModel(make_ngram(options).fit(corpus), corpus.vocab, name)


def _recorded_digest(work: Path) -> str | None:
    """The digest of the corpus a work folder's rows ran on, as its corpus.json records it (None: a folder made
    before it did), which a network row's best model, trained on it, records too."""
    record = read_record(work)
    return record.get("digest") if record is not None else None


def _recorded(work: Path, record: dict, what: str):
    """The corpus a work folder records, for a row of a folder made before it kept `what`; where it cannot be
    loaded (its files moved), one line saying what is missing and what makes the folder stand on its own."""
    try:
        corpus = load_recorded(work)
    except DamagedFile:  # (its corpus.json's fields: the line says which, and how to write it again)
        raise
    except LMBenchError as err:
        problem = str(err).split(": ", 1)[0]
        raise LMBenchError(f"row {record['id']} of {work} keeps no copy of {what} (the folder was made before "
                           f"`lmbench reproduce` kept them) and cannot be read without its corpus: {problem}; put the "
                           f"corpus files back where {work}/corpus.json records them, or run the `lmbench reproduce` "
                           f"command that made {work} again with its corpus (its rows stay cached), which keeps "
                           f"every row's model and the vocabulary in {work}") from None
    _same_corpus(work, record, corpus)
    return corpus


def _same_corpus(work: Path, record: dict, corpus) -> None:
    """Refuse, in one line, the corpus a work folder's corpus.json loads (`corpora.record.load_recorded`) where it
    is not the one row `record` was made from: the vocabulary and valid and test tokens its saved
    log-probabilities record (logprobs/ID.npz, mixing.saved; a corpus.json whose slice or options were edited)."""
    from mixing import saved
    path = WorkFolder(work).logprobs_path(record["id"])
    if not path.is_file():
        return
    made = saved.load(path)
    if "stream" not in made:  # (written before the files held fingerprints: nothing to compare)
        return
    loaded = saved.fingerprints(corpus)
    differs = [key for key in saved.FINGERPRINTS if made[key] != loaded[key]]
    if differs:
        raise LMBenchError(f"{work}/corpus.json loads another corpus than row {record['id']} was made from (its "
                           f"{' and '.join(differs)} fingerprint {loaded[differs[0]]}, the row's {made[differs[0]]}): "
                           "restore the corpus.json `lmbench reproduce` wrote (its slice and options as they were), or "
                           f"run that command again, which writes it and keeps every row's model in {work}")
