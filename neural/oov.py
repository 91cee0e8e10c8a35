"""Words outside the vocabulary, initialised from their context (Bengio et al. 2003, section 5.1).

The convention of the rest of the suite maps a word outside V to `<unk>` and predicts `<unk>`.
Here, scoring a split, a word j outside V met for the first time in a context h gets the model's
expectation of the word in that slot,

    C(j) <- sum_{i in V} C(i) P(i | h)

is added to V, and the distribution is renormalised over the enlarged vocabulary; later
occurrences reuse its vector (as a context word and as a candidate). The same expectation gives
every other parameter with a row per word (`WORD_TABLES` of the network): the NPLM's output row
[U, W]_j and bias b_j, the energy network's b_j and direct weights W_j. For the NPLM, whose score
y_j is linear in those rows, y_j = sum_i P(i | h) y_i exactly, so before renormalisation
P(j | h) = exp(-H(P(. | h))): one over the perplexity of the context's distribution.

V grows one word at a time, in the order the split first meets them: the i-th word's vector comes
from a distribution over V and the i - 1 words before it (a loop over the new words, one context
each; not over tokens). Every token is then scored in batches against all the words, those not yet
met at its position masked out: a token is predicted among V and the words outside V met so far in
its split, itself included at its first occurrence. Each split starts again from V, and the tokens
of the stream before it keep `<unk>`. A literal `<unk>` in a text corpus stays `<unk>`.

Perplexity under this convention measures something else than under `<unk>`: a word outside V
is no longer one frequent symbol but its own word, with a probability of its own, among a
vocabulary that grows. The two are reported side by side (`lmbench eval --oov init`) and
must not be compared with each other, nor with a model that maps to `<unk>`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from corpora.vocab import UNK
from lmbench.errors import LMBenchError
from neural.scoring import EVAL_BATCH, context_windows, nearest_rows
from neural.outputs.layers import softmax_parts


@dataclass
class GrownVocabulary:
    """A network and a split's stream after the out-of-vocabulary initialisation."""
    net: torch.nn.Module  # the network over V + N words (in eval mode)
    words: list[str]  # the N words added, in the order first met
    first: np.ndarray  # (N,) int64: where each was first met, an index of `stream`
    stream: np.ndarray  # (history + split,) int64 ids, the words outside V as V, V + 1, ...
    start: int  # where the split starts in `stream`

    @property
    def base_size(self) -> int:
        """|V| before growing."""
        return self.net.vocab_size - len(self.words)


def widen(net: torch.nn.Module, extra: int) -> torch.nn.Module:
    """A copy of `net` (any `neural.families.Network` with the full softmax) over `extra` more words,
    their rows of the word tables zero, on the same device and in the same dtype."""
    reference = next(net.parameters())
    wide = type(net)(net.shape, net.vocab_size + extra)
    wide.to(device=reference.device, dtype=reference.dtype)  # before loading: no rounding on the way
    wide.load_state_dict({name: torch.cat([value, value.new_zeros(extra, *value.shape[1:])])
                          if name in net.WORD_TABLES else value for name, value in net.state_dict().items()})
    return wide.eval()


def grow(net: torch.nn.Module, corpus, split: str) -> GrownVocabulary:
    """The network of `net` with every word outside V that `split` holds added, each initialised
    from the context where it is first met (the module docstring)."""
    if net.saved_structure(net.state_dict()) is not None:
        raise LMBenchError("an output layer over a word structure has no place for a new word (a "
                           "class-factored network no class, a tree no leaf): score it with --oov unk "
                           "(the default)")
    if corpus.unk_words is None:
        raise LMBenchError(f"corpus {corpus.name!r} keeps no raw words of its <unk> tokens: --oov init needs "
                           "the brown or text corpus (prepared again if cached by an older version: --no-cache)")
    stream, start = corpus.stream_for(split, history=net.history)
    stream = stream.astype(np.int64)
    at = start + np.flatnonzero(stream[start:] == corpus.vocab.unk_id)  # (U,) the <unk> tokens of the split
    raw = corpus.unk_words[split]
    if len(raw) != len(at):
        raise LMBenchError(f"corpus {corpus.name!r} has {len(at)} <unk> tokens in {split} but {len(raw)} raw "
                           "words for them: prepare it again with --no-cache")
    outside = raw != UNK  # a literal <unk> stays <unk>
    at, raw = at[outside], raw[outside]
    words, first_index, inverse = np.unique(raw, return_index=True, return_inverse=True)
    order = np.argsort(first_index, kind="stable")  # the new words in the order first met
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    stream[at] = net.vocab_size + rank[inverse.reshape(-1)]
    grown = GrownVocabulary(widen(net, len(order)), words[order].tolist(), at[first_index[order]], stream, start)
    initialise(grown)
    return grown


@torch.no_grad()
def initialise(grown: GrownVocabulary) -> None:
    """For the i-th new word, in order, every word table's row V + i <- sum_j P(j | h) row_j over
    the V + i words before it, h its first context; P and the sums in float64."""
    net, base = grown.net, grown.base_size
    device = next(net.parameters()).device
    contexts = torch.from_numpy(context_windows(grown.stream, net.history)[grown.first].copy()).to(device)  # (N, n-1)
    tables = [p for name, p in net.named_parameters() if name in net.WORD_TABLES]
    for i, context in enumerate(contexts):
        size = base + i  # the words the context's distribution is over
        p = torch.softmax(net(context[None])[0, :size].double(), dim=0)  # (size,) P(. | h)
        for table in tables:
            table[size] = (p @ table[:size].double()).to(table.dtype)


def masked_scores(grown: GrownVocabulary, lo: int, hi: int) -> torch.Tensor:
    """The scores y (B, V + N) of the tokens stream[lo:hi] (lo >= start), -inf for the words not
    yet met at each token's position."""
    net = grown.net
    device = next(net.parameters()).device
    contexts = torch.from_numpy(context_windows(grown.stream[:hi], net.history, lo).copy()).to(device)  # (B, n-1)
    scores = net(contexts)  # (B, V + N)
    position = torch.arange(lo, hi, device=device)
    first = torch.from_numpy(grown.first).to(device)
    scores[:, grown.base_size:].masked_fill_(first[None, :] > position[:, None], -torch.inf)
    return scores


@torch.inference_mode()
def score(grown: GrownVocabulary, batch_size: int = EVAL_BATCH) -> np.ndarray:
    """Natural-log P of every token of the split (float64, (len(split),)), each among the vocabulary
    grown by its position."""
    targets = torch.from_numpy(grown.stream).to(next(grown.net.parameters()).device)
    result = np.empty(len(grown.stream) - grown.start)
    for lo in range(grown.start, len(grown.stream), batch_size):
        hi = min(lo + batch_size, len(grown.stream))
        picked, peak, total = softmax_parts(masked_scores(grown, lo, hi), targets[lo:hi])
        result[lo - grown.start: hi - grown.start] = (picked.double() - peak.double()
                                                      - total.double().log()).cpu().numpy()
    return result


@torch.inference_mode()
def distribution(grown: GrownVocabulary, position: int) -> np.ndarray:
    """P(. | the context of stream[position]) over the V + N words (float64), zero for the words
    not yet met there: what `score` predicts the token at `position` among."""
    return torch.softmax(masked_scores(grown, position, position + 1)[0].double(), dim=0).cpu().numpy()


def neighbors(grown: GrownVocabulary, word: str, k: int) -> list[tuple[int, float]]:
    """The k words of V nearest to the added `word` by cosine similarity in C, nearest first, as
    (id, similarity)."""
    table = grown.net.C.detach().double().cpu().numpy()  # (V + N, m)
    return nearest_rows(table[: grown.base_size], table[grown.base_size + grown.words.index(word)], k)


def summary(grown: GrownVocabulary, frequent: int = 10) -> dict:
    """How many words were added and how many tokens of the split they are, and the most frequent."""
    split = grown.stream[grown.start:]
    counts = np.bincount(split[split >= grown.base_size] - grown.base_size, minlength=len(grown.words))  # (N,)
    top = np.argsort(-counts, kind="stable")[:frequent]
    return {"oov_words": len(grown.words), "oov_tokens": int(counts.sum()),
            "oov_frequent": {grown.words[i]: int(counts[i]) for i in top}}
