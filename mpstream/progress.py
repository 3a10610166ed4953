"""Progress for the commands that take more than a few seconds (`play`, `netem check`, `trace
record`, `paths check`), shown with rich as `run` and `encode` show theirs: what is being done
now, a bar over the steps or over the time the work is known to take, and the time spent.

It goes to stderr, so that what a command prints on stdout (its table, its JSON) stays as it
was; rich draws it only on a terminal (the bar is skipped when stderr is a pipe or a file).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

_TICK_S = 0.25


class Working:
    """What a running command says it is doing: `step(text)` moves on to the next step."""

    def __init__(self, bar: Progress, task: TaskID, what: str, by_steps: bool):
        self._bar = bar
        self._task = task
        self._what = what
        self._by_steps = by_steps
        self._steps_done = -1

    def step(self, text: str) -> None:
        self._steps_done += 1
        description = f"{self._what}: {text}"
        if self._by_steps:
            self._bar.update(self._task, description=description, completed=self._steps_done)
        else:
            self._bar.update(self._task, description=description)


@contextlib.contextmanager
def working(what: str, *, steps: int | None = None, seconds: float | None = None,
            console: Console | None = None) -> Iterator[Working]:
    """A progress line for `what` while the block runs: over `steps` steps (each begun with
    `step`), or over `seconds` of known length (a session's duration, a recording's), filled by
    the clock and held short of the end until the block is done."""
    console = console or Console(stderr=True)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn()]
    columns.append(MofNCompleteColumn() if steps else TextColumn(""))
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False,
                  disable=not console.is_terminal) as bar:
        task = bar.add_task(what, total=steps or seconds)
        stop = threading.Event()
        ticker = None
        if steps is None and seconds:
            started = time.monotonic()

            def tick() -> None:
                while not stop.wait(_TICK_S):
                    bar.update(task, completed=min(time.monotonic() - started, seconds * 0.99))

            ticker = threading.Thread(target=tick, name="progress", daemon=True)
            ticker.start()
        try:
            yield Working(bar, task, what, by_steps=steps is not None)
            bar.update(task, completed=steps or seconds)
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
