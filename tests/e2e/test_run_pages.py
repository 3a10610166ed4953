"""The run pages in headless Chromium, behind nginx and gunicorn as `mpstream serve` runs them:
the runs list, a run's conditions side by side, and a trial's timeline with its data points,
zoomed by dragging, read by hovering, and with a second trial overlaid."""

import pytest
import requests
from playwright.sync_api import sync_playwright

from mpstream.cli import COLLECTOR_APP
from mpstream.paths import BUILD_DIR
from mpstream.server.cli import RESULTS_ENV
from mpstream.server.stack import ServerStack
from tests.e2e.test_server_dashboard import CHROMIUM_ARGS, free_port
from tests.runfolder import make_run

RUN = "demo-20261123T191949Z"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    make_run(results / RUN)
    media = tmp_path_factory.mktemp("media")
    with ServerStack(media, port=free_port(), collector_app=COLLECTOR_APP,
                     collector_env={RESULTS_ENV: str(results)}) as s:
        yield s


@pytest.fixture
def page(stack):
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1200, "height": 1000})
            errors: list[str] = []
            pg.on("pageerror", lambda e: errors.append(str(e)))
            yield pg
            assert errors == []
        finally:
            browser.close()


def non_null(column: list) -> int:
    return sum(v is not None for v in column)


def test_the_list_leads_to_the_run_and_its_conditions(stack, page):
    page.goto(stack.base_url + "/runs/")
    row = page.locator("#runs tbody tr", has_text=RUN)
    assert row.count() == 1
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "demo" and cells[3:6] == ["3", "3", "0"]  # trials, ok, failed
    row.locator("a").click()
    page.wait_for_url(f"**/runs/{RUN}")
    heads = page.locator("#conditions th.condition").all_inner_texts()
    assert [h.split()[0] for h in heads] == ["balanced", "unbalanced", "single"]
    startup = page.locator("#conditions tbody tr", has_text="startup delay")
    assert "244.8" in startup.inner_text()  # the unbalanced trial's, as the report has it
    assert page.locator("#trials tbody tr").count() == 3


def test_a_trials_timeline_draws_its_data_points(stack, page):
    key = "r00-unbalanced-dashjs"
    timeline = requests.get(f"{stack.base_url}/api/runs/{RUN}/trials/{key}/timeline",
                            timeout=10).json()
    page.goto(f"{stack.base_url}/runs/{RUN}")
    page.locator("#trials a", has_text=key).click()
    page.wait_for_selector("body[data-charts-ready='1']", timeout=15_000)
    drawn = page.evaluate("""() => Object.fromEntries(Object.entries(window.runCharts)
        .map(([name, u]) => [name, {data: u.data, labels: u.series.map((s) => s.label)}]))""")
    assert drawn["throughput"]["labels"][1:] == ["path0", "path1"]
    for p, points in enumerate(timeline["throughput_bps"]):
        assert non_null(drawn["throughput"]["data"][1 + p]) == len(points)
    assert non_null(drawn["buffer"]["data"][1]) == len(timeline["buffer_s"]) > 5
    assert non_null(drawn["rate"]["data"][2]) == len(timeline["segment_rate_bps"]) > 3
    page.screenshot(path=str(BUILD_DIR / "screenshots" / "run-trial.png"), full_page=True)


def test_dragging_zooms_every_chart_and_hovering_shows_values(stack, page):
    page.goto(f"{stack.base_url}/runs/{RUN}/trials/r00-balanced-dashjs")
    page.wait_for_selector("body[data-charts-ready='1']", timeout=15_000)
    over = page.locator("#chart-throughput .u-over").bounding_box()
    y = over["y"] + over["height"] / 2
    page.mouse.move(over["x"] + over["width"] * 0.2, y)
    page.mouse.down()
    page.mouse.move(over["x"] + over["width"] * 0.4, y, steps=5)
    page.mouse.up()
    spans = page.evaluate("""() => Object.values(window.runCharts)
        .map((u) => [u.scales.x.min, u.scales.x.max])""")
    assert spans[0][0] > 0 and spans[0][1] < 0.5 * page.evaluate(
        "() => window.runCharts.throughput.data[0].at(-1)")
    assert all(s == pytest.approx(spans[0]) for s in spans)  # all three follow
    page.mouse.move(over["x"] + over["width"] * 0.3, y)
    values = page.locator("#chart-throughput .u-legend .u-value").all_inner_texts()
    assert any(v not in ("--", "") for v in values[1:])


def test_a_second_trial_is_overlaid(stack, page):
    page.goto(f"{stack.base_url}/runs/{RUN}/trials/r00-unbalanced-dashjs")
    page.wait_for_selector("body[data-charts-ready='1']", timeout=15_000)
    page.select_option("#overlay", "r00-single-dashjs")
    page.wait_for_selector("body[data-trials='r00-unbalanced-dashjs r00-single-dashjs']"
                           "[data-charts-ready='1']", timeout=15_000)
    labels = page.evaluate("() => window.runCharts.throughput.series.map((s) => s.label)")
    assert labels[1:] == ["r00-unbalanced-dashjs: path0", "r00-unbalanced-dashjs: path1",
                          "r00-single-dashjs: path0"]
    buffers = page.evaluate("() => window.runCharts.buffer.data.slice(1)")
    assert all(non_null(col) > 5 for col in buffers)
