"""The measured count of a training update's FLOPs: torch's count of what one update's forward and
backward passes run, against which each family's analytic count (`neural.families.NetworkShape.training_flops`)
is checked (tests/test_flops.py, bench/flops_check.py).

torch's FlopCounterMode counts the dense matrix products (mm, addmm, bmm, attention) by their shapes,
2 FLOPs per multiply-add. Some products of the networks are not dense GEMMs and it would miss them or
miscount them; `COUNTED` adds their formulas:
- a sparse CSR operand in mm / addmm (the class layer's gradient G rows): 2 per stored entry per column
  (torch's formula, by shapes alone, would count the zeros);
- aten.sparse_sampled_addmm (the class layer's word scores): 2 per entry of the mask per inner element;
- the products computed elementwise (a tree's path scores, the energy network's v . tanh(a + c), the
  targets' own scores of the sampled objectives): each multiply (mul, mul_), each element summed away
  (sum) and each element added in by index_add, one FLOP each;
- the CPU's fused attention (aten._scaled_dot_product_flash_attention_for_cpu, without dropout), by
  torch's formulas for the CUDA kernels': 4 T d per position forward over windows of T, and 10 T d
  backward, which recomputes the scores (the unfused path, with dropout, runs bmm: 8 T d backward);
- the fused recurrent layers (the CPU's aten.mkldnn_rnn_layer, which nn.LSTM runs there): their gate
  products, 2 G h (in + h) per position for G gates of h units over inputs of `in`, twice that backward.
The formulas are the CPU's kernels' (the tests and bench/flops_check.py measure on the CPU); on CUDA,
cuDNN's fused recurrent layers (aten._cudnn_rnn) would go uncounted. What it counts is what runs: the backward pass of the products computed elementwise is autograd's
(its multiplies and the sums that reduce broadcast gradients), not the 2x rule of a GEMM.
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

aten = torch.ops.aten


def dense_product(a: torch.Tensor, b: torch.Tensor) -> int:
    """2 FLOPs per multiply-add of a @ b (m, k) (k, n); of the stored entries only for a sparse CSR operand."""
    if a.layout == torch.sparse_csr:
        return 2 * a._nnz() * b.shape[1]
    if b.layout == torch.sparse_csr:
        return 2 * b._nnz() * a.shape[0]
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def mm(a, b, *args, out_val=None, **kwargs) -> int:
    return dense_product(a, b)


def addmm(bias, a, b, *args, out_val=None, **kwargs) -> int:
    return dense_product(a, b)


def sampled_addmm(mask, a, b, *args, out_val=None, **kwargs) -> int:
    return 2 * mask._nnz() * a.shape[1]


def elementwise_multiply(*args, out_val=None, **kwargs) -> int:
    return out_val.numel()


def summed(x, *args, out_val=None, **kwargs) -> int:
    return x.numel()


def added_in(x, dim, index, source, *args, out_val=None, **kwargs) -> int:
    return source.numel()


def recurrent_layer(x, w_ih, w_hh, *args, out_val=None, **kwargs) -> int:
    """mkldnn_rnn_layer(input (T, B, in), w_ih (G h, in), w_hh (G h, h), ...): every position's gates."""
    return 2 * x.shape[0] * x.shape[1] * w_ih.shape[0] * (w_ih.shape[1] + w_hh.shape[1])


def recurrent_layer_backward(x, w_ih, w_hh, *args, out_val=None, **kwargs) -> int:
    """Its backward pass: the gradients of the inputs (and state) and of the weights, twice the forward's."""
    return 2 * recurrent_layer(x, w_ih, w_hh)


def cpu_attention(query, key, value, *args, out_val=None, **kwargs) -> int:
    """The CPU's fused attention, as torch counts the CUDA kernels': the whole square of scores."""
    return sdpa_flop_count(query.shape, key.shape, value.shape)


def cpu_attention_backward(grad_out, query, key, value, *args, out_val=None, **kwargs) -> int:
    """Its backward pass, as torch counts the CUDA kernels' (the scores recomputed, then four products)."""
    return sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape)


COUNTED = {aten.mm: mm, aten.addmm: addmm, aten.sparse_sampled_addmm: sampled_addmm,
           aten.mul: elementwise_multiply, aten.mul_: elementwise_multiply, aten.sum: summed,
           aten.index_add: added_in, aten.index_add_: added_in,
           aten.mkldnn_rnn_layer: recurrent_layer, aten.mkldnn_rnn_layer_backward: recurrent_layer_backward,
           aten._scaled_dot_product_flash_attention_for_cpu: cpu_attention,
           aten._scaled_dot_product_flash_attention_for_cpu_backward: cpu_attention_backward}
for formula in COUNTED.values():
    formula._get_raw = True  # FlopCounterMode hands these the tensors themselves (layouts, nnz)


def counter() -> FlopCounterMode:
    """torch's FLOP counter with the formulas of `COUNTED`."""
    return FlopCounterMode(display=False, custom_mapping=COUNTED)


def measured_training_flops(trainer) -> tuple[float, dict[str, int]]:
    """FLOPs per target token of the next update's forward and backward passes (its loss and gradients,
    not the optimizer's step) of a `neural.training.trainer.Trainer` whose epoch has begun, and the
    count of each operator."""
    counting = counter()
    with counting:
        _, tokens, _ = trainer.forward_backward()
    by_op = {str(op): count for op, count in counting.get_flop_counts()["Global"].items()}
    return counting.get_total_flops() / tokens, by_op


def factored_rows(trainer) -> float | None:
    """The mean rows that the next minibatch's targets read in a class output layer (the words of their
    classes) or a tree layer (the nodes of their paths), the `factored_rows` of `training_flops`; None
    for the softmax layer."""
    output, batches = getattr(trainer.net, "output", None), trainer.batches
    if not hasattr(output, "structure"):
        return None
    position = trainer.state.position
    targets = batches.targets[batches.order[position * batches.batch: (position + 1) * batches.batch]]
    rows = output.class_size[output.word_class[targets]] if output.name == "class" else output.depth[targets]
    return float(rows.double().mean())
