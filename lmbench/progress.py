"""Progress of a long stage (training epochs, exact scoring, a whole reproduction, counting n-grams on
disk, the exchange clustering, AP's files): a tqdm bar when stderr is a terminal, else plain log lines,
one every tenth of the way (no escape codes, no carriage returns: what a log file or a CI job keeps).
Every bar of the suite goes through `progress_bar` (tests/test_hostile_round3_outputs.py checks that no
other module draws one)."""

from __future__ import annotations

import logging
import sys
import time
from typing import Iterable

log = logging.getLogger("lmbench.progress")

PLAIN_STEP = 0.1  # the plain lines' spacing, as a fraction of the total


def progress_bar(iterable: Iterable | None = None, *, total: float | None = None, desc: str, unit: str,
                 initial: float = 0, bar_format: str | None = None, unit_scale: bool = False, disable: bool = False):
    """A tqdm bar over `iterable` (or updated by hand up to `total`) on a terminal, else a `PlainProgress`;
    `disable`: no progress shown (the iteration and the calls as ever)."""
    if disable:
        return PlainProgress(iterable, total=0, desc=desc, unit=unit)  # (a total of 0 writes no line)
    if sys.stderr.isatty():
        from tqdm import tqdm
        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, leave=False, mininterval=1.0,
                    bar_format=bar_format, unit_scale=unit_scale)
    return PlainProgress(iterable, total=total, desc=desc, unit=unit, initial=initial)


class PlainProgress:
    """tqdm's update / set_postfix / close / iteration, written as a log line at every PLAIN_STEP of
    the total: `desc: 40% (400/1000 upd), 12.3 upd/s, about 49 s left, loss=4.1`."""

    def __init__(self, iterable: Iterable | None = None, *, total: float | None = None, desc: str, unit: str,
                 initial: float = 0):
        self.iterable, self.desc, self.unit = iterable, desc, unit
        self.total = len(iterable) if total is None and hasattr(iterable, "__len__") else total
        self.n = self.start = initial
        self.started = time.monotonic()
        self.postfix: dict = {}
        self.marked = self.mark(initial)

    def mark(self, n: float) -> int:
        """How many PLAIN_STEPs of the total `n` has passed."""
        return int(n / self.total / PLAIN_STEP + 1e-9) if self.total else 0

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)

    def update(self, n: float = 1) -> None:
        self.n += n
        if self.total and self.mark(self.n) > self.marked:
            self.marked = self.mark(self.n)
            self.line()

    def line(self) -> None:
        seconds = time.monotonic() - self.started
        rate = (self.n - self.start) / seconds if seconds > 0 else 0.0
        left = f", about {(self.total - self.n) / rate:.0f} s left" if rate > 0 and self.total > self.n else ""
        extra = "".join(f", {key}={value}" for key, value in self.postfix.items())
        digits = 0 if self.total >= 10 else 2  # (a total of estimated seconds may be small)
        log.info("%s: %.0f%% (%.*f/%.*f %s), %.1f %s/s%s%s", self.desc, 100 * self.n / self.total, digits, self.n,
                 digits, self.total, self.unit, rate, self.unit, left, extra)

    def set_postfix(self, refresh: bool = True, **values) -> None:
        self.postfix = values

    def refresh(self) -> None:
        """(The total changed: the next line says so.)"""

    def close(self) -> None:
        """(Nothing to erase.)"""

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
