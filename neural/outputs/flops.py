"""The analytic training FLOPs of the output layers, per target token (torch-free: the families' shapes
call it from `training_flops`, `neural.families`).

Features z (K,) of a token become the loss of the run's objective (`neural.config.OBJECTIVES`); one
update's forward and backward passes cost, per target token, 2 FLOPs per multiply-add:

- softmax: 6 V K. y = b + [U, W] z is a (B, K) x (K, V) GEMM, 2 V K; its backward pass two more, the
  gradients of z and of [U, W] (`neural.outputs.layers.SoftmaxNLL`), 4 V K.
- importance, nce: (6 k + 4) K. The k words drawn for the minibatch are scored against every token by
  one GEMM, 6 k K with its gradients; the target's own score is an elementwise product, 2 K forward and
  the two multiplies of its gradient, 2 K.
- class: 6 C K + 5 r K, r the words of the target's class. The C class scores are a GEMM, 6 C K; each
  word of the class is a sampled product (`neural.outputs.layers.WithinClassNLL`): its score 2 K, the
  gradient of z 2 K (a sparse-dense product), the gradient of its row K (one multiply an element).
- tree: 5 r K, r the nodes of the target's path. Each node's score is an elementwise product, 2 K; its
  backward pass the two multiplies 2 K and the sum of the nodes' gradients into z's, K.

r is the structure's (`factored_rows`: the mean over the tokens counted); without it, V / C for the
class layer (C = --classes, else round(sqrt V)) and log2 V for the tree, the values of equal classes
and of a balanced tree (frequency classes and Huffman trees give the frequent words fewer rows: less).
The sums of the biases' gradients and the softmax's normaliser (V or K per token, not multiply-adds of
a product) are not counted.
"""

from __future__ import annotations

import math


def output_flops(width: int, vocab_size: int, run, factored_rows: float | None = None) -> float:
    """FLOPs per target token of the output layer of `run.objective` (run: a `neural.config.RunConfig`,
    its samples k and classes C) over features of `width` K and `vocab_size` V words (the module
    docstring)."""
    objective = run.objective
    if objective == "softmax":
        return 6.0 * vocab_size * width
    if objective in ("importance", "nce"):
        return (6.0 * run.samples + 4.0) * width
    if objective == "class":
        classes = run.classes or round(math.sqrt(vocab_size))
        rows = vocab_size / classes if factored_rows is None else factored_rows
        return (6.0 * classes + 5.0 * rows) * width
    if objective == "tree":
        return 5.0 * (math.log2(vocab_size) if factored_rows is None else factored_rows) * width
    raise ValueError(f"no FLOP count for the objective {objective!r}")
