"""The network of Bengio et al. (2003), equation (1):

    x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))          the n-1 context vectors, concatenated
    y = b + W x + U tanh(d + H x)                            one score per word of the vocabulary
    P(w_t = i | context) = exp(y_i) / sum_j exp(y_j)         the softmax

with one shared table C (|V| x m). Options: h = 0 drops the hidden layer (y = b + W x); direct=False
drops the direct connections (W = 0, so W is not a parameter at all).

Contexts are stored oldest first, so x here is C(w_{t-n+1}) ... C(w_{t-1}); the order of the blocks
is a relabelling of H and W and changes nothing. A context shorter than n-1 tokens (the start of a
stream) is left-padded with PAD_ID, the id of <unk> (0): the model sees "unknown word" before the
first token, with no extra row in C, so the parameter count stays the paper's.

The output layer is fused: U and W are the two column blocks of ONE matrix `out` = [U, W]
(|V| x (h + (n-1)m)), multiplied once against z = [tanh(d + H x), x]. With direct connections the
parameters number |V|(1 + nm + h) + h(1 + (n-1)m), as in section 3 of the paper.

Optional class layer (Goodman 2001), for the class-factored objective: every word w belongs to one
class c(w) of C, and

    s = b_c + [U_c, W_c] z                                   one score per class (C x K weights)
    P(w | h) = P(c(w) | h) P(w | c(w), h)
             = softmax(s)[c(w)] * exp(y_w) / sum_{j in c(w)} exp(y_j)

The word part reuses y = b + [U, W] z, normalised over the words of one class only, so P sums to 1
over the vocabulary by construction. The word -> class map is a buffer of the network (saved with
it); a network built without it is the paper's. `forward` still gives y, whose full softmax is a
distribution too (not the one the class-factored objective trains).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.nn import functional as F

from lmbench.errors import LMBenchError
from neural.families import NPLMShape

PAD_ID = 0  # <unk>: what the model sees before the first token of a stream


class NPLM(nn.Module):
    """P(w_t | w_{t-n+1} .. w_{t-1}) over a vocabulary of `vocab_size` words."""

    WORD_TABLES = ("C", "out", "b")  # the parameters with one row per word (`neural.oov` grows them)

    def __init__(self, shape: NPLMShape, vocab_size: int, *, output: str = "softmax",
                 structure: torch.Tensor | None = None, dropout: float = 0.0):
        """output: "softmax" (the paper's) or "class", whose `structure` is the (V,) class id of every
        word, ids 0 .. C-1 each used. dropout: on z while training (not in the paper)."""
        super().__init__()
        self.shape, self.vocab_size, self.dropout = shape, vocab_size, dropout
        n, m, h, direct = shape.n, shape.m, shape.h, shape.direct
        self.n, self.m, self.h, self.direct = n, m, h, direct
        self.history = n - 1  # the context: n-1 words
        width = (n - 1) * m  # size of x
        self.C = nn.Parameter(torch.empty(vocab_size, m))  # (V, m) the word feature table
        if h:
            self.H = nn.Parameter(torch.empty(h, width))  # (h, (n-1)m) hidden weights
            self.d = nn.Parameter(torch.empty(h))  # (h,) hidden biases
        self.out = nn.Parameter(torch.empty(vocab_size, h + (width if direct else 0)))  # (V, K) = [U, W]
        self.b = nn.Parameter(torch.empty(vocab_size))  # (V,) output biases
        self.num_classes = 0  # C; 0: no class layer
        if output == "class":
            self._add_class_layer(torch.as_tensor(structure))
        elif output != "softmax" or structure is not None:
            raise ValueError(f"the NPLM's output layer is softmax or class (with its structure), not {output!r}")
        self.reset_parameters()

    @staticmethod
    def saved_output(state: dict) -> tuple[str, torch.Tensor | None]:
        """The output layer and its structure that rebuild the network whose state is `state`."""
        return ("class", state["word_class"]) if "word_class" in state else ("softmax", None)

    def _add_class_layer(self, classes: torch.Tensor) -> None:
        """The word -> class map (saved with the network), the class weights [U_c, W_c] (C, K) and
        biases b_c (C,), and the map's index structures (rebuilt from it, not saved)."""
        if classes.shape != (self.vocab_size,) or classes.dtype.is_floating_point or classes.min() < 0:
            raise ValueError(f"classes must be ({self.vocab_size},) non-negative integer ids, got "
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
        position[by_class] = torch.arange(self.vocab_size) - start[classes[by_class]]
        self.register_buffer("word_class", classes.clone())  # (V,) c(w)
        self.register_buffer("class_words", by_class, persistent=False)
        self.register_buffer("class_start", start, persistent=False)
        self.register_buffer("class_size", size, persistent=False)
        self.register_buffer("class_position", position, persistent=False)
        self.class_out = nn.Parameter(torch.empty(self.num_classes, self.out.shape[1]))  # (C, K) [U_c, W_c]
        self.class_b = nn.Parameter(torch.empty(self.num_classes))  # (C,) class biases b_c

    def reset_parameters(self) -> None:
        """C ~ U(-0.05, 0.05); H, [U, W] and [U_c, W_c] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); d = b = b_c = 0."""
        nn.init.uniform_(self.C, -0.05, 0.05)
        if self.h:
            bound = self.H.shape[1] ** -0.5
            nn.init.uniform_(self.H, -bound, bound)
            nn.init.zeros_(self.d)
        bound = self.out.shape[1] ** -0.5
        nn.init.uniform_(self.out, -bound, bound)
        nn.init.zeros_(self.b)
        if self.num_classes:
            nn.init.uniform_(self.class_out, -bound, bound)
            nn.init.zeros_(self.class_b)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        """Start from the unigram q (V,): b = log q, and with a class layer b_c = log q(c),
        q(c) = sum_{w in c} q_w, so that P(w | h) = q_w for every h while [U, W] z is small."""
        self.b.copy_(unigram.log())
        if self.num_classes:
            mass = unigram.new_zeros(self.num_classes).index_add_(0, self.word_class.to(unigram.device),
                                                                  unigram)  # (C,) q(c)
            self.class_b.copy_(mass.log())

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """nn.Module's, refusing a state made with another word -> class map (or none): the class
        layer's index structures come from this network's map."""
        saved, own = state_dict.get("word_class"), getattr(self, "word_class", None)
        if (saved is None) != (own is None) or (own is not None and not torch.equal(saved.cpu(), own.cpu())):
            def what(m):
                return "no class layer" if m is None else f"{int(m.max()) + 1} classes"
            raise LMBenchError(f"the saved network has another word -> class map ({what(saved)}) than this "
                               f"one ({what(own)}): use the --objective, --classes and --class-source it was "
                               "trained with, or another --out directory")
        return super().load_state_dict(state_dict, strict, assign)

    @property
    def U(self) -> torch.Tensor | None:
        """(V, h) hidden-to-output weights."""
        return self.out[:, : self.h] if self.h else None

    @property
    def W(self) -> torch.Tensor | None:
        """(V, (n-1)m) direct connections, None when there are none."""
        return self.out[:, self.h:] if self.direct else None

    def decay_parameters(self) -> list[nn.Parameter]:
        """The weights and C: what weight decay applies to (never the biases b, d and b_c)."""
        return [p for p in (self.C, getattr(self, "H", None), self.out, getattr(self, "class_out", None))
                if p is not None]

    def bias_parameters(self) -> list[nn.Parameter]:
        return [p for p in (getattr(self, "d", None), self.b, getattr(self, "class_b", None))
                if p is not None]

    def features(self, context: torch.Tensor) -> torch.Tensor:
        """z = [tanh(d + H x), x] (or the part of it that exists) for contexts (B, n-1) int64."""
        # (B, (n-1)m); a sparse gradient: an update touches only the rows of C in the contexts
        x = F.embedding(context, self.C, sparse=True).view(context.shape[0], -1)
        if self.h:
            a = torch.tanh(torch.addmm(self.d, x, self.H.t()))  # (B, h)
            x = torch.cat([a, x], dim=1) if self.direct else a  # (B, K)
        return F.dropout(x, self.dropout, self.training) if self.dropout else x

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        """The scores y = b + [U, W] z, shape (B, V); softmax(y) is P(. | context)."""
        return torch.addmm(self.b, self.features(context), self.out.t())

    def softmax_nll(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean over the batch of -log softmax(y)[target] for features z (B, K), through the fused
        output layer. bf16: the two |V|-sized GEMMs (almost all the FLOPs) run in bfloat16, the
        softmax in fp32."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        return SoftmaxNLL.apply(z, self.out, self.b, target, dtype)

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Mean over the batch of the exact -log P(target | context) of this network's output layer:
        the full softmax (`softmax_nll`) or the class-factored one (`class_nll`)."""
        return self.class_nll(z, target) if self.num_classes else self.softmax_nll(z, target, bf16)

    def class_nll(self, z: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """-log P(c(w) | h) - log P(w | c(w), h), the mean over the batch: the scores of the C classes
        and those of the words of each target's class only (`WithinClassNLL`)."""
        classes = self.word_class[target]  # (B,)
        words, runs = self.class_members(classes)  # (T,), (B + 1,)
        rows, bias = self.output_rows(words)  # (T, K), (T,)
        targets_at = runs[:-1] + self.class_position[target]  # (B,) each target's entry in its run
        within = WithinClassNLL.apply(z, rows, bias, runs, targets_at)
        return F.cross_entropy(self.class_scores(z), classes) + within

    @torch.inference_mode()
    def log_probs(self, context: torch.Tensor, target: torch.Tensor | None = None, *, bf16: bool = False,
                  full_softmax: bool = False) -> torch.Tensor:
        """float64 log P(target | context) (B,), or log P(. | context) (B, V) when target is None: the
        class-factored distribution of a network with a class layer (unless `full_softmax`: the
        softmax of its y), else the full softmax (bf16: its GEMM in bfloat16)."""
        if self.num_classes and not full_softmax:
            return self.factored_log_probs(context, target)
        return log_softmax(*self.log_softmax_parts(context, target, bf16=bf16), target)

    def output_rows(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of [U, W] (R, K) and of b (R,) for word ids (R,), for the sampled objectives:
        the gradient of [U, W] is sparse (only these rows), b's is dense but |V| numbers only."""
        return F.embedding(words, self.out, sparse=True), self.b[words]

    def sampled_scores(self, z: torch.Tensor, target: torch.Tensor,
                       sample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The hook of the sampled objectives: y of each example's target (B,) and of the k words of
        `sample` for every example (B, k), through the rows of [U, W] and b they use only."""
        rows, bias = self.output_rows(torch.cat([target, sample]))
        batch = len(target)
        positive = (z * rows[:batch]).sum(dim=1) + bias[:batch]  # (B,)
        return positive, torch.addmm(bias[batch:], z, rows[batch:].t())  # (B, k)

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

    @torch.inference_mode()
    def factored_log_probs(self, context: torch.Tensor, target: torch.Tensor | None = None) -> torch.Tensor:
        """log P(w | h) = log softmax(s)[c(w)] + y_w - log sum_{j in c(w)} exp(y_j) of the class layer,
        float64: for each target (B,), or for every word (B, V) when target is None.

        Only the scores needed are computed: the C class scores and those of the words of each
        target's class, B (C + |c|) K multiply-adds instead of the full softmax's B V K. Every score,
        of a class or a word, is the dot product of its own two rows (`member_scores`), so it does not
        depend on the rest of the batch and the two forms agree to float64 rounding (a GEMM's
        rounding can change with the number of rows); the log-softmaxes are finished in float64."""
        z = self.features(context)  # (B, K)
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

    @torch.inference_mode()
    def log_softmax_parts(self, context: torch.Tensor, target: torch.Tensor | None = None,
                          bf16: bool = False):
        """For evaluation without materialising anything but the (B, V) scores:
        y[target] (B,) (or the whole y (B, V) when target is None), the row maxima (B,) and
        sum_j exp(y_j - max) (B,), in fp32 (fp64 for a double network);
        log P(target) = y[target] - max - log(sum)."""
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        z = self.features(context)
        scores = at_least_fp32(torch.addmm(self.b.to(dtype), z.to(dtype), self.out.to(dtype).t()))  # (B, V)
        return softmax_parts(scores, target)


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
    `NPLM.class_members`), z (B, K), weights (R, K): a sampled matrix product, T K multiply-adds, each
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
    T entries of the runs (B + 1,) (`NPLM.class_members`), rows (T, K), bias (T,), the target of
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


def parameter_count(vocab_size: int, n: int, m: int, h: int, direct: bool) -> int:
    """|V|(1 + nm + h) + h(1 + (n-1)m) with direct connections; |V|(1 + m + h) + h(1 + (n-1)m)
    without (W's |V|(n-1)m weights gone)."""
    with_direct = vocab_size * (1 + n * m + h) + h * (1 + (n - 1) * m)
    return with_direct if direct else with_direct - vocab_size * (n - 1) * m
