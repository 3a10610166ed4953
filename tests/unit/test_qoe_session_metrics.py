"""A session's figures are one typed model, computed from events read through the collector's
own models: the summary's shape comes from the model, a choice of figures is checked against
it, and an event the collector would refuse is refused here too."""

import pytest
from pydantic import ValidationError

from mpstream.qoe.metrics import METRIC_FIELDS, SessionMetrics, parse_events, session_metrics
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


def test_a_choice_of_figures_names_only_fields_of_the_model():
    assert SessionMetrics.named("stall_ms", "played_s") == ("stall_ms", "played_s")
    with pytest.raises(ValueError, match="stall_time_ms"):
        SessionMetrics.named("stall_ms", "stall_time_ms")


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
