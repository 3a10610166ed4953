"""Who may use a cluster: a driver without the head's token is refused by Ray itself; a host
whose mpstream differs from the head's is refused before any trial runs, with the reason."""

import subprocess
import sys
from pathlib import Path

import pytest

from mpstream.paths import REPO_ROOT
from mpstream.runner.cluster.hosts import CONFIG_ENV, TOKEN_FILE
from mpstream.runner.cluster.local import LocalCluster
from mpstream.runner.layout import write_json
from mpstream.runner.run import _run_json
from mpstream.runner.scenario import expand_trials, load_scenario

from .conftest import iperf_scenario

pytestmark = pytest.mark.timeout(300)

CONNECT = """
import sys
from mpstream.runner.cluster.raytrials import connect, host_nodes
connect(sys.argv[1])
print("hosts:", len(host_nodes()))
"""


def _in(sandbox, argv: list[str], **env: str) -> tuple[int, str]:
    proc = sandbox.popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=240)
    return proc.returncode, " ".join(out.split())


def test_a_driver_without_the_token_is_refused(tmp_path):
    wrong = tmp_path / "wrong"
    wrong.mkdir(mode=0o700)
    (wrong / TOKEN_FILE).write_text("0" * 64 + "\n")
    with LocalCluster(1) as cluster:
        python = [sys.executable, "-c", CONNECT, cluster.address]
        code, out = _in(cluster.head, python)
        assert code == 0 and "hosts: 1" in out, out
        code, out = _in(cluster.head, python, **{CONFIG_ENV: str(wrong)})
        assert code != 0 and "cannot join the cluster" in out, out
        assert "Authentication token is missing or incorrect" in out, out
        # Ray on its own, without mpstream's settings: no token at all
        code, out = _in(cluster.head, [sys.executable, "-c",
                                       f"import ray; ray.init(address={cluster.address!r})"],
                        RAY_AUTH_MODE="disabled", RAY_AUTH_TOKEN_PATH="")
        assert code != 0 and "Failed to connect" in out, out
        code, out = _in(cluster.head, python, **{CONFIG_ENV: str(tmp_path / "none")})
        assert code != 0 and "no cluster token" in out, out


def test_a_host_with_another_mpstream_is_refused_before_any_trial(tmp_path):
    scenario = load_scenario(iperf_scenario(tmp_path))
    plan = expand_trials(scenario, 1)
    run = tmp_path / "run"
    run.mkdir()
    write_json(run / "run.json", _run_json(scenario, None, plan, 1, None, False))
    init = REPO_ROOT / "mpstream" / "__init__.py"
    with LocalCluster(2) as cluster:
        # local-2 gets a different mpstream: its own copy of the package's version, mounted
        # over the file in its own mount namespace only.
        code, out = _in(cluster.sandboxes[2], ["sh", "-c",
                        f"sed 's/^__version__ = .*/__version__ = \"0.0.0-other\"/' {init} "
                        f"> /tmp/init.py && mount --bind /tmp/init.py {init}"])
        assert code == 0, out
        assert "0.0.0-other" not in init.read_text()  # this machine's is as it was

        code, out = _in(cluster.head, [sys.executable, "-m", "mpstream.cli", "cluster",
                                       "status", cluster.address])
        assert code == 0, out
        assert "local-1" in out and "REFUSED" in out, out
        refused = out[out.index("local-2"):]
        assert "REFUSED: mpstream 0.0.0-other, the head has" in refused, out
        assert "REFUSED" not in out[out.index("local-1"):out.index("local-2")], out

        log = tmp_path / "driver.log"
        driver = cluster.driver(run, [t.key for t in plan], 60, log)
        events, _ = driver.communicate(timeout=240)
        assert driver.returncode != 0 and events == ""
        said = " ".join(log.read_text().split())
        assert "refused before any trial ran: local-2: mpstream 0.0.0-other" in said, said
    assert not (run / "trials").exists() or not any(Path(run / "trials").iterdir())
