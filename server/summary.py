"""The collector's per-session summaries and grouped statistics. Every figure comes from
mpstream.qoe (docs/qoe.md defines them), the same code the runner's report calls; this module
only adds the session record's fields and groups sessions.
"""

from __future__ import annotations

from typing import Any

from mpstream.qoe.metrics import GROUPED_FIGURES, METRIC_FIELDS, parse_events, session_metrics
from mpstream.qoe.scores import SCORE_FIELDS, session_scores
from mpstream.qoe.stats import describe

GROUP_KEYS = ("scenario", "trial", "player", "transport", "protocol")
# transport: what the session asked for; measured_*: what the server saw carry it (None where
# it saw nothing: a session stored elsewhere, or before the page asked).
MEASURED_FIELDS = ("measured_transport", "measured_subflows")
SESSION_FIELDS = ("session", "player", "transport", *MEASURED_FIELDS, "protocol", "scenario",
                  "trial")
# The figures the grouped statistics describe, in the order they list them: the session's
# figures declared for them (`Shown` on SessionMetrics' fields), then the scores.
GROUPED_METRICS = (*GROUPED_FIGURES, *SCORE_FIELDS)
# One value each (the CSV export's columns); segment_rates_bps and score_inputs are lists/maps.
SCALAR_FIELDS = (*SESSION_FIELDS, *METRIC_FIELDS, *SCORE_FIELDS)


def summarize(session: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-session summary: the session's identity, every QoE figure and the scores."""
    evs = parse_events(events)
    scores = session_scores(evs)
    return {
        "session": session["id"],
        **{k: session.get(k) if k in MEASURED_FIELDS else session[k]
           for k in SESSION_FIELDS[1:]},
        **session_metrics(evs).model_dump(),
        **{k: scores[k] for k in SCORE_FIELDS},
        "score_inputs": scores["inputs"],
    }


def grouped(summaries: list[dict[str, Any]], by: list[str]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for s in summaries:
        groups.setdefault(tuple(s[k] for k in by), []).append(s)

    def order(key: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((v is None, str(v)) for v in key)

    return [
        {
            "group": dict(zip(by, key, strict=True)),
            "n": len(members),
            "metrics": {m: describe(s[m] for s in members) for m in GROUPED_METRICS},
        }
        for key, members in sorted(groups.items(), key=lambda kv: order(kv[0]))
    ]
