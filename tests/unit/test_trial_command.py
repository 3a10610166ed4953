"""`mpstream trial` runs one planned trial (--key) or the keys it is given (--worker), never
both and never neither; a worker's output goes to each trial's own log."""

import os

import pytest
from click.testing import CliRunner

from mpstream.errors import UserError
from mpstream.runner.layout import trial_log
from mpstream.runner.trial import _output_to, trial

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("args", [[], ["--key", "r00-a", "--worker"]])
def test_trial_wants_one_key_or_the_worker(tmp_path, args):
    said = CliRunner().invoke(trial, [str(tmp_path), *args])
    assert isinstance(said.exception, UserError)
    assert "--key KEY" in str(said.exception) and "--worker" in str(said.exception)


def test_a_workers_output_goes_to_the_trials_log_and_then_elsewhere(tmp_path, capfd):
    log = trial_log(tmp_path, "r00-a")
    with _output_to(log):
        os.write(1, b"out of the trial\n")
        os.write(2, b"err of the trial\n")
    os.write(1, b"between trials\n")
    assert log.read_text() == "out of the trial\nerr of the trial\n"
    out, err = capfd.readouterr()
    assert "between trials" in err and "between trials" not in out  # not on the done pipe
