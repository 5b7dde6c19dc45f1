"""Write a report: PNG figures, report.md, and one self-contained report.html (images inlined).

    from harness.report.render import write_report
    write_report([load_run("results/a"), load_run("results/b")], Path("reports/NAME"))

The page is built once as a list of blocks (heading, paragraph, image, table, details) and rendered
twice, to Markdown (images by relative path) and to HTML (images as base64 PNG data URIs, tables as
HTML, no external CSS/JS), so the two never disagree.
"""

from __future__ import annotations

import base64
import datetime
import html
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.core.atomic import write_parquet_atomic, write_text_atomic
from harness.report import breakdown as B
from harness.report import figures as F
from harness.report import figures_model as FM
from harness.report import tables as T
from harness.report import timeline as TL
from harness.report.data import merge, predicted
from harness.report.findings import findings
from harness.results.machine_load import busy_runs
from harness.results.summarize import short_of_precision


@dataclass
class Page:
    title: str
    blocks: list = field(default_factory=list)

    def h(self, text: str) -> None:
        self.blocks.append(("h", text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def img(self, file: str, caption: str) -> None:
        self.blocks.append(("img", file, caption))

    def table(self, df: pd.DataFrame) -> None:
        self.blocks.append(("table", df))

    def details(self, summary: str, text: str) -> None:
        self.blocks.append(("details", summary, text))


FIGURES = [
    # (file, caption, section)
    (
        "throughput.png",
        "Throughput vs workers per scheme; star at N=1: the measured 1-worker throughput "
        "without communication (X₁); dashed: ideal N·X₁. Markers: median over iterations (slowest rank per "
        "iteration), each scheme its own marker and shifted slightly sideways so schemes at one N stay "
        "apart; vertical bars: 95% CI of the mean.",
        "Scaling",
    ),
    (
        "efficiency.png",
        "Scaling efficiency X_N / (N·X₁) at each workload's largest worker count (X = median throughput).",
        "Scaling efficiency",
    ),
    (
        "bars.png",
        "Median throughput per scheme, grouped per network (at the largest N) when the runs "
        "cover several networks, else per worker count; black bars: 95% CI of the mean.",
        "Per scheme",
    ),
    (
        "breakdown.png",
        "Per cell: medians of the slowest rank's forward, backward, communication wait "
        "and optimizer times, and, where measured, the wait inside forward (ByteScheduler's pre-hooks wait "
        "there for the previous iteration's partitions); tick: median iteration; exposed communication = "
        "median iteration - 1-worker compute-only iteration.",
        "Time breakdown",
    ),
]


def write_report(
    runs: list, out_dir: Path, title: str | None = None, dpi: int = 100, timelines: tuple = ()
) -> dict[str, Path]:
    """Render the runs (RunTables-like objects) into out_dir; returns {"md", "html", <png name>: path}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    merged, notes = merge(runs)
    s, environment, cb = merged["summary"], merged["environment"], merged["commbench"]
    names = [str(getattr(r, "path", f"run{i}")) for i, r in enumerate(runs)]
    page = Page(title or f"ddlbench report: {', '.join(Path(n).name for n in names)}")
    _intro(page, names, notes, s, environment)
    out: dict[str, Path] = {}

    def save(fig, file: str) -> None:
        fig.savefig(out_dir / file, dpi=dpi)
        F.plt.close(fig)
        out[file] = out_dir / file

    _findings_section(page, s, save)
    _measured_sections(page, s, save)
    TL.section(page, runs, list(timelines), save)  # traced cells (chosen, else the first few)
    _model_sections(page, s, cb, save)
    _table_sections(page, s, environment)
    if not s.empty:  # the full table (the page shows a laptop-wide one)
        write_parquet_atomic(s, out_dir / "summary.parquet")
        write_text_atomic(out_dir / "summary.csv", s.to_csv(index=False))
        out["summary.csv"] = out_dir / "summary.csv"
    (out_dir / "report.md").write_text(to_markdown(page))
    (out_dir / "report.html").write_text(to_html(page, out_dir))
    out["md"], out["html"] = out_dir / "report.md", out_dir / "report.html"
    return out


def _intro(page: Page, names: list[str], notes: list[str], s: pd.DataFrame, environment: pd.DataFrame) -> None:
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    page.p(f"Generated {now} from {len(names)} input(s): " + ", ".join(f"`{n}`" for n in names) + ".")
    page.p(
        "How to read the numbers: X is throughput in samples/s (images or sequences) = global batch / "
        "iteration time, where an iteration takes as long as its slowest rank. Medians and IQRs "
        "describe the spread over iterations; CIs are 95% confidence intervals of the mean "
        "(Student t). Scaling efficiency E(N) = X_N / (N·X₁) with X₁ measured in the same sweep."
    )
    for n in notes:
        page.p(f"Note: {n}.")
    checks = busy_runs(environment) + (T.sanity_checks(s) if not s.empty else []) + short_of_precision(s)
    if checks:
        page.h("Checks")
        for c in checks:
            page.p(f"Warning: {c}.")


def _findings_section(page: Page, s: pd.DataFrame, save) -> None:
    """The study's two findings, each stated from these runs' numbers with its figure (findings.py)."""
    if s.empty:
        return
    page.h("Findings")
    for b in findings(s):
        if b[0] == "p":
            page.p(b[1])
        else:
            save(b[1], b[2])
            page.img(b[2], b[3])


def _measured_sections(page: Page, s: pd.DataFrame, save) -> None:
    """Figures (a)-(d) of the measured cells, and the failed ones."""
    fns = [F.throughput_vs_workers, F.efficiency_heatmap, lambda d: F.grouped_bars(d, "throughput"), B.breakdown]
    if s.empty:
        page.h("Measured cells")
        page.p(
            "No summary table in these runs (a commbench-only run?): the scaling, efficiency, per-scheme "
            "and breakdown panels are skipped."
        )
        return
    for (file, caption, section), fn in zip(FIGURES, fns):
        page.h(section)
        save(fn(s), file)
        page.img(file, caption)
    _failed_section(page, s)


def _model_sections(page: Page, s: pd.DataFrame, cb: pd.DataFrame, save) -> None:
    """(e) commbench with its alpha-beta fit and (f) predicted vs measured."""
    page.h("Communication micro-benchmark")
    if cb.empty:
        page.p(
            "No commbench table in these runs (commbench.parquet absent): the busbw vs message size panel is skipped."
        )
    else:
        save(FM.busbw_vs_size(cb), "busbw.png")
        page.img(
            "busbw.png",
            "Bus bandwidth vs message size (median over repetitions; log x) with the "
            "least-squares alpha-beta fit t = α + β·size.",
        )
        page.table(T.fits_table(FM.commbench_fits(cb)))
    page.h("Predicted vs measured")
    if s.empty or predicted(s).empty:
        page.p("No predicted rows (source=predicted) in these runs: panel skipped.")
        return
    save(FM.predicted_vs_measured(s), "predicted.png")
    page.img(
        "predicted.png",
        "Throughput predicted by the simulator (dashed) over the measured one (solid); X = median throughput.",
    )
    errs = FM.prediction_errors(s)
    if len(errs):
        page.table(T.prediction_table(errs))


def _table_sections(page: Page, s: pd.DataFrame, environment: pd.DataFrame) -> None:
    if not s.empty:
        page.h("Summary")
        table, caption = T.summary_table(s, environment)
        page.p(caption + " Every column of every cell: `summary.csv` and `summary.parquet` beside this page.")
        page.table(table)
        wl = T.workload_table(s)
        if len(wl):
            page.h("Workloads")
            page.table(wl)
    page.h("Environment")
    if environment.empty:
        page.p("No environment table in these runs.")
    else:
        page.table(T.environment_table(environment, s))


def _network_section(page: Page, s: pd.DataFrame) -> None:
    """Multi-node cells whose bytes went through another interface than they named (netcheck.py)."""
    if s.empty or "net_check" not in s or not (s["net_check"] == "wrong-interface").any():
        return
    page.h("Network check")
    page.p(
        "These cells' traffic did not go mainly through the interface their network profile names: their "
        "rows do not measure the network they are labelled with."
    )
    bad = s[s["net_check"] == "wrong-interface"]
    page.table(bad[["cell_id", "network", "iface", "net_main_iface", "net_iface_share"]])


def _failed_section(page: Page, s: pd.DataFrame) -> None:
    _network_section(page, s)
    page.h("Failed cells")
    bad = s[s["status"] != "ok"] if not s.empty else s
    if bad.empty:
        page.p("None: every cell finished.")
        return
    page.p(f"{len(bad)} cell(s) failed; they appear as 'failed' in the figures and are listed here.")
    page.table(T.failed_table(bad))
    for _, r in bad.iterrows():
        tail = str(r.get("log_tail") or "").strip()
        if tail:
            page.details(f"log tail of {r['cell_id']}", tail[-3000:])


# ------------------------------------------------------------------------------------------ writers


def _md_cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return str(v).replace("|", "\\|").replace("\n", " ")


def to_markdown(page: Page) -> str:
    lines = [f"# {page.title}", ""]
    for b in page.blocks:
        if b[0] == "h":
            lines += [f"## {b[1]}", ""]
        elif b[0] == "p":
            lines += [b[1], ""]
        elif b[0] == "img":
            lines += [f"![{b[2]}]({b[1]})", "", f"*{b[2]}*", ""]
        elif b[0] == "table":
            df = b[1]
            lines.append("| " + " | ".join(map(str, df.columns)) + " |")
            lines.append("|" + "---|" * len(df.columns))
            for row in df.itertuples(index=False):
                lines.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
            lines.append("")
        elif b[0] == "details":
            lines += [f"<details><summary>{html.escape(b[1])}</summary>", "", "```", b[2], "```", "", "</details>", ""]
    return "\n".join(lines)


CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}h1{font-size:1.5em}h2{font-size:1.2em;
border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}img{max-width:100%;height:auto}
figure{margin:1em 0}figcaption{font-size:.85em;color:#555}table{border-collapse:collapse;font-size:.8em;
margin:.6em 0;display:block;overflow-x:auto}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;
white-space:nowrap}th{background:#f4f4f4}tr:nth-child(even) td{background:#fafafa}code,pre{background:#f6f6f6}
pre{padding:.6em;overflow-x:auto;font-size:.8em}td.failed{color:#b00020;font-weight:600}"""


def _inline(text: str) -> str:
    """Escape, then render `code` spans (the only inline markup the paragraphs use)."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(page: Page, img_dir: Path) -> str:
    body = [f"<h1>{html.escape(page.title)}</h1>"]
    for b in page.blocks:
        if b[0] == "h":
            body.append(f"<h2>{html.escape(b[1])}</h2>")
        elif b[0] == "p":
            body.append(f"<p>{_inline(b[1])}</p>")
        elif b[0] == "img":
            data = base64.b64encode((img_dir / b[1]).read_bytes()).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(b[2])}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(b[2])}</figcaption></figure>"
            )
        elif b[0] == "table":
            body.append(_html_table(b[1]))
        elif b[0] == "details":
            body.append(f"<details><summary>{html.escape(b[1])}</summary><pre>{html.escape(b[2])}</pre></details>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(page.title)}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _html_table(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = []
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            text = "-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
            cls = ' class="failed"' if text == "failed" else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
