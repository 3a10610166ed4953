"""A path's received bytes, watched while a path policy's lever moves a running download on
or off it: the client interface's counter, how soon it moved or stood still."""

import time


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
