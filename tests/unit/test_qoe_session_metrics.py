"""A session's figures are one typed model, computed from events read through the collector's
own models: the summary's shape comes from the model, a choice of figures is checked against
it, and an event the collector would refuse is refused here too."""

import pytest
from pydantic import ValidationError

from mpstream.metric import Metric
from mpstream.qoe.metrics import (
    GROUPED_FIGURES,
    METRIC_FIELDS,
    SHOWN,
    TRIAL_FIGURES,
    SessionMetrics,
    Shown,
    parse_events,
    session_figures,
    session_metrics,
)
from mpstream.qoe.scores import SCORE_FIELDS, SCORE_METRICS
from mpstream.runner.metrics.metric import is_declared, metric_label
from mpstream.runner.workloads import workload_for
from mpstream.runner.workloads.video import QOE_COLUMNS
from mpstream.server import summary
from tests.unit.test_server_summary import EVENTS, SESSION, ev


def test_the_figures_are_typed_and_the_summary_lists_them_in_the_models_order():
    got = session_metrics(EVENTS)
    assert isinstance(got, SessionMetrics)
    assert (got.stall_count, got.stall_ms, got.codec) == (1, 1000.0, "avc1.64001f")
    # The one-value figures are the model's fields but its lists, in the model's order ...
    scalars = tuple(f for f in SessionMetrics.model_fields
                    if f not in ("segment_rates_bps", "ladder"))
    assert scalars == METRIC_FIELDS
    # ... and the collector's summary carries every field of the model, in that order.
    row = summary.summarize(SESSION, EVENTS)
    assert [k for k in row if k in SessionMetrics.model_fields] == list(
        SessionMetrics.model_fields)
    assert row["segment_rates_bps"] == got.segment_rates_bps


def test_a_choice_of_figures_names_only_declared_figures_of_the_model():
    assert [m.name for m in session_figures("stall_ms", "played_s")] == ["stall_ms", "played_s"]
    assert session_figures("stall_ms")[0] == Metric("stall_ms", "stall time", "ms")
    with pytest.raises(ValueError, match="stall_time_ms"):
        session_figures("stall_ms", "stall_time_ms")
    # A field of the model that no table shows has no declaration to choose.
    with pytest.raises(ValueError, match="end_reason"):
        session_figures("end_reason")


def test_every_table_of_figures_is_made_from_the_declarations():
    """A figure's name, label and unit are declared once, on its field: the collector's grouped
    statistics, the trial's figures and their labels are made from that declaration."""
    declared = {n for n, f in SessionMetrics.model_fields.items()
                if any(isinstance(s, Shown) for s in f.metadata)}
    assert set(TRIAL_FIGURES) | set(GROUPED_FIGURES) <= declared
    assert set(summary.GROUPED_METRICS) == set(GROUPED_FIGURES) | set(SCORE_FIELDS)
    # the figure the grouped statistics once lacked
    assert {"live_catchup_share", "live_latency_p95_s"} <= set(summary.GROUPED_METRICS)
    for name in TRIAL_FIGURES:
        assert is_declared(name), name
        assert metric_label(name) == (SHOWN[name].label, SHOWN[name].unit), name
    shown = [m.name for m in workload_for("video").shown]
    assert set(TRIAL_FIGURES) <= set(shown)
    assert len(shown) == len(set(shown))
    assert set(QOE_COLUMNS) == set(TRIAL_FIGURES)
    # the scores: declared in qoe/scores.py, shown by the collector and the trial alike
    for score in SCORE_METRICS:
        assert score.name in summary.GROUPED_METRICS
        assert metric_label(score.name) == (score.label, score.unit)


def test_events_are_read_as_the_collector_reads_them():
    # A byte count sent as text is refused by the collector's models, here as at the collector.
    bad = ev(0, 100, "manifest", url="/m", t_request=50, t_done=100, bytes="900")
    with pytest.raises(ValidationError):
        session_metrics([bad])
    # Parsed events pass as they are, in seq order, whatever order they came in.
    parsed = parse_events(reversed(EVENTS))
    assert [e.seq for e in parsed] == sorted(e["seq"] for e in EVENTS)
    assert parse_events(parsed)[0] is parsed[0]
    assert session_metrics(parsed) == session_metrics(EVENTS)
