"""Training on several processes with torch.distributed: the two schemes of section 3 of the paper.

Launch: `torchrun --nproc-per-node P -m lmbench_cli -- train ... --parallel data|vocab` (the `--`
keeps torchrun from taking --n, --m and --h for abbreviations of its own options). torchrun starts P
processes and gives each its RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous address; `connect` joins
them into one process group (gloo on the CPU, NCCL on CUDA, one GPU per process: cuda:LOCAL_RANK) and
returns the team through which `neural.training.trainer` does everything that crosses processes: one subclass of
the one-process `neural.training.team.Team` per scheme, with the same hooks: "data" a `DataTeam`, "vocab" a
`VocabTeam`. A run without --parallel never imports this module (`neural.training.team.join`).

- "data" (section 3.1, made synchronous): every process holds the whole network and takes its part of
  each minibatch of the epoch's permutation; the minibatch of one update is the per-process batch times
  the processes. After the backward pass the gradients are summed over the processes, each weighted by
  its share of the minibatch, so an update is the single-process update on the whole minibatch. The
  paper's lock-free asynchronous updates on shared memory are replaced by this synchronous all-reduce.
  torch's DistributedDataParallel is not used: it reduces through the module's forward, which the
  objectives bypass (they read the output rows themselves), and it all-reduces sparse gradients on gloo
  only (NCCL has no sparse all-reduce). Here the dense gradients (H, d, b, and [U, W] under the full
  softmax) go in one flat all-reduce with the loss, and each sparse gradient (the rows of C in the
  contexts, the sampled rows of [U, W]) as the (row, values) pairs of every process, all-gathered and
  summed: what gloo's sparse all-reduce does, on either backend.
- "vocab" (section 3.2, parameter-parallel): process i owns the contiguous block of output rows
  [start_i, stop_i) of [U, W] and b (blocks as even as possible, start_i = floor(i |V| / P)); C, H and d
  are whole on every process, every process takes the whole minibatch and computes x and
  tanh(d + H x) itself. Under the full softmax each process scores its block, y_r = b_r + [U, W]_r z,
  the row maxima are all-reduced (max) and the sums of exp(y - max) (sum), so each process holds its
  block of the exact softmax; the gradient with respect to z = [tanh(d + Hx), x], a sum over the
  blocks, is all-reduced before the backward pass through H and C, which then runs identically
  everywhere. The sampled objectives (importance, nce) compose exactly another way: the B + k rows they
  use are gathered from their owners (one all-reduce), every process computes the same loss, and each
  keeps the gradient of its own rows (memory is split, their small compute is not). The class-factored
  objective does not compose (its classes cut across the blocks): `RunConfig` refuses it.

Both schemes run every process on the same seeds: the network starts the same everywhere, and the
sampled objectives draw the same k words on every process, so a data-parallel update is the
single-process update on the whole minibatch with that sample. Rank 0 writes the checkpoints, the
vocabulary-parallel blocks gathered into the ordinary single-process format (a model trained on P
processes evaluates, resumes and mixes on 1); a resumed run reads them on rank 0 and broadcasts them.
Evaluation runs on the same processes: data-parallel, each scores its share of the tokens;
vocabulary-parallel, each scores its block of every token's distribution.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from lmbench.errors import LMBenchError
from neural.families import load
from neural.scoring import score_stream
from neural.networks.nplm import NPLM, upgraded
from neural.outputs.layers import SoftmaxLayer, SoftmaxNLL, at_least_fp32
from neural.training.recipe import resolve_device
from neural.training.team import T, Team

LAUNCH_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")  # set by torchrun
SLICED = ("output.out", "output.b")  # the parameters a vocabulary-parallel process holds a block of


def blocks(total: int, parts: int) -> list[int]:
    """The edges (parts + 1) of `parts` contiguous blocks of range(total), as even as possible."""
    return [total * i // parts for i in range(parts + 1)]


def launch_environment(mode: str) -> dict[str, int]:
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from torchrun's environment; refuses a
    --parallel run started without it."""
    missing = [key for key in LAUNCH_ENV if key not in os.environ]
    if missing:
        raise LMBenchError(f"--parallel {mode} runs under torchrun, which sets {', '.join(missing)}: launch "
                           f"with torchrun --nproc-per-node P -m lmbench_cli -- nplm ... --parallel {mode}, "
                           "or drop --parallel for one process")
    env = {}
    for key in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK", "LOCAL_RANK"):
        value = os.environ.get(key, os.environ["WORLD_SIZE"]) if key == "LOCAL_WORLD_SIZE" else os.environ[key]
        least = 1 if key.endswith("SIZE") else 0  # a rank below the size of its group, a group within the world
        most = {"WORLD_SIZE": 1 << 20, "LOCAL_WORLD_SIZE": env.get("WORLD_SIZE"), "RANK": env.get("WORLD_SIZE", 0) - 1,
                "LOCAL_RANK": env.get("LOCAL_WORLD_SIZE", 0) - 1}[key]
        if not (value.strip().isdigit() and least <= int(value) <= most):
            raise LMBenchError(f"{key}={value[:40]!r}: torchrun's {key} is a whole number from {least} to {most} "
                               f"here: launch with torchrun --nproc-per-node P -m lmbench_cli -- ... --parallel {mode}, "
                               "which sets it, or unset it")
        env[key] = int(value)
    return env


def connect(mode: str, vocab_size: int, *, device: str = "auto", backend: str = "auto",
            threads: int | None = None) -> Team:
    """This process's place in the process group torchrun started for --parallel `mode` (joined here, or
    the one already joined), as a `DataTeam` or a `VocabTeam` (`neural.training.team.join` comes here only for a
    scheme). Every set-up error is raised before the rendezvous, on every process alike."""
    env = launch_environment(mode)
    world = env["WORLD_SIZE"]
    if mode == "vocab" and world > vocab_size:
        raise LMBenchError(f"--parallel vocab on {world} processes needs at least one output row each, "
                           f"but the vocabulary has {vocab_size} words: use at most {vocab_size} processes")
    if backend == "nccl" and not torch.cuda.is_available():
        raise LMBenchError("--backend nccl needs CUDA, which this machine does not have: use --backend gloo "
                           "(or auto) with --device cpu")
    place = resolve_device(device, threads or max(1, (os.cpu_count() or 1) // env["LOCAL_WORLD_SIZE"]))
    if place.type == "cuda":
        place = torch.device("cuda", env["LOCAL_RANK"] if place.index is None else place.index)
        torch.cuda.set_device(place)
    if backend == "nccl" and place.type != "cuda":
        raise LMBenchError("--backend nccl moves CUDA tensors only: use --device cuda (or auto), or "
                           "--backend gloo on the CPU")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if backend == "auto" and place.type == "cuda" else
                                "gloo" if backend == "auto" else backend,
                                rank=env["RANK"], world_size=world)
    if mode == "data":
        return DataTeam(dist.get_rank(), dist.get_world_size(), place)
    return VocabTeam(dist.get_rank(), dist.get_world_size(), place, vocab_size)


def leave_process_group() -> None:
    """Destroy the process group, then let gloo's worker threads drop the last tensors they hold.
    A worker thread releases a finished collective's tensors after the caller's wait() returned, and
    releasing a tensor that Python has seen takes the GIL: if the interpreter is already finalizing by
    then, the thread is killed inside a destructor and the process aborts ("terminate called without an
    active exception", SIGABRT), after its work is done. Sleeping hands the GIL to those threads first."""
    if dist.is_initialized():
        dist.destroy_process_group()
        time.sleep(0.1)


class ProcessGroup(Team):
    """Several processes joined by torch.distributed: the collectives the schemes are made of, and
    what every scheme does alike (rank 0 reads and decides for all, the network refuses a scheme its
    family does not support)."""

    def __init__(self, rank: int, world: int, device: torch.device):
        super().__init__(device)
        self.rank, self.world = rank, world

    def close(self) -> None:
        """Leave the process group (the end of a command)."""
        leave_process_group()

    # -- collectives ---------------------------------------------------------------------------------

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """`tensor` summed (or its maximum) over the processes, in place."""
        dist.all_reduce(tensor, dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
        return tensor

    def counts(self, count: int) -> list[int]:
        """Every process's `count`, in rank order."""
        mine = torch.tensor([count], device=self.device)
        every = [torch.empty_like(mine) for _ in range(self.world)]
        dist.all_gather(every, mine)
        return [int(c) for c in every]

    def gather_rows(self, tensor: torch.Tensor, sizes: list[int], *,
                    everyone: bool = True) -> torch.Tensor | None:
        """Every process's `tensor` (sizes[r] rows x ... on process r) stacked in rank order, on every
        process (or on rank 0 only, None elsewhere, when not `everyone`)."""
        padded = tensor.new_zeros((max(sizes), *tensor.shape[1:]))  # collectives move equal shapes
        padded[: len(tensor)] = tensor
        if everyone:
            parts = [torch.empty_like(padded) for _ in range(self.world)]
            dist.all_gather(parts, padded)
        else:
            parts = [torch.empty_like(padded) for _ in range(self.world)] if self.writer else None
            dist.gather(padded, parts, dst=0)
            if not self.writer:
                return None
        return torch.cat([part[:size] for part, size in zip(parts, sizes)])

    def any(self, flag: bool) -> bool:
        return bool(self.all_reduce(torch.tensor([int(flag)], device=self.device), "max"))

    def from_rank0(self, fn: Callable[[], T]) -> T:
        """fn() run on rank 0 and its result sent to every process; an LMBenchError it raises is
        raised on every process (so none waits for a partner that has stopped)."""
        payload = [None]
        if self.writer:
            try:
                payload = [(fn(), None)]
            except LMBenchError as err:
                payload = [(None, str(err))]
        dist.broadcast_object_list(payload, src=0)
        result, error = payload[0]
        if error is not None:
            raise LMBenchError(error)
        return result

    # -- the network ----------------------------------------------------------------------------------

    def network(self, model: str, shape, vocab_size: int, **options):
        """The network (`Team.network`), refused in one line when its family is not parallel this way."""
        if self.mode not in shape.parallel:
            raise LMBenchError(shape.refuse_parallel(model, self.mode))
        return super().network(model, shape, vocab_size, **options)

    def replicated(self, name: str) -> bool:
        """Whether every process holds parameter `name` whole."""
        return True

    @torch.no_grad()
    def sync_replicas(self, net: NPLM) -> None:
        """Copy rank 0's values of the parameters every process holds whole to the others: updates
        applied alike keep them equal, but a GPU's scatter-add may round differently per process."""
        for name, parameter in net.named_parameters():
            if self.replicated(name):
                dist.broadcast(parameter, src=0)


class DataTeam(ProcessGroup):
    """Section 3.1, made synchronous: the whole network on every process, each taking its part of
    every minibatch; the weighted gradients summed, evaluation split by tokens."""

    mode = "data"

    def batch(self, per_process: int) -> int:
        """Data-parallel processes each take their own windows: the per-process batch times them."""
        return per_process * self.world

    def shard_batch(self, ids: torch.Tensor) -> tuple[torch.Tensor, float]:
        """This process's windows of a minibatch ids (B,) and their share of it (n_r / B). At an
        epoch's end a minibatch may have fewer windows than there are processes: one left without any
        takes a stand-in window of weight 0."""
        edges = blocks(len(ids), self.world)
        lo, hi = edges[self.rank], edges[self.rank + 1]
        return (ids[lo:hi], (hi - lo) / len(ids)) if hi > lo else (ids[:1], 0.0)

    def sum_gradients(self, net: NPLM, loss: torch.Tensor, weight: float) -> torch.Tensor:
        """After loss.backward(): every gradient and the loss become their sums over the processes,
        each weighted by its share of the minibatch (so: those of the mean loss over the whole
        minibatch). Returns the minibatch's loss, the same on every process (a 0-d tensor)."""
        grads = [p.grad for p in net.parameters() if p.grad is not None]
        dense = [g for g in grads if not g.is_sparse]
        flat = torch.cat([g.reshape(-1) for g in dense] + [loss.detach().reshape(1).to(dense[0].dtype)])
        self.all_reduce(flat.mul_(weight))  # one all-reduce: H, d, b, [U, W] when dense, and the loss
        offset = 0
        for g in dense:
            g.copy_(flat[offset: offset + g.numel()].view_as(g))
            offset += g.numel()
        for p in net.parameters():
            if p.grad is not None and p.grad.is_sparse:  # C; [U, W] under a sampled objective
                grad = p.grad.coalesce()  # (R_r rows, their values) on process r
                sizes = self.counts(grad.indices().shape[1])
                rows = self.gather_rows(grad.indices()[0], sizes)  # (sum R_r,) in rank order
                values = self.gather_rows(grad.values() * weight, sizes)  # (sum R_r, ...)
                p.grad = torch.sparse_coo_tensor(rows[None], values, grad.shape,  # SGD adds duplicates up
                                                 check_invariants=False)  # rows in range: they came from p
        return flat[-1]

    def score_stream(self, net: NPLM, stream: np.ndarray, start: int, **options) -> np.ndarray:
        """Each process scores its share of the tokens and they are gathered."""
        edges = blocks(len(stream) - start, self.world)
        lo, hi = start + edges[self.rank], start + edges[self.rank + 1]
        mine = torch.from_numpy(score_stream(net, stream[:hi], lo, **options)).to(self.device)
        return self.gather_rows(mine, np.diff(edges).tolist()).cpu().numpy()


class VocabTeam(ProcessGroup):
    """Section 3.2, parameter-parallel: process i holds the block of output rows rows[i] ..
    rows[i + 1] - 1 (`VocabSlice`), every process takes the whole minibatch, and every method of the
    output layer crosses the processes (`SoftmaxBlock`); the hooks of the loop are those of one process."""

    mode = "vocab"

    def __init__(self, rank: int, world: int, device: torch.device, vocab_size: int):
        super().__init__(rank, world, device)
        self.rows = blocks(vocab_size, world)  # process i owns output rows rows[i] .. rows[i+1] - 1
        self.row_sizes = np.diff(self.rows).tolist()

    def build(self, entry, shape, vocab_size: int, *, output: str, structure: torch.Tensor | None,
              dropout: float):
        """This process's block of the network (the family's `vocab_slice`, the NPLM's `VocabSlice`),
        of the full softmax only."""
        if output != "softmax":
            raise LMBenchError(f"a network with the {output} output layer is not vocabulary-parallel: "
                               "evaluate it with --parallel data or on one process")
        return load(entry.vocab_slice)(shape, vocab_size, dropout=dropout, team=self)

    def state_dict(self, net: NPLM) -> dict | None:
        """The whole network's state on rank 0 (the blocks of [U, W] and b gathered), None elsewhere."""
        state = net.state_dict()
        for name in SLICED:
            state[name] = self.gather_rows(state[name], self.row_sizes, everyone=False)
        return state if self.writer else None

    def replicated(self, name: str) -> bool:
        return name not in SLICED


class VocabSlice(NPLM):
    """One process's NPLM in a vocabulary-parallel run: C, H and d whole, and as its output layer the
    block of rows [start, stop) of [U, W] and b (`SoftmaxBlock`). Built as the whole network (so it
    starts as a single process would), then cut; `load_state_dict` takes the whole network's state."""

    def __init__(self, shape, vocab_size: int, *, dropout: float = 0.0, team: Team):
        super().__init__(shape, vocab_size, dropout=dropout)
        self.output = SoftmaxBlock(self.output, team)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load the whole network's state (a single-process checkpoint), keeping this block."""
        state = dict(upgraded(state_dict))
        for name in SLICED:
            state[name] = state[name][self.output.start: self.output.stop]
        return super().load_state_dict(state, strict, assign)


class SoftmaxBlock(SoftmaxLayer):
    """The rows [start, stop) of a softmax layer's [U, W] (`out`, (V_r, K)) and b (V_r,). Every method
    that reads the output layer crosses the processes (all of them must call it together)."""

    def __init__(self, whole: SoftmaxLayer, team: Team):
        super().__init__(whole.vocab_size, whole.width)
        self.team = team
        self.start, self.stop = team.rows[team.rank], team.rows[team.rank + 1]
        self.out = nn.Parameter(whole.out.detach()[self.start: self.stop].clone())  # (V_r, K)
        self.b = nn.Parameter(whole.b.detach()[self.start: self.stop].clone())  # (V_r,)

    @torch.no_grad()
    def set_unigram_biases(self, unigram: torch.Tensor) -> None:
        self.b.copy_(unigram[self.start: self.stop].log())

    def local_ids(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Word ids (R,) as rows of this block (clamped into it) and whether this block owns them."""
        local = words - self.start
        owned = (local >= 0) & (local < self.stop - self.start)
        return local.clamp(0, self.stop - self.start - 1), owned

    def scores(self, z: torch.Tensor) -> torch.Tensor:
        """The whole scores y (B, V), the blocks gathered from every process."""
        scores = super().scores(z)  # (B, V_r)
        return self.team.gather_rows(scores.t().contiguous(), self.team.row_sizes).t()

    def loss(self, z: torch.Tensor, target: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        dtype = torch.bfloat16 if bf16 else self.out.dtype
        return VocabParallelNLL.apply(z, self.out, self.b, target, dtype, self)

    def rows(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of [U, W] (R, K) and b (R,) for any word ids (R,): each process puts in the rows it
        owns (zeros elsewhere) and one all-reduce sums them. Every process then computes the same loss,
        so the gradient of the sum reaching each process is already the whole one: the all-reduce's
        backward is the identity, and each block keeps the gradient of its own rows."""
        local, owned = self.local_ids(words)
        mask = owned.to(self.out.dtype)[:, None]  # (R, 1)
        mine = torch.cat([F.embedding(local, self.out, sparse=True), self.b[local][:, None]], dim=1) * mask
        rows = SumOverProcesses.apply(mine, self.team)  # (R, K + 1)
        return rows[:, :-1], rows[:, -1]

    def parts(self, z: torch.Tensor, target: torch.Tensor | None = None, bf16: bool = False):
        """`SoftmaxLayer.parts` of the whole softmax from the blocks: each block's maximum and sum of
        exp(y - its maximum) merge into the whole ones, sum_r total_r exp(max_r - max); the target's
        score comes from the block that owns it (the whole y (B, V) gathered when target is None)."""
        local, owned = (None, None) if target is None else self.local_ids(target)
        picked, peak, total = super().parts(z, local, bf16)
        top = self.team.all_reduce(peak.clone(), "max")  # (B,)
        total = total * torch.exp(peak - top)
        if target is None:
            whole = self.team.gather_rows(picked.t().contiguous(), self.team.row_sizes).t()
            return whole, top, self.team.all_reduce(total)
        sums = self.team.all_reduce(torch.stack([total, torch.where(owned, picked, 0.0)]))  # (2, B)
        return sums[1], top, sums[0]


class SumOverProcesses(torch.autograd.Function):
    """Forward: the sum over the processes (all-reduce). Backward: the identity, for a loss that every
    process computes alike from the sum."""

    @staticmethod
    def forward(ctx, tensor, team):
        return team.all_reduce(tensor.clone())

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class VocabParallelNLL(torch.autograd.Function):
    """`SoftmaxNLL` over blocks of the vocabulary (section 3.2 of the paper): loss = mean_i [max_i +
    log total_i - y_i,target_i] with the row maxima all-reduced (max), then each block's e = exp(y_r -
    max) and the totals sum_j e_j and the target scores all-reduced (sum). The block's buffer becomes
    g_r = e_r - total * onehot, whose backward gives this block's dloss/d[U, W]_r and dloss/db_r, and
    this block's part of dloss/dz, all-reduced (sum) so every process continues with the whole one."""

    @staticmethod
    def forward(ctx, z, out, b, target, dtype, net):
        zc, oc = z.to(dtype), out.to(dtype)
        scores = at_least_fp32(torch.addmm(b.to(dtype), zc, oc.t()))  # (B, V_r) y_r
        local, owned = net.local_ids(target)
        rows = torch.arange(len(target), device=scores.device)
        picked = torch.where(owned, scores[rows, local], 0.0)  # (B,) y[target] on its owner, else 0
        peak = net.team.all_reduce(scores.amax(dim=1), "max")  # (B,)
        total = scores.sub_(peak[:, None]).exp_().sum(dim=1)  # (B,); scores now holds e_r
        total, picked = net.team.all_reduce(torch.stack([total, picked]))  # (B,), (B,) whole
        scores[rows[owned], local[owned]] -= total[owned]  # g_r = e_r - total * onehot
        ctx.save_for_backward(zc, oc, scores, total)
        ctx.dtypes, ctx.team = (z.dtype, out.dtype, b.dtype), net.team
        return (peak + total.log() - picked).mean()

    @staticmethod
    def backward(ctx, grad_loss):
        grad_z, grad_out, grad_b, _, _ = SoftmaxNLL.backward(ctx, grad_loss)
        return ctx.team.all_reduce(grad_z), grad_out, grad_b, None, None, None
