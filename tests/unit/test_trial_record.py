"""The trial record: its checked-in JSON Schema is current, records of every version load, and
bad records are refused with the file and the field."""

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from mpstream.errors import UserError
from mpstream.runner import record
from mpstream.runner.layout import finished_keys, load_trials

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "runs"


def test_checked_in_schema_is_current():
    checked_in = json.loads(record.SCHEMA_FILE.read_text())
    assert checked_in == json.loads(json.dumps(record.record_schema(), sort_keys=True)), (
        f"{record.SCHEMA_FILE.name} is stale: the model in runner/record.py changed. "
        f"Regenerate it with `{record.REGENERATE}` and commit the result.")


def test_regenerating_writes_what_the_test_compares(tmp_path):
    target = tmp_path / "schema.json"
    assert record.main([str(target)]) == 0
    assert json.loads(target.read_text()) == json.loads(record.SCHEMA_FILE.read_text())


@pytest.mark.parametrize("run", ["video", "iperf"])
def test_records_of_version_1_migrate(run):
    """trial.json files written before records had a version (a real run, kept as a fixture)
    load as this version's record, and the migrated record validates against the schema."""
    schema = json.loads(record.SCHEMA_FILE.read_text())
    paths = sorted((FIXTURES / run / "trials").glob("*/trial.json"))
    assert paths
    for path in paths:
        raw = json.loads(path.read_text())
        assert "schema_version" not in raw  # the fixture is of version 1
        rec = record.load_record(path)
        assert rec.schema_version == record.SCHEMA_VERSION
        assert rec.key == raw["key"] and rec.status == raw["status"]
        assert rec.capacity_bps == raw["capacity_bps"] and rec.sender == "server"
        assert rec.host is None  # version 1 did not say where it ran
        jsonschema.validate(rec.model_dump(mode="json"), schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(raw | {"status": "maybe"}, schema)


def test_a_record_from_a_newer_mpstream_is_refused(tmp_path):
    path = tmp_path / "trial.json"
    raw = json.loads(next((FIXTURES / "iperf" / "trials").glob("*/trial.json")).read_text())
    path.write_text(json.dumps(raw | {"schema_version": record.SCHEMA_VERSION + 1}))
    with pytest.raises(UserError, match="newer than this mpstream"):
        record.load_record(path)


def test_a_broken_record_names_the_file_and_the_field(tmp_path):
    path = tmp_path / "trial.json"
    path.write_text(json.dumps({"key": "r00-x", "status": "ok"}))
    with pytest.raises(UserError, match=r"trial.json: not a trial record: round"):
        record.load_record(path)
    path.write_text("{not json")
    with pytest.raises(UserError, match="not JSON"):
        record.load_record(path)


def test_finished_trials_are_read_once_and_in_plan_order(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "video", run)
    (run / "trials" / "r01-interrupted-dashjs").mkdir()  # no trial.json: not finished
    assert finished_keys(run) == {"r00-unbalanced-dashjs": "ok", "r00-single-dashjs": "ok"}
    trials = load_trials(run)
    assert [t.key for t in trials] == ["r00-unbalanced-dashjs", "r00-single-dashjs"]
    first = trials[0]
    rows = first.samples("client")
    assert rows and first.samples("client") is rows  # read once, then shared
    assert first.mptcp_samples("client") is not None
    assert trials[1].mptcp_samples("client") is None  # single-path TCP: none sampled
    assert first.events is first.events and first.access_log is first.access_log
