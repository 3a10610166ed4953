"""The QoE event vocabulary as one JSON Schema (draft 2020-12), generated from the pydantic
models the collector validates with (the session in schemas.py, the events in
mpstream/qoe/events.py). The checked-in copy, docs/qoe-events.schema.json, is what the player's
probe tests validate every emitted event against (ajv); tests/unit/test_event_schema.py fails
when it is stale.

Regenerate after changing either:

    make event-schema        # = .venv/bin/python -m mpstream.server.event_schema
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from mpstream.paths import REPO_ROOT
from mpstream.server import schemas

SCHEMA_FILE = REPO_ROOT / "docs" / "qoe-events.schema.json"
REGENERATE = "make event-schema"
_REF = "#/$defs/{model}"


def _schema_of(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    schema = TypeAdapter(tp).json_schema(ref_template=_REF)
    defs.update(schema.pop("$defs", {}))
    return schema


def event_schema() -> dict[str, Any]:
    """The document: $defs Session (POST /sessions), Event (one of the event types, told
    apart by `type`), Batch (POST /sessions/{id}/events); the document itself is a Batch."""
    defs: dict[str, Any] = {}
    defs["Session"] = _schema_of(schemas.SessionIn, defs)
    event = _schema_of(schemas.AnyEvent, defs)
    # One object type, told apart by `type` (each branch has it as a const). The discriminator
    # keeps its property name only: the branches say their own type, a mapping adds nothing.
    event["discriminator"] = {"propertyName": event["discriminator"]["propertyName"]}
    defs["Event"] = {"type": "object", **event}
    defs["Batch"] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["events"],
        "properties": {"events": {"type": "array", "maxItems": schemas.MAX_EVENTS_PER_BATCH,
                                  "items": {"$ref": _REF.format(model="Event")}}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://mpstream.invalid/qoe-events.schema.json",
        "title": "mpstream QoE events (player → collector)",
        "description": "Generated from server/schemas.py and mpstream/qoe/events.py by "
                       "`make event-schema`; do not edit by hand. Prose: docs/qoe-events.md.",
        "$ref": _REF.format(model="Batch"),
        "$defs": dict(sorted(defs.items())),
    }


def render() -> str:
    return json.dumps(event_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else SCHEMA_FILE
    target.write_text(render())
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
