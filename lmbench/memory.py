"""Sizes refused before they are allocated: a network (its window, vocabulary, layers) or a sample
that could never fit the device's memory ends in one line naming what needs how much and the options
that shrink it, instead of an allocator's traceback (or the machine swapping) later on.

`check_training_fits(build, ...)`: `build()` is run on torch's meta device, which allocates nothing,
to count the network's parameters; training holds TRAINING_COPIES of them (the parameters, their
gradients and an optimizer's two moments), plus the sampled objective's draws. A network whose
construction reads its tensors' values (the class and tree output layers, built from the word
structure) cannot be built on the meta device: it is not checked.

The machine's memory is read here alone: `machine_memory` (all of it, what a network could ever have)
and `available_memory` (what it can still give now: how many rows `reproduce --jobs K` may run at once,
reports.running.cluster).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Callable

from lmbench.errors import LMBenchError

TRAINING_COPIES = 4  # parameters, gradients, Adam's two moments (SGD holds fewer)
SAMPLE_BYTES = 8 + 4  # a drawn word id (int64) and its score (float32), per sample


def machine_memory() -> int:
    """The bytes of this machine's physical memory."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def available_memory() -> int:
    """The bytes this machine can still give (Linux: MemAvailable; elsewhere its physical memory)."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return machine_memory()


def device_memory(device) -> tuple[int, str]:
    """The bytes a process may allocate on `device` (a torch.device), and what they are."""
    if getattr(device, "type", "cpu") == "cuda":
        import torch
        return torch.cuda.get_device_properties(device).total_memory, "the GPU's memory"
    total = machine_memory()
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY and limit < total:
        return limit, "this process's address-space limit (ulimit -v)"
    return total, "this machine's memory"


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check_training_fits(build: Callable, device, samples: int = 0, *, what: str, fix: str) -> None:
    """Refuse, in one line, training the network `build()` makes when its parameters (TRAINING_COPIES
    times) and `samples` drawn words need more than `device`'s memory."""
    import torch
    try:
        with torch.device("meta"):
            net = build()
    except (RuntimeError, TypeError, NotImplementedError):  # it reads values: a meta tensor has none
        return
    parameters = sum(p.numel() * p.element_size() for p in net.parameters())
    needed = TRAINING_COPIES * parameters + SAMPLE_BYTES * samples
    available, which = device_memory(device)
    if needed > available:
        raise LMBenchError(f"{what} needs at least {_gib(needed)} to train ({_gib(parameters)} of parameters, "
                           f"times {TRAINING_COPIES} with gradients and optimizer state"
                           + (f", {samples:,} samples" if samples else "")
                           + f"), more than {which} ({_gib(available)}): {fix}")
