"""Reading a JSON-lines file that a live or killed program appends to (nginx's access log, the
QUIC hop's statistics): a missing file has no lines, and a line that does not parse (the torn
last line of a program killed mid-write) or is not an object is skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out
