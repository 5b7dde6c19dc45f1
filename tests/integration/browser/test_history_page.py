"""The history page (`ddlbench history report`, harness/report/history_page.py) opened in a real headless
Chromium (Debian's package, driven by Playwright): it loads without console errors, shows one plot per cell,
each plot an image the browser decoded, and the open changes table before the first plot.

    pytest -q tests/integration/browser/test_history_page.py     # ~10 s; needs `chromium` and playwright

Chromium comes from Debian (scripts/test.sh installs it), never from `playwright install`. Where it or
Playwright is missing the test is NOT RUN (loud), and fails under CI=true.
"""

from __future__ import annotations

import shutil

from click.testing import CliRunner

from harness.cli.main import cli
from harness.history import store, synthetic
from harness.history.rows import run_rows
from helpers import require

CELLS = ["resnet50-tiny:ddp", "resnet50-tiny:bsp-a2a", "bert-base-tiny:ddp"]


def _page(tmp_path):
    history = tmp_path / "history"
    runs = synthetic.series_runs(14, CELLS, spread=0.01, steps={CELLS[0]: (9, -0.10)}, seed=2)
    runs += synthetic.series_runs(4, CELLS, spread=0.01, seed=3, first=14, env={"cpu_model": "new cpu"})
    for t in runs:
        store.append(run_rows(t), history)
    out = tmp_path / "page" / "history.html"
    res = CliRunner().invoke(cli, ["history", "report", "--history", str(history), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_the_page_loads_in_chromium_without_console_errors_and_shows_one_plot_per_cell(tmp_path):
    chromium = shutil.which("chromium")
    require(chromium is not None, "Debian's chromium is not installed (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright is not installed (pip install -e '.[dev]')")
    page_file = _page(tmp_path)
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        plots = page.locator("figure.cell-plot img")
        assert plots.count() == len(CELLS)
        widths = [plots.nth(i).evaluate("img => img.complete && img.naturalWidth") for i in range(plots.count())]
        order = page.evaluate("() => [...document.querySelectorAll('table, figure')].map(e => e.tagName)")
        text = page.inner_text("body")
        browser.close()
    assert errors == []
    assert all(w and w > 100 for w in widths), widths
    assert order[0] == "TABLE"
    assert "open (confirmed)" in text and "git bisect start" in text and "new series" in text
