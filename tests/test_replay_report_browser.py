"""The ``veil replay --report`` page opens in a real browser (issue 31 item 4): Playwright
drives Debian's ``chromium`` (Playwright's own browser download is out of reach here), loads
the page from disk and finds the totals and the charts.

Outside CI the test skips when no ``chromium`` is installed; under ``CI=true`` it fails
(``.ci/run`` installs the package)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from veil.default_plugins.replay.html_report import format_dollars, write_report
from veil.default_plugins.replay.report import run_replay

LOGS = Path(__file__).parent / "data" / "agent_logs"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI") == "true":
        pytest.fail("no chromium in CI: .ci/run installs Debian's chromium package")
    pytest.skip("no chromium installed (apt install chromium) to open the report in")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments, with the system's chromium."""
    return {**browser_type_launch_args, "executable_path": _chromium()}


def test_report_opens_in_chromium_with_totals_and_charts(tmp_path, page):
    files = [
        LOGS / "claude-code" / "branched.jsonl",
        next((LOGS / "pi").glob("2026-*.jsonl")),
    ]
    result = run_replay([str(f) for f in files], 400, policies=("full", "masking"), per_step=True)
    written = write_report(result, tmp_path / "report", price_per_mtok=15.0)
    page.goto(written.page.as_uri())
    assert page.title() == "veil replay report"
    totals = page.locator("#totals-table")
    for name in ("full", "masking"):
        row = totals.locator(f'tr[data-policy="{name}"]')
        eff = result["total"][name]["effective_tokens"]
        assert row.locator('td[data-key="effective_tokens"]').inner_text() == f"{eff:,.0f}"
        assert row.locator('td[data-key="dollars"]').inner_text() == format_dollars(
            eff * 15.0 / 1_000_000
        )
    # the PNG loaded (a broken image has no natural width) and one SVG chart per session
    width = page.locator("#chart-png").evaluate("img => img.complete && img.naturalWidth")
    assert width > 0
    charts = page.locator("section.session svg.chart")
    assert charts.count() == 2
    assert charts.nth(0).locator('polyline[data-policy="full"]').count() == 1
    box = charts.nth(0).bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 50
