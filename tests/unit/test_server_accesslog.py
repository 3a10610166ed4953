"""CMCD parsing of access-log entries (the log itself is checked against a real nginx in
tests/integration/test_server_stack.py)."""

import json

from mpstream.server.accesslog import parse_cmcd, read_access_log


def test_parse_cmcd_types():
    got = parse_cmcd('bl=2000,br=800,d=2002.5,ot=v,sid="6e2f,b1",su,nor="../seg2.m4s"')
    assert got == {"bl": 2000, "br": 800, "d": 2002.5, "ot": "v", "sid": "6e2f,b1", "su": True,
                   "nor": "../seg2.m4s"}  # fmt: skip


def test_query_and_header_forms(tmp_path):
    query = {"uri": "/a.m4s", "cmcd": "bl%3D300%2Cbr%3D800%2Csid%3D%22x%22", "cmcd_request": ""}
    headers = {
        "uri": "/b.m4s", "cmcd": "", "cmcd_request": "bl=2100", "cmcd_object": "br=800,ot=v",
        "cmcd_session": 'sid="x"', "cmcd_status": "",
    }  # fmt: skip
    log = tmp_path / "access.jsonl"
    log.write_text(json.dumps(query) + "\n" + json.dumps(headers) + "\n")
    a, b = read_access_log(log)
    assert a["cmcd_data"] == {"bl": 300, "br": 800, "sid": "x"}
    assert b["cmcd_data"] == {"bl": 2100, "br": 800, "ot": "v", "sid": "x"}
