"""`lmbench train|eval ... --parallel data|vocab --nproc-per-node P [--nnodes N --rdzv-endpoint H:P]`:
torchrun started for the user, with the command line it needs.

torchrun reads every option up to the module's name as its own, and an option after it too unless a
`--` comes first: `--n 4` is then taken for an abbreviation of its --nnodes or --nproc-per-node
("ambiguous option", pytorch/pytorch#120601). Here the launch options are taken out of the user's words
and put before `-m lmbench_cli --`, so the rest reaches lmbench untouched. One machine gets torchrun's
--standalone rendezvous (a free port of its own); several get the c10d rendezvous at --rdzv-endpoint,
with an id made from the command, the same on every machine that runs it. Launching torchrun by hand
(`torchrun --nproc-per-node P -m lmbench_cli -- nplm ...`) works as before.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from lmbench.errors import LMBenchError

LAUNCH_OPTIONS = ("--nproc-per-node", "--nnodes", "--rdzv-endpoint")


def without_launch_options(argv: list[str]) -> list[str]:
    """The words with the launch options (`--opt VALUE` or `--opt=VALUE`) taken out."""
    words, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in LAUNCH_OPTIONS:
            skip = True
        elif word.partition("=")[0] not in LAUNCH_OPTIONS:
            words.append(word)
    return words


def torchrun_command(argv: list[str], nproc_per_node: int, nnodes: int = 1, endpoint: str | None = None) -> list[str]:
    """The torchrun command line that runs `lmbench ARGV` (launch options taken out) on P processes per
    machine: torchrun's options, then `-m lmbench_cli --`, then lmbench's words."""
    words = without_launch_options(argv)
    if endpoint is None:
        if nnodes > 1:
            raise LMBenchError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT, the address of one of the "
                               "machines, given alike on every machine")
        rendezvous = ["--standalone"]
    else:
        run_id = "lmbench-" + hashlib.sha256(" ".join(words).encode()).hexdigest()[:12]
        rendezvous = ["--nnodes", str(nnodes), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                      "--rdzv-id", run_id]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc_per_node), *rendezvous,
            "-m", "lmbench_cli", "--", *words]


def launch(args) -> None:
    """Run the command of `args` under torchrun (rank 0 prints the figures); a failed run ends in one
    line with torchrun's exit code (the processes' own messages are above it)."""
    if os.environ.get("RANK") is not None:  # already under torchrun: a launch option spelt another way
        raise LMBenchError(f"{', '.join(LAUNCH_OPTIONS)} start torchrun: spell them in full, or leave them out "
                           "when launching torchrun yourself")
    if not args.parallel:
        raise LMBenchError(f"--nproc-per-node {args.nproc_per_node} starts that many processes for a parallel "
                           "run: add --parallel data or --parallel vocab")
    command = torchrun_command(args.argv, args.nproc_per_node, args.nnodes, args.rdzv_endpoint)
    code = subprocess.run(command).returncode
    if code != 0:
        raise LMBenchError(f"torchrun exited with code {code} (the processes' messages are above): "
                           f"{' '.join(command[1:])}")
