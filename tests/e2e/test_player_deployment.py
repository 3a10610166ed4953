"""dash.js over kernel MPTCP with a deployment, as a user plays it: the shipped `mptcp-tuned`
preset (on unbalanced paths its path policy fast-start holds the slow path back until the first
frame, then lets it carry the video), and a file whose client runs mpstream's userspace path
manager, under which the browser's connections still get their second subflow (both paths
carry the video)."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]  # make test-deployments

MPSTREAM = [sys.executable, "-m", "mpstream.cli"]


def _play(media, deployment: str, name: str, profile: str = "thesis-bandwidth-balanced") -> dict:
    done = subprocess.run(
        [*MPSTREAM, "play", "--media", str(media), "--player", "dashjs",
         "--profile", profile, "--deployment", deployment,
         "--duration", "10", "--name", name, "--json"],
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
