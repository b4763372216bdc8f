"""The ``veil replay --report`` page opens in a real browser (issue 31 item 4): Playwright
drives Debian's ``chromium`` (Playwright's own browser download is out of reach here), loads
the page from disk and finds the totals and the charts.

Playwright's sync API is used in the test itself rather than through pytest-playwright's
fixtures: those keep a session-wide browser, whose event loop stays running in the main thread
for the rest of the run, and every later test that calls ``asyncio.run`` (the REPL, the MCP and
HTTP servers) then fails with "cannot be called from a running event loop".

Outside CI the test skips when no ``chromium`` is installed; under ``CI=true`` it fails
(``.ci/run`` installs the package)."""

from __future__ import annotations

import asyncio
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


def test_report_opens_in_chromium_with_totals_and_charts(tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = _chromium()
    files = [
        LOGS / "claude-code" / "branched.jsonl",
        next((LOGS / "pi").glob("2026-*.jsonl")),
    ]
    result = run_replay([str(f) for f in files], 400, policies=("full", "masking"), per_step=True)
    written = write_report(result, tmp_path / "report", price_per_mtok=15.0)
    with sync_playwright() as playwright:  # its event loop ends with the block
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            page = browser.new_page()
            page.goto(written.page.as_uri())
            assert page.title() == "veil replay report"
            totals = page.locator("#totals-table")
            for name in ("full", "masking"):
                row = totals.locator(f'tr[data-policy="{name}"]')
                eff = result["total"][name]["effective_tokens"]
                cell = row.locator('td[data-key="effective_tokens"]')
                assert cell.inner_text() == f"{eff:,.0f}"
                assert row.locator('td[data-key="dollars"]').inner_text() == format_dollars(
                    eff * 15.0 / 1_000_000
                )
            # the PNG loaded (a broken image has no natural width), one SVG chart per session
            width = page.locator("#chart-png").evaluate("img => img.complete && img.naturalWidth")
            assert width > 0
            charts = page.locator("section.session svg.chart")
            assert charts.count() == 2
            assert charts.nth(0).locator('polyline[data-policy="full"]').count() == 1
            box = charts.nth(0).bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 50
        finally:
            browser.close()
    # nothing is left running: later tests that call asyncio.run still can
    assert asyncio.run(asyncio.sleep(0, result="free")) == "free"
