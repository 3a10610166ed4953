"""Reading nginx's structured access log (one JSON object per request, see nginx.conf.j2),
with the CMCD data a player sent parsed into a dict.

CMCD (CTA-5004) travels either as the query argument `CMCD` (URL-encoded) or in four headers;
each is a comma-separated list of `key=value` or bare `key` (a true boolean); string values are
quoted. The merged keys of all four headers, or of the query argument, end up in `cmcd`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

CMCD_FIELDS = ("cmcd", "cmcd_request", "cmcd_object", "cmcd_session", "cmcd_status")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside a quoted string."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_cmcd(text: str) -> dict[str, Any]:
    """`bl=2000,br=800,ot=v,sid="abc",su` -> {"bl": 2000, "br": 800, "ot": "v", "sid": "abc",
    "su": True}. Integers and decimals become numbers, quoted values strings, bare keys True."""
    out: dict[str, Any] = {}
    for item in _split_top_level(text):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            out[key] = True
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            out[key] = value[1:-1].replace('\\"', '"')
        else:
            try:
                out[key] = int(value)
            except ValueError:
                try:
                    out[key] = float(value)
                except ValueError:
                    out[key] = value  # tokens such as ot=v, sf=d
    return out


def cmcd_of(entry: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    if entry.get("cmcd"):
        merged.update(parse_cmcd(unquote(entry["cmcd"])))
    for field in CMCD_FIELDS[1:]:
        if entry.get(field):
            merged.update(parse_cmcd(entry[field]))
    return merged


def read_access_log(path: Path) -> list[dict[str, Any]]:
    """Every request in the log, in order, each with a parsed `cmcd_data` dict."""
    entries = []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        entry["cmcd_data"] = cmcd_of(entry)
        entries.append(entry)
    return entries
