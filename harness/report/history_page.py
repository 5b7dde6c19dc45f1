"""The history page (`ddlbench history report --history DIR -o OUT.html`): one self-contained HTML file, asv
publish's job. First the changes (open ones first, with the commits to bisect), then per workload a panel of
small multiples: one plot per cell, its median throughput per run over commits with the 95% CI band, its
change points (red: confirmed, dashed: awaiting runs, grey: triaged) and its environment changes (a dotted
line where the fingerprint changed: a new series, coloured apart), captioned with what its latest series is
blind to (harness/history/blind.py: the smallest slowdown found and confirmed in >= 90% of series of its noise
and length, and what would bring it to 5%). Plots are PNGs inlined as data URIs.

    write_history_page("history/", "history.html")
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: the page is a file (must precede pyplot)
import matplotlib.pyplot as plt
import pandas as pd

from harness.core.atomic import write_text_atomic
from harness.history.blind import series_blind
from harness.history.markdown import blind_markdown, changes_markdown
from harness.history.scan import Scan, scan
from harness.report.figures import scheme_colors

STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}tr.open td{background:#fff0f0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:10px}
figure{margin:0;border:1px solid #eee;padding:4px}figcaption{font-size:12px}img{width:100%}
.blind{color:#666}"""


def cell_plot(rows: pd.DataFrame, changes: pd.DataFrame) -> bytes:
    """One cell's plot (rows: its ok history rows, every fingerprint, in order) as PNG bytes."""
    rows = rows.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(4.2, 2.4), dpi=80, layout="constrained")
    colors = scheme_colors(list(dict.fromkeys(rows["fingerprint"])))
    for fid, g in rows.groupby("fingerprint", sort=False, observed=True):
        ax.fill_between(
            g.index, g["throughput_ci95_low"], g["throughput_ci95_high"], color=colors[fid], alpha=0.25, linewidth=0
        )
        ax.plot(
            g.index,
            g["throughput_median"],
            ".-",
            color=colors[fid],
            markersize=3,
            linewidth=0.8,
            label=f"env {fid[:6]}",
        )
    where = dict(zip(rows["run_key"], rows.index))
    for c in changes.itertuples():
        if c.first_bad_run not in where:
            continue
        x = where[c.first_bad_run] - 0.5
        if c.kind == "environment":
            ax.axvline(x, color="black", linestyle=":", linewidth=1)
        else:
            color = "#c00000" if c.state == "open" else "#999999"
            ax.axvline(x, color=color, linestyle="-" if c.confirmed else "--", linewidth=1.2)
            ax.annotate(
                f"{c.size:+.0%}",
                (x, 1),
                xycoords=("data", "axes fraction"),
                fontsize=7,
                color=color,
                va="top",
                ha="left",
            )
    ticks = rows.index[:: max(1, len(rows) // 6)]
    ax.set_xticks(ticks, [str(rows.loc[i, "commit"])[:7] or str(i) for i in ticks], fontsize=6, rotation=30)
    ax.tick_params(axis="y", labelsize=7)
    unit = rows["sample_unit"].iloc[0] or "samples"
    ax.set_ylabel(f"{unit}/s (median)", fontsize=7)
    if rows["fingerprint"].nunique() > 1:
        ax.legend(fontsize=6, loc="lower left")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _one_row_per_machine_change(changes: pd.DataFrame) -> pd.DataFrame:
    """Environment changes of many cells at one run (a new runner) as one row naming how many cells."""
    env = changes[changes["kind"] == "environment"]
    if env.empty:
        return changes
    merged = (
        env.groupby(["first_bad_run", "detail"], sort=False)
        .agg(first=("cell", "first"), cells=("cell", "size"), series=("series", "first"))
        .reset_index()
    )
    rows = env.drop_duplicates(["first_bad_run", "detail"]).reset_index(drop=True)
    rows["cell"] = [f"{m.cells} cells" if m.cells > 1 else m.first for m in merged.itertuples()]
    rows["series"] = ["..." if m.cells > 1 else m.series for m in merged.itertuples()]
    return pd.concat([changes[changes["kind"] != "environment"], rows], ignore_index=True)


def _changes_table(changes: pd.DataFrame) -> str:
    if changes.empty:
        return "<p>No change points.</p>"
    changes = _one_row_per_machine_change(changes)
    head = "".join(
        f"<th>{h}</th>"
        for h in ("state", "cell", "size (95% CI)", "last good", "first bad", "runs after", "bisect / what changed")
    )
    body = []
    for c in changes.itertuples():
        size = f"{c.size:+.1%} ({c.size_low:+.1%} .. {c.size_high:+.1%})" if c.kind == "change" else "-"
        state = c.state + (
            " (confirmed)" if c.kind == "change" and c.confirmed else " (awaiting runs)" if c.kind == "change" else ""
        )
        what = f"<code>{html.escape(c.bisect)}</code>" if c.bisect else html.escape(c.detail or "same commit")
        after = int(c.runs_after) if c.kind == "change" else "-"
        cells = [state, f"{c.cell} [{c.series}]", size, str(c.last_good)[:12], str(c.first_bad)[:12], after]
        body.append(
            f'<tr class="{c.state}">'
            + "".join(f"<td>{html.escape(str(v))}</td>" for v in cells)
            + f"<td>{what}{(' ' + html.escape(c.reason)) if c.reason else ''}</td></tr>"
        )
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def blind_caption(row) -> str:
    """A plot's caption line on what its series cannot show (blind.py), e.g. "blind below 12% (noise 2.6%,
    10 runs); 5% needs about 22 more runs at this level"."""
    if row is None:
        return ""
    noise = "" if pd.isna(row.noise) else f" (noise {row.noise:.1%} run to run, {int(row.runs)} runs)"
    return f"{row.label}{noise}" + (f"; {row.advice}" if row.advice else "")


def history_html(found: Scan, title: str, blind: pd.DataFrame | None = None) -> str:
    """The page's HTML (module docstring); `blind`: blind.series_blind of `found` (the plots' captions)."""
    by_series = {} if blind is None else {r.series: r for r in blind.itertuples()}
    ch = found.changes
    opened = ch[(ch["state"] == "open") & (ch["kind"] == "change")]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<p>{len(found.series)} series (a cell on one environment), {len(found.rows)} ok cell-runs (a cell "
        f"in a run); {len(opened)} open changes.</p>",
        *(f"<p class='problem'>skipped: {html.escape(p)}</p>" for p in found.problems),
        "<h2>Changes</h2>",
        _changes_table(ch),
    ]
    rows = found.rows.sort_values(["run_utc", "position"], kind="stable")
    for workload, w in rows.groupby("workload", sort=True, observed=True):
        parts.append(f"<h2>{html.escape(workload)}</h2><div class='grid'>")
        for key, cell in w.groupby("cell_key", sort=True, observed=True):
            png = base64.b64encode(cell_plot(cell, ch[ch["series"].isin(set(cell["series"]))])).decode("ascii")
            label = cell["cell"].iloc[-1]
            caption = blind_caption(by_series.get(cell["series"].iloc[-1]))
            parts.append(
                f"<figure class='cell-plot' data-cell='{html.escape(key, quote=True)}'>"
                f"<img alt='{html.escape(label, quote=True)}' src='data:image/png;base64,{png}'>"
                f"<figcaption>{html.escape(label)}"
                + (f"<br><span class='blind'>{html.escape(caption)}</span>" if caption else "")
                + "</figcaption></figure>"
            )
        parts.append("</div>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_history_page(history, output, title: str = "ddlbench history") -> Path:
    """Scan the history folder and write its page to `output`; also `output` with .md: the changes as Markdown."""
    found = scan(history)
    blind = series_blind(history, found)
    output = Path(output)
    write_text_atomic(output, history_html(found, title, blind))
    md = changes_markdown(found.changes, len(found.series), len(found.rows)) + "\n" + blind_markdown(blind, True)
    write_text_atomic(output.with_suffix(".md"), md)
    return output
