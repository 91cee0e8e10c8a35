"""Speed of parallel training (neural/parallel/teams.py): tokens/s on 1 and P processes for each scheme, the
communication's share of the time and the bytes it moves per update, and a paper-style projection for
the AP network on 8 and 64 workers.

Each scheme runs the training step of `neural.training.trainer` (the Team's hooks, the objective, the sparse SGD
step, the amortised weight decay) on the MLP1 shape (n=5, m=60, h=50, direct) at Brown's |V|, with
minibatches of --batch windows per update, all processes together (data-parallel: --batch / P per
process). One process runs the single-process path, with one worker's threads (cores / P: the reference of the
speed-ups, a worker being one CPU as in the paper) and with every core; P processes are spawned on this
machine (gloo over localhost), each with cores / P threads. Random ids from a Zipf unigram: no corpus.

Communication is measured by wrapping torch.distributed's collectives: the seconds spent inside them
(waiting for the slower partner included) and the bytes each process hands to them per update
(payload; a ring all-reduce puts 2 (P-1)/P times that on each process's link). The same bytes are
computed from the shapes: data-parallel, the dense gradients (H, d, b, and [U, W] under the full
softmax) and the loss, plus at most B/P (n-1) rows of C (and B/P + k rows of [U, W] under a sampled
objective) as (index, values); vocabulary-parallel under the full softmax, the row maxima, the sums and
target scores (3 B numbers) and dloss/dz (B K), or, sampled, the B + k rows of [U, W] and b gathered.

The projection (the paper's section 3 reasons the same way): the time of one update on P workers is
its computation, divided by P where it is split (all of it data-parallel; the output layer's share of
the FLOPs vocabulary-parallel, the hidden layer being computed by every worker), plus the collectives
of that update at P (as many as measured here), each costed as a ring all-reduce: 2 (P-1) steps of
alpha, and 2 (P-1)/P of its bytes over beta, with alpha and beta measured here between the processes;
the one-process time is scaled from MLP1 to the AP network by FLOPs. The paper's reference point: on 64 CPUs
the communication took 1/15 of the time (section 3.2).

Timings are wall-clock: run it on a quiet machine (`uptime`), e.g. `python bench/parallel_bench.py`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from neural.config import RunConfig  # noqa: E402
from neural.outputs.objectives import make_objective  # noqa: E402
from neural.parallel.teams import connect  # noqa: E402
from neural.training.team import Team  # noqa: E402
from neural.training.recipe import make_optimizer  # noqa: E402
from neural.training.trainer import TrainState  # noqa: E402

MLP1 = dict(n=5, m=60, h=50, direct=True)
AP = dict(n=6, m=100, h=60, direct=True)  # the AP network of `make reproduce-ap`
AP_VOCAB = 17964
COLLECTIVES = ("all_reduce", "all_gather", "gather", "broadcast")
FLOAT, INDEX = 4, 8  # bytes of a float32 and of an int64


def width(shape: dict) -> int:
    """K = h + (n-1)m with direct connections, else h."""
    return shape["h"] + ((shape["n"] - 1) * shape["m"] if shape["direct"] else 0)


def computed_bytes(scheme: str, objective: str, shape: dict, vocab: int, batch: int, samples: int,
                   world: int) -> float:
    """Bytes one process hands to the collectives per update (at most, where sparse rows coalesce)."""
    n, m, h, k = shape["n"], shape["m"], shape["h"], width(shape)
    flag = INDEX  # the all-reduced "checkpoint now?" flag
    if scheme == "data":
        local = math.ceil(batch / world)
        dense = h * (n - 1) * m + h + vocab + (vocab * k if objective == "softmax" else 0) + 1
        sparse = [(local * (n - 1), m)] + ([(local + samples, k)] if objective != "softmax" else [])
        return flag + FLOAT * dense + sum(INDEX + rows * (INDEX + FLOAT * cols) for rows, cols in sparse)
    if objective == "softmax":
        return flag + FLOAT * (3 * batch + batch * k)
    return flag + FLOAT * (batch + samples) * (k + 1)


def flops_per_token(shape: dict, vocab: int) -> tuple[float, float]:
    """Training FLOPs per token of the full softmax: (output layer, the rest), forward and backward."""
    return 6.0 * vocab * width(shape), 6.0 * shape["h"] * (shape["n"] - 1) * shape["m"]


class Counted:
    """Wraps torch.distributed's collectives to count their calls, seconds and the bytes handed to them."""

    def __init__(self):
        self.reset()
        for name in COLLECTIVES:
            setattr(dist, name, self.wrap(name, getattr(dist, name)))

    def reset(self) -> None:
        self.calls, self.seconds, self.bytes = 0, 0.0, 0

    def wrap(self, name, collective):
        def counted(*args, **kwargs):
            sent = args[1] if name == "all_gather" else args[0]  # all_gather(parts, tensor)
            started = time.perf_counter()
            result = collective(*args, **kwargs)
            self.seconds += time.perf_counter() - started
            self.calls += 1
            self.bytes += sent.numel() * sent.element_size()
            return result
        return counted


def train_steps(team: Team, scheme_batch: int, objective: str, vocab: int, samples: int, seconds: float,
                counted: Counted | None) -> dict:
    """Run training updates for `seconds` (after two warm-up updates): updates, seconds, and the
    collectives' seconds and bytes over them."""
    torch.manual_seed(0)
    config = RunConfig(**MLP1, objective=objective)
    net = team.network(config.model, config.shape, vocab)
    unigram = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)  # Zipf's law, as in text
    unigram = (unigram / unigram.sum()).float()
    net.set_unigram_biases(unigram.double())
    optimizer = make_optimizer(net, config)
    state = TrainState()  # the run's state that the optimizer's coupled decay counts in
    loss_fn = make_objective(objective, unigram, samples, torch.Generator().manual_seed(0))
    contexts = torch.multinomial(unigram, scheme_batch * (MLP1["n"] - 1), replacement=True)
    contexts = contexts.view(scheme_batch, MLP1["n"] - 1)
    targets = torch.multinomial(unigram, scheme_batch, replacement=True)
    ids = torch.arange(scheme_batch)

    def step() -> None:
        mine, share = team.shard_batch(ids)
        loss = loss_fn.loss(net, net.features(contexts[mine]), targets[mine])
        optimizer.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        team.sum_gradients(net, loss, share)
        optimizer.step(state, 1e-3)  # the trainer's step: the decay every `decay_every` updates, the SGD step

    step(), step()
    if counted is not None:
        counted.reset()
    updates, started = 0, time.perf_counter()
    while not team.any(time.perf_counter() - started >= seconds):  # as the loop's checkpoint clock
        updates += 1
        step()
    elapsed = time.perf_counter() - started
    result = {"updates": updates, "seconds": elapsed}
    if counted is not None:
        result.update(comm_seconds=counted.seconds, comm_bytes=counted.bytes, comm_calls=counted.calls)
    return result


def link_costs(team: Team, repeats: int = 50) -> tuple[float, float]:
    """alpha (seconds per collective step) from all-reducing one number, and beta (bytes per second)
    from all-reducing 4 MB, between the processes of `team`."""
    def timed(tensor: torch.Tensor) -> float:
        team.all_reduce(tensor)
        started = time.perf_counter()
        for _ in range(repeats):
            team.all_reduce(tensor)
        return (time.perf_counter() - started) / repeats
    steps = 2 * (team.world - 1)
    alpha = timed(torch.zeros(1)) / steps
    big = torch.zeros(1 << 20)
    beta = (2 * (team.world - 1) / team.world) * big.numel() * FLOAT / max(timed(big) - steps * alpha, 1e-9)
    return alpha, beta


def worker(rank: int, world: int, port: int, scheme: str, args, queue) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    threads = max(1, (os.cpu_count() or 1) // world)
    team = connect(scheme, args.vocab, device="cpu", threads=threads)
    counted = Counted()
    result = train_steps(team, args.batch, args.objective, args.vocab, args.samples, args.seconds, counted)
    alpha, beta = link_costs(team)
    if team.writer:
        queue.put({**result, "alpha": alpha, "beta": beta, "threads": threads})
    team.close()


def spawned(scheme: str, world: int, args) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(world, port, scheme, args, queue), nprocs=world, join=True)
    return queue.get()


def projection(scheme: str, objective: str, one_update: float, measured: dict, batch: int, samples: int,
               world: int) -> dict:
    """Speed-up and communication share of the AP network on `world` workers (see the docstring)."""
    out_ap, rest_ap = flops_per_token(AP, AP_VOCAB)
    out_1, rest_1 = flops_per_token(MLP1, 17907)
    compute = one_update * (out_ap + rest_ap) / (out_1 + rest_1)  # one worker, one update, AP network
    split = compute if scheme == "data" else compute * out_ap / (out_ap + rest_ap)
    payload = computed_bytes(scheme, objective, AP, AP_VOCAB, batch, samples, world)
    calls = measured["comm_calls"] / measured["updates"]  # collectives per update, as measured
    steps = 2 * (world - 1)  # each costed as a ring all-reduce of its share of the payload
    comm = calls * steps * measured["alpha"] + (steps / world) * payload / measured["beta"]
    parallel = compute - split + split / world + comm
    return {"workers": world, "speedup": compute / parallel, "comm_share": comm / parallel}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=17907, help="|V| (default Brown's 17,907)")
    parser.add_argument("--batch", type=int, default=RunConfig().batch,
                        help="windows per update, all processes together (default 128)")
    parser.add_argument("--objective", choices=("softmax", "importance", "nce"), default="softmax",
                        help="default softmax, the paper's (its output layer is what section 3.2 splits)")
    parser.add_argument("--samples", type=int, default=RunConfig().samples, help="k of a sampled objective")
    parser.add_argument("--processes", type=int, default=2, help="P (default 2)")
    parser.add_argument("--schemes", nargs="+", choices=("data", "vocab"), default=["data", "vocab"])
    parser.add_argument("--seconds", type=float, default=20.0, help="time per measurement")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cores = os.cpu_count() or 1
    seconds_per_update = {}
    for threads in sorted({max(1, cores // args.processes), cores}):  # one worker's cores, and all of them
        torch.set_num_threads(threads)
        single = train_steps(Team(), args.batch, args.objective, args.vocab, args.samples, args.seconds, None)
        seconds_per_update[threads] = single["seconds"] / single["updates"]
    one_update = seconds_per_update[max(1, cores // args.processes)]  # the reference of the speed-ups
    figures = {"cores": cores, "load_average_1min": load, "vocab": args.vocab, "batch": args.batch,
               "objective": args.objective, "processes": args.processes,
               "one_process_tokens_per_s": {threads: args.batch / update
                                            for threads, update in seconds_per_update.items()},
               "schemes": []}
    for scheme in args.schemes:
        measured = spawned(scheme, args.processes, args)
        update = measured["seconds"] / measured["updates"]
        row = {"scheme": scheme, "tokens_per_s": args.batch / update,
               "speedup": one_update / update, "comm_share": measured["comm_seconds"] / measured["seconds"],
               "bytes_per_update_measured": measured["comm_bytes"] / measured["updates"],
               "bytes_per_update_computed": computed_bytes(scheme, args.objective, MLP1, args.vocab,
                                                           args.batch, args.samples, args.processes),
               "alpha_s": measured["alpha"], "beta_bytes_per_s": measured["beta"],
               "threads_per_process": measured["threads"]}
        if args.objective == "softmax":
            row["ap_projection"] = [projection(scheme, args.objective, one_update, measured, args.batch,
                                               args.samples, world) for world in (8, 64)]
        figures["schemes"].append(row)
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    single = ", ".join(f"{speed:.0f} tokens/s on {threads} thread{'s' if threads > 1 else ''}"
                       for threads, speed in figures["one_process_tokens_per_s"].items())
    print(f"{cores} cores, load average {load:.2f}; MLP1 at |V| = {args.vocab}, {args.objective}, "
          f"{args.batch} windows per update; 1 process: {single} (speed-ups against the first)")
    print(f"{'scheme':6} {'P':>2} {'tokens/s':>9} {'speed-up':>8} {'comm %':>7} {'bytes/upd measured':>19} "
          f"{'computed (<=)':>14}  AP projection (speed-up, comm %)")
    for r in figures["schemes"]:
        ap = "  ".join(f"{p['workers']}: {p['speedup']:.1f}x, {100 * p['comm_share']:.0f}%"
                       for p in r.get("ap_projection", []))
        print(f"{r['scheme']:6} {args.processes:2d} {r['tokens_per_s']:9.0f} {r['speedup']:8.2f} "
              f"{100 * r['comm_share']:6.1f}% {r['bytes_per_update_measured']:19.0f} "
              f"{r['bytes_per_update_computed']:14.0f}  {ap}")
    print(f"links: alpha {figures['schemes'][0]['alpha_s'] * 1e6:.0f} us a step, beta "
          f"{figures['schemes'][0]['beta_bytes_per_s'] / 1e9:.2f} GB/s (gloo, localhost); paper: "
          "communication 1/15 of the time on 64 CPUs")


if __name__ == "__main__":
    main()
