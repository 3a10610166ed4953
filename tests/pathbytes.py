"""A path's received bytes, watched while a path policy's lever moves a running download on
or off it: the client interface's counter, how soon it moved or stood still."""

import subprocess
import time

from tests.waiting import wait_until


def rx(topo, path):
    return topo.path_bytes()[path]["rx_bytes"]


def seconds_until(cond, timeout_s):
    """Seconds until cond() held (polled every 20 ms), or None at the timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def moved(topo, path, since, at_least):
    return lambda: rx(topo, path) - since >= at_least


def still(topo, path, window_s=0.4, at_most=6_000):
    """A condition: the path received at most `at_most` bytes over the last `window_s`."""
    last = [(time.monotonic(), rx(topo, path))]

    def check():
        now, got = time.monotonic(), rx(topo, path)
        last.append((now, got))
        while len(last) > 2 and last[1][0] <= now - window_s:
            last.pop(0)
        return last[0][0] <= now - window_s and got - last[0][1] <= at_most
    return check


def cut_path0_during(topo, argv, timeout_s):
    """Runs `argv` (a download) in the client namespace and, once path 0 has carried 1 MB of it,
    takes path 0's link down. Returns the download's exit code and what it printed; a download
    still running at `timeout_s` is killed (its code then says so)."""
    proc = topo.popen("client", argv, stdout=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: rx(topo, 0) > 1_000_000, 20, "the first path carries the download")
        topo.run("link", ["ip", "link", "set", "c0", "down"], check=True)
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out
