"""The advise report, Markdown from the tables (pure): the recommendation, predicted vs measured for every
measured candidate, why the winner wins, the predicted ranking of the rest, and how to reproduce it."""

from __future__ import annotations

import math

import pandas as pd
import yaml

from harness.advise.recommend import Recommendation

_WHY = [
    ("forward_s", "forward"),
    ("backward_s", "backward"),
    ("comm_wait_s", "wait after backward"),
    ("forward_wait_s", "wait in next forward"),
    ("optimizer_s", "optimizer"),
    ("exposed_comm_s", "exposed communication"),
    ("comm_only_s", "communication alone (probe)"),
    ("overlap_ratio", "overlap ratio"),
    ("comm_bytes_per_iter", "gradient bytes per iteration"),
    ("net_bytes_per_iter", "bytes through the interface per iteration"),
]


def _ms(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 1000:.1f}"


def _num(v, fmt=".3g") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def measured_table(pred: pd.DataFrame, meas: pd.DataFrame) -> list[str]:
    """Predicted vs measured, one line per measured candidate, fastest measured first."""
    j = meas.merge(pred[["label", "rank", "pred_iter_s"]], on="label", how="left").sort_values("iter_s_mean")
    lines = [
        "| candidate | predicted rank | predicted ms | measured ms (95% CI) | CI half width | iterations (tries) "
        "| prediction error |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for r in j.itertuples():
        if r.status != "ok":
            lines.append(f"| {r.label} | {r.rank} | {_ms(r.pred_iter_s)} | failed: {r.reason[:80]} | | | |")
            continue
        err = (r.pred_iter_s - r.iter_s_mean) / r.iter_s_mean * 100
        lines.append(
            f"| {r.label} | {r.rank} | {_ms(r.pred_iter_s)} | {_ms(r.iter_s_mean)} ({_ms(r.iter_s_ci95_low)}-"
            f"{_ms(r.iter_s_ci95_high)}) | {r.rel_half_width * 100:.1f}% | {r.iters} ({r.tries}) | {err:+.0f}% |"
        )
    return lines


def why(rec: Recommendation, pred: pd.DataFrame) -> list[str]:
    """The winner's measured breakdown beside the reference's (and the runner-up's), and what the model
    said about them: where the time goes, how much communication hid behind compute, bytes moved."""
    cols = [m for m in (rec.winner, rec.runner_up, rec.reference) if m is not None and m.row]
    cols = [m for i, m in enumerate(cols) if m not in cols[:i]]
    head = "| per iteration | " + " | ".join(m.candidate.label for m in cols) + " |"
    lines = [head, "|---|" + "---:|" * len(cols)]
    for key, what in _WHY:
        vals = [m.row.get(key, math.nan) for m in cols]
        if all(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals):
            continue
        unit = "" if key in ("overlap_ratio",) or "bytes" in key else " (ms)"
        fmt = (
            (lambda v: _num(v, ".2f"))
            if key == "overlap_ratio"
            else ((lambda v: _num(v / 2**20, ".2f") + " MiB") if "bytes" in key else _ms)
        )
        lines.append(f"| {what}{unit} | " + " | ".join(fmt(v) for v in vals) + " |")
    p = pred.set_index("label")
    lines.append(
        "| model: exposed communication (ms) | "
        + " | ".join(
            _ms(p.loc[m.candidate.label, "pred_exposed_comm_s"]) if m.candidate.label in p.index else "-" for m in cols
        )
        + " |"
    )
    lines.append(
        "| model: overlap ratio | "
        + " | ".join(
            _num(p.loc[m.candidate.label, "pred_overlap_ratio"], ".2f") if m.candidate.label in p.index else "-"
            for m in cols
        )
        + " |"
    )
    return lines


def rest_table(pred: pd.DataFrame, measured_labels: set[str], limit: int = 40) -> list[str]:
    rest = pred[~pred["label"].isin(measured_labels)]
    lines = ["| predicted rank | candidate | predicted ms | exposed comm ms | overlap |", "|---:|---|---:|---:|---:|"]
    for r in rest.head(limit).itertuples():
        lines.append(
            f"| {r.rank} | {r.label} | {_ms(r.pred_iter_s)} | {_ms(r.pred_exposed_comm_s)} | "
            f"{_num(r.pred_overlap_ratio, '.2f')} |"
        )
    if len(rest) > limit:
        lines.append(f"| ... | {len(rest) - limit} more in predicted.csv | | | |")
    return lines


def render(
    rec: Recommendation,
    pred: pd.DataFrame,
    meas: pd.DataFrame,
    context: dict,
    skipped: dict[str, str],
    winner_sweep: dict,
    winner_path: str,
    run_dir: str,
) -> str:
    """The whole report. context: setting name -> text (workload, placement, inputs, wall time...)."""
    out = ["# ddlbench advise", "", f"**{rec.line()}**", ""]
    out += [f"- {k}: {v}" for k, v in context.items()]
    out += [
        "",
        "## Measured: predicted vs measured",
        "",
        "Each candidate ran until the 95% CI of its mean iteration time (slowest rank per iteration) was within "
        "the target, a try reached the iteration bound, or the budget left no room for a longer try; every try is a "
        "cell of the run directory.",
        "",
    ]
    out += measured_table(pred, meas)
    if rec.verdict is not None:
        v = rec.verdict
        out += [
            "",
            f"The best two overlapped, so they were measured again in {v.rounds - 1} alternated rounds: "
            f"time ratio {v.ratio:.3f} (95% CI {v.low:.3f}-{v.high:.3f}) over {v.rounds} pairs: "
            + ("**statistically tied**." if v.tied else "the winner is faster beyond doubt."),
        ]
    out += ["", "## Why the winner wins", "", *why(rec, pred)]
    out += ["", "## Predicted ranking of the candidates not measured", "", *rest_table(pred, set(meas["label"]))]
    if skipped:
        out += [
            "",
            "Not ranked (measure them by hand if they matter): " + "; ".join(f"{k}: {v}" for k, v in skipped.items()),
        ]
    out += [
        "",
        "## Reproduce the winner",
        "",
        f"    ddlbench sweep {winner_path} --output results/winner",
        "",
        "```yaml",
        yaml.safe_dump(winner_sweep, sort_keys=False).rstrip(),
        "```",
        "",
        f"Run directory of every measured cell: `{run_dir}` (`ddlbench show {run_dir}`).",
    ]
    return "\n".join(out) + "\n"
