"""dash.js over kernel MPTCP with a deployment, as a user plays it: the shipped `mptcp-tuned`
preset (on unbalanced paths its path policy fast-start holds the slow path back until the first
frame, then lets it carry the video), and a file whose client runs mpstream's userspace path
manager, under which the browser's connections still get their second subflow (both paths
carry the video); and the path policy handover, under which the slow path carries the video
only once the fast one has failed."""

import json
import os
import subprocess
import sys

import pytest

from mpstream.netem.profile import PRESETS_DIR

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]  # make test-deployments

MPSTREAM = [sys.executable, "-m", "mpstream.cli"]


def _play(media, deployment: str, name: str, profile: str = "thesis-bandwidth-balanced",
          *more: str) -> dict:
    done = subprocess.run(
        [*MPSTREAM, "play", "--media", str(media), "--player", "dashjs",
         "--profile", profile, "--deployment", deployment,
         "--duration", "10", "--name", name, "--json", *more],
        capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("userspace", [False, True], ids=["mptcp-tuned", "userspace-pm"])
def test_dashjs_plays_over_a_deployment_and_says_which(tiny_media, tmp_path, userspace):
    if userspace:
        path = tmp_path / "userspace-pm.toml"
        path.write_text('[client.mptcp]\npath_manager = "userspace"\n')
        deployment, named = str(path), "userspace-pm"
    else:
        deployment = named = "mptcp-tuned"
    result = _play(tiny_media, deployment, f"pd{os.getpid() % 100000}")
    assert result["deployment"] == named
    assert result["transport"] == "mptcp" and result["errors"] == 0
    assert result["startup_delay_ms"] is not None
    carried = [p["rx_bytes"] for p in result["paths"]]
    assert min(carried) > 100_000, carried  # both paths carried the video


def test_fast_start_lets_the_slow_path_carry_the_video_once_the_first_frame_is_on_screen(
        tiny_media):
    result = _play(tiny_media, "mptcp-tuned", f"pf{os.getpid() % 100000}",
                   profile="thesis-bandwidth-unbalanced")
    assert result["path_policy"] == "fast-start" and result["errors"] == 0
    toggles = result["path_policy_toggles"]
    assert [(t["path"], t["action"]) for t in toggles] == [(1, "nobackup")], toggles
    assert "first frame" in toggles[0]["reason"]
    carried = [p["rx_bytes"] for p in result["paths"]]
    assert min(carried) > 100_000, carried  # the slow path carried video after it


# The thesis's unbalanced paths (the preset's file), with the fast one failing 4 s into the
# session.
FAST_FAILS = (PRESETS_DIR / "thesis-bandwidth-unbalanced.toml").read_text() + """
[[events]]
at_s = 4.0
path = 0
action = "down"
"""


def test_handover_keeps_the_slow_path_on_standby_until_the_fast_one_fails(tiny_media, tmp_path):
    # A buffer of 4 s: the player fetches a segment every 2 s to the end, so that some are
    # still to come when the fast path fails.
    policy = ("--path-policy", "handover", "--buffer", "4")
    steady = _play(tiny_media, "mptcp-live", f"ph{os.getpid() % 100000}",
                   "thesis-bandwidth-unbalanced", *policy)
    assert steady["path_policy"] == "handover" and steady["errors"] == 0
    assert steady["path_policy_toggles"] == []
    fast, slow = (p["rx_bytes"] for p in steady["paths"])
    assert fast > 1_000_000 and slow < 20_000, (fast, slow)  # the slow path's handshake only
    profile = tmp_path / "fast-fails.toml"
    profile.write_text(FAST_FAILS)
    failing = _play(tiny_media, "mptcp-live", f"pi{os.getpid() % 100000}", str(profile), *policy)
    assert failing["startup_delay_ms"] is not None and failing["errors"] == 0
    fast, slow = (p["rx_bytes"] for p in failing["paths"])
    print(f"fast path failing at 4 s: {fast:,} B on the fast path, {slow:,} B on the slow one")
    assert slow > 200_000, (fast, slow)  # the video's segments after the failure
