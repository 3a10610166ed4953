"""The checked-in JSON Schema of the events is the one the pydantic models generate today."""

import json
from typing import Literal, get_args

from mpstream.qoe import events
from mpstream.server import event_schema


def test_checked_in_schema_is_current():
    checked_in = json.loads(event_schema.SCHEMA_FILE.read_text())
    assert checked_in == event_schema.event_schema(), (
        f"{event_schema.SCHEMA_FILE.name} is stale: the models in mpstream/qoe/events.py or "
        "server/schemas.py changed. "
        f"Regenerate it with `{event_schema.REGENERATE}` and commit the result."
    )


def test_schema_names_every_event_type():
    doc = event_schema.event_schema()
    branches = doc["$defs"]["Event"]["oneOf"]
    types = {doc["$defs"][b["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["const"]
             for b in branches}
    assert types == set(events.EVENT_DATA)


def test_regenerating_writes_what_the_test_compares(tmp_path):
    target = tmp_path / "schema.json"
    assert event_schema.main([str(target)]) == 0
    assert json.loads(target.read_text()) == event_schema.event_schema()


def test_event_models_match_their_data_models():
    assert list(events.EVENT_MODELS) == list(events.EVENT_DATA)
    for name, model in events.EVENT_MODELS.items():
        assert model.model_fields["type"].annotation == Literal[name]
        assert model.model_fields["data"].annotation is events.EVENT_DATA[name]
    assert set(get_args(get_args(events.AnyEvent)[0])) == set(events.EVENT_MODELS.values())
