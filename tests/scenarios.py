"""Scenario files for tests that run the real command: the two conditions most tests compare
(balanced MPTCP over two paths, single-path TCP), with the fields a test varies."""

from pathlib import Path

BALANCED_AND_SINGLE = """
[[conditions]]
label = "balanced"
profile = "thesis-bandwidth-balanced"
transport = "{multipath}"

[[conditions]]
label = "single"
profile = "thesis-bandwidth-single"
transport = "{single}"
"""


def scenario_head(name: str, *, kind: str = "iperf", trials: int = 1, seed: int = 1,
                  duration_s: float = 4, media_dir: Path | None = None) -> str:
    """The scenario's TOML before its conditions; a video scenario plays `media_dir` with
    dash.js."""
    head = [f'name = "{name}"', f'kind = "{kind}"', f"trials = {trials}", f"seed = {seed}",
            f"duration_s = {duration_s:g}"]
    if kind == "video":
        head += ['players = ["dashjs"]', "", "[media]", f'dir = "{media_dir}"']
    return "\n".join(head) + "\n"


def balanced_and_single(name: str, *, kind: str = "iperf", trials: int = 1, seed: int = 1,
                        duration_s: float = 4, media_dir: Path | None = None,
                        multipath: str = "mptcp", single: str = "tcp") -> str:
    """The scenario's TOML; a video scenario plays `media_dir` with dash.js. The balanced
    condition speaks transport `multipath`, the single one `single`."""
    head = scenario_head(name, kind=kind, trials=trials, seed=seed, duration_s=duration_s,
                         media_dir=media_dir)
    return head + BALANCED_AND_SINGLE.format(multipath=multipath, single=single)


# A phone's two paths, as a profile: a free WiFi one and a metered cellular one (the trace
# pairs' tests replace their rates with a pair's traces).
PHONE = """
mode = "mptcp"
[[paths]]
name = "wifi"
rate = "12mbit"
delay_ms = 5.0
[[paths]]
name = "cellular"
rate = "5mbit"
delay_ms = 20.0
metered = true
"""
