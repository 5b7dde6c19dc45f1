"""The README's picture of the history page: a small synthetic history (two workloads, three cells each, one
10% slowdown confirmed, one expected 6% change, a machine change for every cell), its page written by
`ddlbench history report`, and a screenshot taken in Debian's headless Chromium through Playwright.

    python scripts/reports/history_screenshot.py                      # -> reports/history/page.png
    python scripts/reports/history_screenshot.py --history DIR -o OUT.png   # a real history's page instead

Needs `chromium` on PATH (apt-get install -y chromium) and playwright (pip install -e '.[dev]').
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.history import store, synthetic  # noqa: E402
from harness.history.rows import run_rows  # noqa: E402
from harness.history.scan import scan  # noqa: E402
from harness.report.history_page import write_history_page  # noqa: E402

CELLS = [
    "resnet50-tiny:ddp",
    "resnet50-tiny:bsp-a2a",
    "resnet50-tiny:wfbp-a2a",
    "bert-base-tiny:ddp",
    "bert-base-tiny:mgwfbp",
    "bert-base-tiny:bytescheduler-a2a",
]


def synthetic_history(history: Path) -> None:
    steps = {CELLS[1]: (22, -0.10), CELLS[4]: (12, 0.06)}
    runs = synthetic.series_runs(30, CELLS, spread=0.012, steps=steps, seed=7)
    runs += synthetic.series_runs(
        8,
        CELLS,
        spread=0.012,
        steps={k: (0, v[1]) for k, v in steps.items()},
        seed=8,
        first=30,
        env={"cpu_model": "a newer cpu"},
        level_s=0.085,
    )
    for t in runs:
        store.append(run_rows(t), history)
    expected = scan(history).changes.query("kind == 'change' and size > 0").iloc[0]
    (history / "annotations.yaml").write_text(
        f"version: 1\nchanges:\n- series: {expected['series']}\n  commit: {expected['first_bad'][:12]}\n"
        f"  state: expected\n  reason: mgwfbp merges by the fitted alpha since this commit\n"
    )


def screenshot(page_file: Path, png: Path, width: int = 1280) -> None:
    from playwright.sync_api import sync_playwright  # optional (dev extra): only this script and its test need it

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("chromium is not installed: apt-get install -y chromium")
    png.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(page_file.resolve().as_uri())
        page.screenshot(path=str(png), full_page=True)
        browser.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=Path, help="a history folder (default: a synthetic one)")
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "reports" / "history" / "page.png")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        history = args.history
        if history is None:
            history = Path(tmp) / "history"
            synthetic_history(history)
        page = write_history_page(history, Path(tmp) / "history.html", title="ddlbench history (synthetic example)")
        screenshot(page, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
