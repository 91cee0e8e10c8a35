"""Output layers: what turns a network's features z (B, K) into P(w | h) over the vocabulary, each a
module owned by the network (`NPLM.output`) with its exact training loss (`loss`) and its exact
log-probabilities (`log_probs`). Which one a network has is its objective's (`neural.config.OBJECTIVES`):

- `SoftmaxLayer` (objectives "softmax", "importance", "nce"): the paper's y = b + [U, W] z,
  P(. | h) = softmax(y) over all |V| words. U and W are the two column blocks of ONE matrix `out` =
  [U, W] (|V| x K), multiplied once against z. The sampled objectives read only the rows they draw
  (`rows`, `sampled_scores`).
- `ClassLayer` (objective "class", Goodman 2001): every word w belongs to one class c(w) of C, and

      s = b_c + [U_c, W_c] z                                   one score per class (C x K weights)
      P(w | h) = P(c(w) | h) P(w | c(w), h)
               = softmax(s)[c(w)] * exp(y_w) / sum_{j in c(w)} exp(y_j)

  The word part reuses y = b + [U, W] z of the softmax layer, normalised over the words of one class
  only, so P sums to 1 over the vocabulary by construction. The word -> class map (`structure`) is a
  buffer of the layer (saved with it). `scores` still gives y, whose full softmax is a distribution
  too (not the one the class-factored objective trains; `log_probs(..., full_softmax=True)`).
- `neural.outputs.tree.TreeLayer` (objective "tree"): a binary tree over V, P(w | h) the product of the
  sigmoid decisions on the path to w.

A layer with a word structure (the class map, the tree) keeps it in the buffer `structure`, which the
network's `saved_output` reads back from a checkpoint; it refuses a state of another structure.
Every layer lists its parameters with one row per word in WORD_TABLES (`neural.oov` widens those of
the softmax layer) and splits its parameters into decayed weights and spared biases.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.nn import functional as F

from lmbench.errors import LMBenchError
from neural.config import OBJECTIVES
from neural.families import load


def output_layer(name: str) -> type:
    """The class of the output layer `name`: the layer of the exact objective of that name."""
    return load(OBJECTIVES[name].layer)


class OutputLayer(nn.Module):
    """Base: an output layer over `vocab_size` words from features of `width`. Subclasses implement
    `loss`, `log_probs` and `scores`; those with a word structure set `structure` (a buffer)."""

    name = ""
    num_classes = 0  # C of a class-factored layer
    WORD_TABLES: tuple[str, ...] = ()  # parameters with one row per word

    def __init__(self, vocab_size: int, width: int):
        super().__init__()
        self.vocab_size, self.width = vocab_size, width

    def check_structure(self, saved: torch.Tensor | None) -> None:
        """Refuse (one line) a saved state whose word structure is not this layer's."""
        own = getattr(self, "structure", None)
        if (saved is None) != (own is None) or (own is not None and not torch.equal(saved.cpu(), own.cpu())):
            raise LMBenchError(f"the saved network has another output layer ({describe(saved)}) than this "
                               f"one ({describe(own)}): use the --objective, --classes and --class-source it "
                               "was trained with, or another --out directory")

    def decay_parameters(self) -> list[nn.Parameter]:
        raise NotImplementedError

    def bias_parameters(self) -> list[nn.Parameter]:
        raise NotImplementedError


def describe(structure: torch.Tensor | None) -> str:
    """A word structure in a few words: a class map's number of classes, a tree's leaves."""
    if structure is None:
        return "no class layer"
    if structure.dim() == 1:
        return f"{int(structure.max()) + 1} classes"
    return f"a tree of {len(structure) + 1} leaves"


class SoftmaxLayer(OutputLayer):
    """y = b + [U, W] z over the |V| words; P(. | h) = softmax(y)."""

    name = "softmax"
    WORD_TABLES = ("out", "b")

    def __init__(self, vocab_size: int, width: int, structure: None = None):
        super().__init__(vocab_size, width)
        if structure is not None:
            raise ValueError("the full softmax has no word structure")
        self.out = nn.Parameter(torch.empty(vocab_size, width))  # (V, K) = [U, W]
        self.b = nn.Parameter(torch.empty(vocab_size))  # (V,) output biases

    def reset_parameters(self) -> None:
        """[U, W] ~ U(-1/sqrt(K), 1/sqrt(K)); b = 0."""
        nn.init.uniform_(self.out, -self.width ** -0.5, self.width ** -0.5)
        nn.init.zeros_(self.b)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """b = log q: P(w | h) = q_w while [U, W] z is small."""
        self.b.copy_(unigram.log())

    def decay_parameters(self) -> list[nn.Parameter]:
        return [self.out]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [self.b]

    def scores(self, z: torch.Tensor) -> torch.Tensor:
        """y = b + [U, W] z (B, V) for features z (B, K)."""
        return torch.addmm(self.b, z, self.out.t())

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean over the batch of -log softmax(y)[target], fused (`SoftmaxNLL`). bf16: the two |V|-sized
        GEMMs (almost all the FLOPs) run in bfloat16, the softmax in fp32."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        return SoftmaxNLL.apply(z, self.out, self.b, target, dtype)

    def rows(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of [U, W] (R, K) and of b (R,) for word ids (R,): the gradient of [U, W] is sparse
        (only these rows), b's is dense but |V| numbers only."""
        return F.embedding(words, self.out, sparse=True), self.b[words]

    def sampled_scores(self, z: torch.Tensor, target: torch.Tensor,
                       sample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The hook of the sampled objectives: y of each example's target (B,) and of the k words of
        `sample` for every example (B, k), through the rows of [U, W] and b they use only."""
        rows, bias = self.rows(torch.cat([target, sample]))
        batch = len(target)
        positive = (z * rows[:batch]).sum(dim=1) + bias[:batch]  # (B,)
        return positive, torch.addmm(bias[batch:], z, rows[batch:].t())  # (B, k)

    def parts(self, z: torch.Tensor, target: torch.Tensor | None = None, bf16: bool = False):
        """For evaluation without materialising anything but the (B, V) scores: y[target] (B,) (or the
        whole y (B, V) when target is None), the row maxima (B,) and sum_j exp(y_j - max) (B,), in fp32
        (fp64 for a double network); log P(target) = y[target] - max - log(sum)."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        scores = at_least_fp32(torch.addmm(self.b.to(dtype), z.to(dtype), self.out.to(dtype).t()))  # (B, V)
        return softmax_parts(scores, target)

    def log_probs(self, z: torch.Tensor, target: torch.Tensor | None = None, *, bf16: bool = False,
                  full_softmax: bool = False) -> torch.Tensor:
        """float64 log softmax(y)[target] (B,), or the whole (B, V) when target is None."""
        return log_softmax(*self.parts(z, target, bf16), target)


class ClassLayer(SoftmaxLayer):
    """The class-factored softmax (module docstring) over the (V,) word -> class map `structure`, ids
    0 .. C-1 each used; the map's index structures are rebuilt from it (not saved)."""

    name = "class"

    def __init__(self, vocab_size: int, width: int, structure: torch.Tensor):
        super().__init__(vocab_size, width)
        classes = torch.as_tensor(structure)
        if classes.shape != (vocab_size,) or classes.dtype.is_floating_point or classes.min() < 0:
            raise ValueError(f"classes must be ({vocab_size},) non-negative integer ids, got "
                             f"{tuple(classes.shape)} {classes.dtype}")
        classes = classes.to(torch.int64)
        size = torch.bincount(classes)  # (C,) words per class
        if (size == 0).any():
            raise ValueError(f"class ids must be 0 .. C-1 with every class used; class "
                             f"{int(torch.nonzero(size == 0)[0])} has no word")
        self.num_classes = len(size)
        by_class = torch.argsort(classes, stable=True)  # (V,) the words of class 0, 1, ..., by id within one
        start = torch.cumsum(size, 0) - size  # (C,) where each class's words begin in by_class
        position = torch.empty_like(classes)  # (V,) the place of each word among its class's words
        position[by_class] = torch.arange(vocab_size) - start[classes[by_class]]
        self.register_buffer("structure", classes.clone())  # (V,) c(w)
        self.register_buffer("class_words", by_class, persistent=False)
        self.register_buffer("class_start", start, persistent=False)
        self.register_buffer("class_size", size, persistent=False)
        self.register_buffer("class_position", position, persistent=False)
        self.class_out = nn.Parameter(torch.empty(self.num_classes, width))  # (C, K) [U_c, W_c]
        self.class_b = nn.Parameter(torch.empty(self.num_classes))  # (C,) class biases b_c

    @property
    def word_class(self) -> torch.Tensor:
        """(V,) c(w)."""
        return self.structure

    def reset_parameters(self) -> None:
        """As the softmax layer's, and [U_c, W_c] ~ U(-1/sqrt(K), 1/sqrt(K)), b_c = 0."""
        super().reset_parameters()
        nn.init.uniform_(self.class_out, -self.width ** -0.5, self.width ** -0.5)
        nn.init.zeros_(self.class_b)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """b = log q and b_c = log q(c), q(c) = sum_{w in c} q_w, so that P(w | h) = q_w for every h
        while [U, W] z is small."""
        super().set_unigram_biases(unigram)
        mass = unigram.new_zeros(self.num_classes).index_add_(0, self.word_class.to(unigram.device),
                                                              unigram)  # (C,) q(c)
        self.class_b.copy_(mass.log())

    def decay_parameters(self) -> list[nn.Parameter]:
        return [self.out, self.class_out]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [self.b, self.class_b]

    def class_scores(self, z: torch.Tensor) -> torch.Tensor:
        """s = b_c + [U_c, W_c] z, shape (B, C), for features z (B, K); softmax(s) is P(class | context)."""
        return torch.addmm(self.class_b, z, self.class_out.t())

    def class_members(self, classes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For class ids (B,): the words of each one's class, by id, all in one run after another
        (T,) (T = sum_i |c_i|), and where each run starts, with the total at the end (B + 1,): the
        CSR layout of the (B, V) mask [w in c_i]."""
        size = self.class_size[classes]  # (B,)
        runs = F.pad(torch.cumsum(size, 0), (1, 0))  # (B + 1,)
        total = int(runs[-1])
        within = torch.arange(total, device=classes.device)  # (T,) index, minus the run's start below
        return self.class_words[within + torch.repeat_interleave(self.class_start[classes] - runs[:-1], size,
                                                                 output_size=total)], runs

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """-log P(c(w) | h) - log P(w | c(w), h), the mean over the batch. The classes are scored with
        one (B, K) x (K, C) product. For the words the batch is laid out as runs, one per example, of
        the words of its class (T = sum_i |c(w_i)| entries; the CSR layout of the (B, V) mask
        [j in c(w_i)]), their rows of [U, W] read through `rows` (an update touches only the rows of
        the classes in the batch) and each entry scored by a sampled matrix product (`WithinClassNLL`):
        T K multiply-adds, no padding to the largest class and no loop over classes. Measured on Brown
        (MLP1, frequency classes, batch 128, one thread): 4.2 ms an update, against 4.3 ms looping over
        the classes of the batch and 6-8 ms gathering rows per entry through autograd; padding to the
        largest class (1,292 words, against 42 a token on average) would do some 30 times the work.
        bf16 is ignored (no |V|-sized GEMM)."""
        classes = self.word_class[target]  # (B,)
        words, runs = self.class_members(classes)  # (T,), (B + 1,)
        rows, bias = self.rows(words)  # (T, K), (T,)
        targets_at = runs[:-1] + self.class_position[target]  # (B,) each target's entry in its run
        within = WithinClassNLL.apply(z, rows, bias, runs, targets_at)
        return F.cross_entropy(self.class_scores(z), classes) + within

    def log_probs(self, z: torch.Tensor, target: torch.Tensor | None = None, *, bf16: bool = False,
                  full_softmax: bool = False) -> torch.Tensor:
        """log P(w | h) = log softmax(s)[c(w)] + y_w - log sum_{j in c(w)} exp(y_j), float64: for each
        target (B,), or for every word (B, V) when target is None (full_softmax: the softmax of y
        instead, the softmax layer's).

        Only the scores needed are computed: the C class scores and those of the words of each
        target's class, B (C + |c|) K multiply-adds instead of the full softmax's B V K. Every score,
        of a class or a word, is the dot product of its own two rows (`member_scores`), so it does not
        depend on the rest of the batch and the two forms agree to float64 rounding (a GEMM's
        rounding can change with the number of rows); the log-softmaxes are finished in float64."""
        if full_softmax:
            return super().log_probs(z, target, bf16=bf16)
        batch, num_classes = len(z), self.num_classes
        every_class = torch.arange(num_classes, device=z.device).repeat(batch)  # (B C,)
        class_runs = torch.arange(0, batch * num_classes + 1, num_classes, device=z.device)  # (B + 1,)
        s = member_scores(z, self.class_out, self.class_b.repeat(batch), class_runs,
                          every_class).view(batch, num_classes)  # (B, C)
        log_class = s.double().log_softmax(dim=1)  # (B, C) log P(c | h)
        if target is None:  # B runs of all V words each, in class order
            classes, owner = every_class, torch.arange(batch, device=z.device).repeat_interleave(num_classes)
        else:  # each target's class
            classes, owner = self.word_class[target], torch.arange(batch, device=z.device)  # (B,), (B,)
        words, runs = self.class_members(classes)  # (T,), (runs + 1,)
        scores = member_scores(z.index_select(0, owner), self.out, self.b[words], runs, words)  # (T,) y
        run, peak, _, total = run_log_sum_exp(scores, runs)
        within = (scores.double() - peak.double().index_select(0, run)
                  - total.double().log().index_select(0, run))  # (T,) log P(w | c, h)
        if target is not None:
            targets_at = runs[:-1] + self.class_position[target]  # (B,) each target's entry in its run
            return log_class.gather(1, classes[:, None])[:, 0] + within[targets_at]
        result = torch.empty(batch, self.vocab_size, dtype=torch.float64, device=z.device)
        result[:, self.class_words] = within.view(batch, self.vocab_size)
        return result.add_(log_class.index_select(1, self.word_class))


def softmax_parts(scores: torch.Tensor, target: torch.Tensor | None):
    """scores[target] (B,) (all of scores when target is None), the row maxima (B,) and
    sum_j exp(scores_j - max) (B,) of a (B, V) score buffer, which becomes scratch space when a
    target is given (no second (B, V) tensor)."""
    picked = scores if target is None else scores.gather(1, target[:, None])[:, 0].clone()
    peak = scores.amax(dim=1, keepdim=True)  # (B, 1)
    if target is None:
        total = torch.exp(scores - peak).sum(dim=1)
    else:
        total = scores.sub_(peak).exp_().sum(dim=1)  # (B,) in place
    return picked, peak[:, 0], total


def log_softmax(picked: torch.Tensor, peak: torch.Tensor, total: torch.Tensor,
                target: torch.Tensor | None) -> torch.Tensor:
    """float64 log P from `softmax_parts`: picked - max - log(total), (B,) for targets, (B, V) else."""
    if target is None:
        return picked.double() - peak.double()[:, None] - total.double().log()[:, None]
    return picked.double() - peak.double() - total.double().log()


def csr_matrix(runs: torch.Tensor, columns: torch.Tensor, values: torch.Tensor,
               shape: tuple[int, int]) -> torch.Tensor:
    """The sparse CSR matrix with row i's entries at columns[runs[i]:runs[i+1]] (ascending), without
    torch's one-time notice that CSR support is in beta (only sampled_addmm and the CSR x dense
    product are used here, checked against dense references by tests/test_nplm_class.py)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(runs, columns, values, shape, check_invariants=False)


def member_scores(z: torch.Tensor, weights: torch.Tensor, bias: torch.Tensor, runs: torch.Tensor,
                  columns: torch.Tensor) -> torch.Tensor:
    """The scores bias_t + z_i . weights[columns_t] (T,) of the entries t of run i (runs (B + 1,) as in
    `ClassLayer.class_members`), z (B, K), weights (R, K): a sampled matrix product, T K multiply-adds, each
    entry the dot product of its own two rows."""
    mask = csr_matrix(runs, columns, bias, (len(z), len(weights)))
    return torch.sparse.sampled_addmm(mask, z, weights.t()).values()


def run_log_sum_exp(scores: torch.Tensor, runs: torch.Tensor):
    """For scores (T,) in runs (B + 1,): the run of each entry (T,), each run's maximum (B,),
    e = exp(scores - max of its run) (T,) and each run's sum of e (B,);
    log sum_{t in run i} exp(scores_t) = max_i + log sum_i."""
    batch = len(runs) - 1
    run = torch.repeat_interleave(torch.arange(batch, device=scores.device), runs.diff(),
                                  output_size=len(scores))  # (T,)
    peak = scores.new_full((batch,), -torch.inf).scatter_reduce_(0, run, scores, "amax")  # (B,)
    exp = torch.exp(scores - peak.index_select(0, run))  # (T,)
    return run, peak, exp, scores.new_zeros(batch).index_add_(0, run, exp)


def at_least_fp32(scores: torch.Tensor) -> torch.Tensor:
    """bf16 scores become fp32 for the softmax; fp32 and fp64 stay as they are."""
    return scores.float() if scores.dtype in (torch.bfloat16, torch.float16) else scores


class WithinClassNLL(torch.autograd.Function):
    """loss = mean_i [log sum_{t in run i} exp(y_t) - y_{target_i}], y_t = bias_t + z_i . rows_t for the
    T entries of the runs (B + 1,) (`ClassLayer.class_members`), rows (T, K), bias (T,), the target of
    example i at entry targets_at[i].

    dloss/dy_t = g_t = (exp(y_t) / sum_{run i} exp(y) - [t = targets_at[i]]) / B (T,), and with G the
    (B, T) CSR matrix of g: dloss/dz = G rows (B, K), dloss/drows_t = g_t z_i (T, K), dloss/dbias = g.
    The backward pass may run only once per forward."""

    @staticmethod
    def forward(ctx, z, rows, bias, runs, targets_at):
        entries = torch.arange(len(rows), device=rows.device)  # (T,) run i's entries are its own rows
        scores = member_scores(z, rows, bias, runs, entries)  # (T,) y
        run, peak, exp, total = run_log_sum_exp(scores, runs)  # (T,), (B,), (T,), (B,)
        batch = len(z)
        loss = (peak + total.log() - scores[targets_at]).mean()
        grad = exp.div_(total.index_select(0, run).mul_(batch))  # (T,) softmax within the run / B
        grad[targets_at] -= 1.0 / batch
        ctx.save_for_backward(z, rows, grad, runs, entries, run)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        z, rows, grad, runs, entries, run = ctx.saved_tensors
        grad = grad.mul_(grad_loss)  # (T,) g
        grad_z = csr_matrix(runs, entries, grad, (len(z), len(rows))) @ rows  # (B, K)
        grad_rows = z.index_select(0, run).mul_(grad[:, None])  # (T, K)
        return grad_z, grad_rows, grad, None, None


class SoftmaxNLL(torch.autograd.Function):
    """loss = mean_i [log sum_j exp(y_ij) - y_i,target_i] with y = b + z out^T, fused.

    dloss/dy = (softmax(y) - onehot(target)) / B = s (e - total * onehot) with e = exp(y - max y)
    (B, V), total = sum_j e_j (B,) and s = 1 / (B total) (B,). The forward pass turns its one
    (B, V) score buffer into e - total * onehot in place; the backward pass folds the row scale s
    into the small operands: dloss/dz = s * (g out) (B, K), dloss/dout = g^T (s * z) (V, K),
    dloss/db = g^T s (V,), with g = e - total * onehot. No other |V|-sized tensor is made and no
    extra pass over the (B, V) buffer. The backward pass may run only once per forward."""

    @staticmethod
    def forward(ctx, z, out, b, target, dtype):
        zc, oc = z.to(dtype), out.to(dtype)
        scores = at_least_fp32(torch.addmm(b.to(dtype), zc, oc.t()))  # (B, V) y
        rows = torch.arange(len(target), device=scores.device)
        picked = scores[rows, target]  # (B,) y[target]
        peak = scores.amax(dim=1)  # (B,)
        total = scores.sub_(peak[:, None]).exp_().sum(dim=1)  # (B,); scores now holds e
        scores[rows, target] -= total  # g = e - total * onehot
        ctx.save_for_backward(zc, oc, scores, total)
        ctx.dtypes = (z.dtype, out.dtype, b.dtype)
        return (peak + total.log() - picked).mean()

    @staticmethod
    def backward(ctx, grad_loss):
        zc, oc, g, total = ctx.saved_tensors
        scale = grad_loss / (len(total) * total)  # (B,) s
        gc = g.to(oc.dtype)  # (B, V)
        grad_z = (gc @ oc).mul_(scale.to(oc.dtype)[:, None]).to(ctx.dtypes[0])  # (B, K)
        grad_out = (gc.t() @ (zc * scale.to(zc.dtype)[:, None])).to(ctx.dtypes[1])  # (V, K)
        grad_b = (g.t() @ scale.to(g.dtype)).to(ctx.dtypes[2])  # (V,)
        return grad_z, grad_out, grad_b, None, None
