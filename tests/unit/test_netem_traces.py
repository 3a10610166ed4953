"""Link traces: lookup order, the pinned fetch (against a loopback server), synthetic traces."""

import functools
import hashlib
import http.server
import threading

import pytest

from mpstream.errors import UserError
from mpstream.netem import traces
from mpstream.netem.profile import load_profile
from tests.unit.test_netem_cli import mpstream


def test_synthetic_trace_has_the_asked_mean_and_ends_at_its_length():
    stamps = traces.synthetic(10e6, 30, seed=3)
    assert stamps == sorted(stamps) and stamps[-1] == 30_000
    assert len(stamps) * 1500 * 8 / 30 == pytest.approx(10e6, rel=1e-3)
    # it varies: the busiest second carries well over the quietest
    per_s = [0] * 30
    for t in stamps:
        per_s[min((t - 1) // 1000, 29)] += 1
    assert max(per_s) > 1.5 * min(per_s)


def test_mean_bps_of_a_handmade_trace(tmp_path):
    # 3 opportunities over 2 ms: 3 x 12000 bit / 0.002 s
    path = traces.write(tmp_path / "t", [1, 1, 2])
    assert traces.mean_bps(path) == pytest.approx(18e6)
    (tmp_path / "empty").write_text("")
    with pytest.raises(UserError, match="not a packet-delivery trace"):
        traces.mean_bps(tmp_path / "empty")


def test_lookup_order_env_then_system(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    for d in (first, second):
        d.mkdir()
    traces.write(second / "x.down", [1])
    monkeypatch.setenv("MPSTREAM_TRACES", f"{first}:{second}")
    assert traces.search_dirs() == [first, second, traces.SYSTEM_DIR]
    assert traces.cache_dir() == first
    assert traces.find("x", "down") == (second / "x.down").resolve()
    traces.write(first / "x.down", [1])
    assert traces.find("x", "down") == (first / "x.down").resolve()
    assert traces.find("nothing", "down") is None


def test_default_cache_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("MPSTREAM_TRACES", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert traces.cache_dir() == tmp_path / "mpstream" / "traces"
    assert traces.search_dirs()[0] == tmp_path / "mpstream" / "traces"


def test_a_missing_published_trace_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MPSTREAM_TRACES", str(tmp_path))
    with pytest.raises(UserError) as info:
        load_profile("wifi-cellular")
    message = str(info.value)
    assert "paths.1.trace" in message and "mpstream traces fetch TMobile-LTE-short" in message


@pytest.fixture
def mirror(tmp_path):
    """A loopback HTTP server over a directory, standing in for the pinned source."""
    root = tmp_path / "mirror"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _publish(monkeypatch, root, name, tamper=False):
    digests = {}
    for direction in ("down", "up"):
        path = traces.write(root / f"{name}.{direction}", traces.synthetic(2e6, 5, seed=1))
        digests[direction] = hashlib.sha256(path.read_bytes()).hexdigest()
    if tamper:
        digests["up"] = "0" * 64
    monkeypatch.setitem(traces.PUBLISHED, name,
                        traces.PublishedTrace(name, "test trace", digests))


def test_fetch_checks_digests_and_fills_the_cache(mirror, tmp_path, monkeypatch):
    root, url = mirror
    _publish(monkeypatch, root, "Test-Trace")
    cache = tmp_path / "cache"
    monkeypatch.setenv("MPSTREAM_TRACES", str(cache))
    monkeypatch.setenv("MPSTREAM_TRACES_URL", url)
    got = traces.fetch(["Test-Trace"])
    assert [p.name for p in got] == ["Test-Trace.down", "Test-Trace.up"]
    assert (cache / "Test-Trace.down").read_bytes() == (root / "Test-Trace.down").read_bytes()
    # Once there, a second fetch reads nothing from the source.
    (root / "Test-Trace.down").unlink()
    assert traces.fetch(["Test-Trace"]) == got
    assert traces.find("Test-Trace", "down") == (cache / "Test-Trace.down").resolve()


def test_fetch_keeps_nothing_that_fails_its_digest(mirror, tmp_path, monkeypatch):
    root, url = mirror
    _publish(monkeypatch, root, "Bad-Trace", tamper=True)
    cache = tmp_path / "cache"
    with pytest.raises(UserError, match=r"SHA-256 .* is not the pinned 0000"):
        traces.fetch(["Bad-Trace"], base_url=url, dest=cache)
    assert sorted(p.name for p in cache.iterdir()) == ["Bad-Trace.down"]


def test_fetch_of_an_unknown_name_or_unreachable_source_is_clear(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="no published trace named Nope: choose from"):
        traces.fetch(["Nope"], dest=tmp_path)
    with pytest.raises(UserError, match=r"could not download .*copy the Mahimahi traces into"):
        traces.fetch(["TMobile-LTE-short"], base_url="http://127.0.0.1:9", dest=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_netem_list_marks_a_preset_whose_trace_is_missing(tmp_path):
    result = mpstream("netem", "list", env_extra={"MPSTREAM_TRACES": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "wifi-cellular: unavailable" in result.stdout
    assert "mpstream traces fetch TMobile-LTE-short" in result.stdout
    assert "thesis-bandwidth-balanced" in result.stdout


def test_traces_cli_lists_synthesizes_and_fetches(tmp_path, trace_store):
    listed = mpstream("traces", "list")
    assert listed.returncode == 0, listed.stderr
    # the made-up TMobile-LTE-short is found in the store
    assert f"TMobile-LTE-short      in {trace_store}" in listed.stdout
    assert "not here: `mpstream traces fetch ATT-LTE-driving`" in listed.stdout
    made = mpstream("traces", "synth", str(tmp_path / "mine"), "--mean-rate", "8mbit",
                    "--seconds", "10")
    assert made.returncode == 0, made.stderr
    assert traces.mean_bps(tmp_path / "mine.down") == pytest.approx(8e6, rel=1e-3)
    bad = mpstream("traces", "synth", str(tmp_path / "x"), "--mean-rate", "fast")
    assert bad.returncode == 2 and "--mean-rate" in bad.stderr
    nothing = mpstream("traces", "fetch")
    assert nothing.returncode != 0 and "--all" in nothing.stderr


def test_a_cellular_like_trace_has_the_asked_second_scale_statistics():
    # The second-scale statistics of TMobile-LTE-short's downlink: cov 0.59, lag-1 0.70.
    stamps = traces.cellular_like(2e6, 900, cov=0.59, autocorr=0.70, seed=5)
    stats = traces.rate_statistics(stamps)
    assert stats["mean_bps"] == pytest.approx(2e6, rel=1e-3)
    assert stats["cov"] == pytest.approx(0.59, abs=0.06)
    assert stats["autocorr"] == pytest.approx(0.70, abs=0.06)
    assert stamps[-1] == 900_000 and stamps == sorted(stamps)
    flat = traces.rate_statistics(traces.cellular_like(2e6, 900, cov=0.05, autocorr=0.0, seed=5))
    assert flat["cov"] < 0.08 and abs(flat["autocorr"]) < 0.1
    with pytest.raises(UserError, match="--autocorr"):
        traces.cellular_like(2e6, 10, cov=0.5, autocorr=1.0)


def test_synth_like_copies_a_traces_statistics_at_another_mean(tmp_path, trace_store):
    # The made-up TMobile-LTE-short of the store stands in for the fetched one.
    source = traces.rate_statistics(
        [int(x) for x in (trace_store / "TMobile-LTE-short.down").read_text().split()])
    made = mpstream("traces", "synth", str(tmp_path / "lte"), "--mean-rate", "2mbit",
                    "--seconds", "600", "--like", "TMobile-LTE-short")
    assert made.returncode == 0, made.stderr
    got = traces.rate_statistics([int(x) for x in (tmp_path / "lte.down").read_text().split()])
    assert got["mean_bps"] == pytest.approx(2e6, rel=1e-3)
    assert got["cov"] == pytest.approx(source["cov"], abs=0.08)
    assert got["autocorr"] == pytest.approx(source["autocorr"], abs=0.1)
    both = mpstream("traces", "synth", str(tmp_path / "x"), "--mean-rate", "2mbit",
                    "--like", "TMobile-LTE-short", "--cov", "0.5")
    assert both.returncode != 0 and "--like" in both.stderr
    half = mpstream("traces", "synth", str(tmp_path / "x"), "--mean-rate", "2mbit", "--cov", "0.5")
    assert half.returncode != 0 and "--autocorr" in half.stderr
    missing = mpstream("traces", "synth", str(tmp_path / "x"), "--mean-rate", "2mbit",
                       "--like", "ATT-LTE-driving")
    assert missing.returncode != 0 and "ATT-LTE-driving' not found" in missing.stderr
