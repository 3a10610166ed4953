"""The progress line of the longer commands (mpstream/progress.py): it says each step and ends
full, on a terminal; elsewhere (a pipe, a file) it writes nothing."""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from mpstream.progress import working

pytestmark = pytest.mark.unit


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=100), out


def test_steps_are_said_and_the_bar_ends_full():
    console, out = _console(terminal=True)
    with working("netem check", steps=3, console=console) as progress:
        for text in ("bringing up", "measuring", "tearing down"):
            progress.step(text)
    shown = out.getvalue()
    assert "netem check: tearing down" in shown and "3/3" in shown


def test_a_timed_bar_fills_with_the_clock_and_is_full_only_when_done():
    console, out = _console(terminal=True)
    with working("trace record", seconds=0.6, console=console) as progress:
        progress.step("downlink")
        time.sleep(0.8)  # longer than announced: the bar waits short of the end
        assert progress._bar.tasks[0].completed < 0.6
    assert progress._bar.tasks[0].completed == 0.6
    assert "trace record: downlink" in out.getvalue()


def test_nothing_is_written_where_no_terminal_reads_it():
    console, out = _console(terminal=False)
    with working("play", steps=2, console=console) as progress:
        progress.step("playing")
    assert out.getvalue() == ""
