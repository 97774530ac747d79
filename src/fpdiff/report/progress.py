"""The progress every long analysis shows: what it is doing, a bar, done of total, elapsed time and the time left,
and under it the segments done inside the current cell when its worker tells them (runtime.progress).

It is for a person at a terminal and goes to stderr only: nothing of it when asked to be quiet, when stderr is not a
terminal (a log, CI), or when the JSON report goes to stdout, so stdout holds only what the analysis says."""
from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from fpdiff.runtime import progress as segments

Callback = Callable[[str, int, "int | None"], None]
# a cell's name (backend, device, precision, variant) or an op's case id fits; longer names would push the bar off
WIDTH = 60
# how often the segment file is looked at: as often as rich redraws (10 times a second), no more
POLL = 0.1


def _nothing(what: str, done: int, total: int | None) -> None:
    """The callback of a display that shows nothing."""


@contextlib.contextmanager
def display(what: str, unit: str = "cells", *, enabled: bool = True,
            console: Console | None = None) -> Iterator[Callback]:
    """A progress display for one analysis, as a `progress(what, done, total)` callback (total None: not known
    yet). `console` is stderr unless given; a console that is not a terminal, or `enabled=False`, shows nothing."""
    console = console or Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield _nothing
        return
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[count]}"),
               TimeElapsedColumn(), TimeRemainingColumn())
    # stdout printed while the bar is up is kept in order only when it goes to the same terminal; piped, it stays
    # stdout's own (rich would otherwise print it through the display's stderr)
    with segments.listening() as path, \
            Progress(*columns, console=console, transient=True, redirect_stdout=_stdout_is_terminal()) as bar:
        shown = _Shown(bar, path, what[:WIDTH], unit)
        poller = threading.Thread(target=shown.poll, name="fpdiff-progress", daemon=True)
        poller.start()
        try:
            yield shown.update
        finally:
            shown.stop.set()
            poller.join()


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout: not a terminal
        return False


class _Shown:
    """The two rows of a live display: the analysis's cells, and the current cell's segments when told."""

    def __init__(self, bar: Progress, path: Path, what: str, unit: str) -> None:
        self.bar, self.path, self.unit = bar, path, unit
        self.main: TaskID = bar.add_task(what, total=None, count="")
        self.inner: TaskID = bar.add_task("", total=None, count="", visible=False)
        self.cell: tuple[str, int] | None = None
        self.seen: segments.Segment | None = None
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def update(self, what: str, done: int, total: int | None) -> None:
        """The analysis's callback: a new cell (another name or count), whose segments start from none."""
        with self.lock:
            if (what, done) != self.cell:
                self.cell = (what, done)
                segments.clear(self.path)
                self.seen = None
                self.bar.reset(self.inner, total=None, visible=False)  # its clock and ETA start again too
            count = f"{done}/{'?' if total is None else total}" + (f" {self.unit}" if self.unit else "")
            self.bar.update(self.main, description=what[:WIDTH], completed=done, total=total, count=count)

    def poll(self) -> None:
        """Read the worker's segment file until the display ends."""
        while not self.stop.wait(POLL):
            self.show(segments.read(self.path))

    def show(self, seg: segments.Segment | None) -> None:
        with self.lock:
            if seg is None or seg == self.seen:
                return
            self.seen = seg
            self.bar.update(self.inner, description=("  " + seg.text())[:WIDTH], completed=seg.done,
                            total=seg.total, count="", visible=True)
