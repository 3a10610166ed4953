"""mpstream.proc.side_by_side: two set-ups overlap, both are undone on every way out, and the
background one lives in one thread from its entry to its exit."""

import contextlib
import threading
import time

import pytest

from mpstream.proc import side_by_side


class Recorder:
    def __init__(self, name: str, log: list, *, enter_s: float = 0.0, fail: bool = False):
        self.name, self.log, self.enter_s, self.fail = name, log, enter_s, fail
        self.threads: list[int] = []

    def __enter__(self):
        self.threads.append(threading.get_ident())
        time.sleep(self.enter_s)
        if self.fail:
            raise RuntimeError(f"{self.name} failed")
        self.log.append(f"enter {self.name}")
        return self.name

    def __exit__(self, *exc):
        self.threads.append(threading.get_ident())
        self.log.append(f"exit {self.name}")
        return False


def test_both_enter_at_once_and_both_exit():
    log: list[str] = []
    servers, browser = Recorder("servers", log, enter_s=0.3), Recorder("browser", log, enter_s=0.3)
    started = time.monotonic()
    with side_by_side(servers, browser) as (a, b):
        assert (a, b) == ("servers", "browser")
        assert time.monotonic() - started < 0.55  # overlapped, not 0.6 s in a row
    assert sorted(log) == ["enter browser", "enter servers", "exit browser", "exit servers"]
    # The background one is entered and exited by one thread, not this one (a child started
    # with PR_SET_PDEATHSIG there lives as long as that thread).
    assert servers.threads[0] == servers.threads[1] != threading.get_ident()
    assert browser.threads == [threading.get_ident()] * 2


def test_a_failing_background_undoes_the_other():
    log: list[str] = []
    with pytest.raises(RuntimeError, match="servers failed"), \
            side_by_side(Recorder("servers", log, enter_s=0.1, fail=True),
                         Recorder("browser", log)):
        pytest.fail("the block must not run")
    assert log == ["enter browser", "exit browser"]


def test_a_failing_here_waits_for_the_background_and_undoes_it():
    log: list[str] = []
    with pytest.raises(RuntimeError, match="browser failed"), \
            side_by_side(Recorder("servers", log, enter_s=0.2),
                         Recorder("browser", log, fail=True)):
        pytest.fail("the block must not run")
    assert log == ["enter servers", "exit servers"]


def test_an_error_in_the_block_undoes_both():
    log: list[str] = []
    with contextlib.suppress(KeyError), side_by_side(Recorder("servers", log),
                                                      Recorder("browser", log)):
        raise KeyError("in the block")
    assert "exit servers" in log and "exit browser" in log
