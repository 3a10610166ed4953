"""The checked-in JSON Schema of the events is the one the pydantic models generate today."""

import json
from typing import Literal, get_args

from mpstream.server import event_schema, schemas


def test_checked_in_schema_is_current():
    checked_in = json.loads(event_schema.SCHEMA_FILE.read_text())
    assert checked_in == event_schema.event_schema(), (
        f"{event_schema.SCHEMA_FILE.name} is stale: the models in server/schemas.py changed. "
        f"Regenerate it with `{event_schema.REGENERATE}` and commit the result."
    )


def test_schema_names_every_event_type():
    doc = event_schema.event_schema()
    branches = doc["$defs"]["Event"]["oneOf"]
    types = {doc["$defs"][b["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["const"]
             for b in branches}
    assert types == set(schemas.EVENT_DATA)


def test_regenerating_writes_what_the_test_compares(tmp_path):
    target = tmp_path / "schema.json"
    assert event_schema.main([str(target)]) == 0
    assert json.loads(target.read_text()) == event_schema.event_schema()


def test_event_models_match_their_data_models():
    assert list(schemas.EVENT_MODELS) == list(schemas.EVENT_DATA)
    for name, model in schemas.EVENT_MODELS.items():
        assert model.model_fields["type"].annotation == Literal[name]
        assert model.model_fields["data"].annotation is schemas.EVENT_DATA[name]
    assert set(get_args(get_args(schemas.AnyEvent)[0])) == set(schemas.EVENT_MODELS.values())
