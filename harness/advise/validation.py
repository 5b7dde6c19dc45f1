"""The advise validation's pieces (scripts/reports/advise_validation.py runs it): the exhaustive sweep of every
candidate advise considers, and the regret of its pick against the exhaustive best, by sustained throughput."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from harness.advise.candidates import Candidate
from harness.networks.profiles import rate_label
from harness.predict.predictor import SEVEN_METHODS
from harness.schemes import SCHEMES
from harness.testbed import netns

METHODS = ["ddp", *SEVEN_METHODS, "dear", "fsdp"]


BATCH = {"resnet50-tiny": 64, "bert-base-tiny": 8}  # the showcase's: resnet50-tiny the high-intensity model


RATES = ("200mbit", "2gbit")


WARMUP = 5


@dataclass(frozen=True)
class Setting:
    workload: str
    hosts: int
    rate: str | None
    """tbf rate of the testbed; None = this box (a check of the script, not the validation)."""

    @property
    def name(self) -> str:
        return f"{self.workload}-{self.hosts}host-{self.rate}" if self.rate else f"{self.workload}-box{self.hosts}"

    @property
    def network(self) -> str:
        return rate_label(netns.parse_rate(self.rate)) if self.rate else "loopback"


def grid_knobs(schemes: list[str], full: bool) -> dict:
    """scheme -> {knob: [values]} for a sweep file: the declared Grid of each knob that has one, so the
    file's matrix is exactly the candidates' grid (Knobs.grid())."""
    out = {}
    for s in schemes:
        spec = SCHEMES.get(s).knobs
        lists = {k: [kn.default, *(v for v in kn.grid if v != kn.default)] for k, kn in spec.items() if kn.grid}
        if lists and full:
            out[s] = lists
    return out


def exhaustive_sweep(workload: str, hosts: int, schemes: list[str], full: bool, iters: int, rates, box: bool) -> dict:
    """The sweep file measuring every candidate of `workload` at `hosts` workers, on each rate."""
    out = {
        "name": f"advise-validation-{workload}-{hosts}host",
        "workloads": [workload],
        "schemes": schemes,
        "backends": ["torch"],
        "workers": [hosts],
        "servers": [1],
        "server_hosts": ["colocated"],
        "batch": BATCH.get(workload),
        "warmup": WARMUP,
        "iters": iters,
        "baseline": False,
        "timeout_s": 600,
        "knobs": grid_knobs(schemes, full),
    }
    if not box:
        out["testbed"] = {"hosts": hosts}
        out["networks"] = {rate_label(netns.parse_rate(r)): {"rate": r} for r in rates}
    return {k: v for k, v in out.items() if v is not None}


def _parse_name(stem: str) -> tuple[str, int]:
    body = stem.removeprefix("advise-validation-").removesuffix("-box")
    wl, _, hosts = body.rpartition("-")
    return wl, int(hosts.removesuffix("host"))


def sustained(df: pd.DataFrame) -> pd.Series:
    """Samples per second a cell sustained: global batch / mean iteration time (total samples over total
    time). Not the mean of per-iteration throughputs, which overweights fast iterations: ByteScheduler
    pipelines one iteration's communication into the next, its iterations vary by 20% and more, and
    that mean ranks it above methods that finish the same run sooner."""
    return df["global_batch"] / df["iter_s_mean"]


def regret_row(
    s: Setting,
    exhaustive: pd.DataFrame,
    pick: dict,
    measured: int,
    advise_wall_s: float,
    pred: pd.DataFrame | None = None,
) -> dict:
    """One line of the table (pure): exhaustive best and advise's pick, both as measured in the exhaustive
    run (sustained throughput), at the setting's network."""
    here = exhaustive[exhaustive["network"] == s.network]
    ok = here[here["status"] == "ok"]
    x = sustained(ok)
    best = ok.loc[x.idxmax()]
    same = ok[(ok["scheme"] == pick["scheme"]) & (ok["servers"].fillna(0).astype(int) == int(pick["servers"]))]
    same = same[[json.loads(k) == json.loads(pick["knobs_json"]) for k in same["knobs_json"]]]
    picked = float(x[same.index[0]]) if len(same) else float("nan")
    return {
        "setting": s.name,
        "grid": len(here),
        "exhaustive_best": _label(best),
        "best_samples_per_s": float(x.max()),
        "advise_pick": pick["label"],
        "pick_samples_per_s": picked,
        "regret": 1 - picked / float(x.max()),
        "measured": measured,
        "share_measured": measured / max(1, len(here)),
        "advise_wall_s": advise_wall_s,
        "exhaustive_wall_s": float(ok["wall_s"].sum()),
        **_model_on(best, pred),
    }


def _model_on(best, pred: pd.DataFrame | None) -> dict:
    """Where the model put the exhaustive best: its predicted rank and the error of its predicted
    iteration time against the exhaustive measurement (the cause when the regret goal fails)."""
    label = _label(best)
    if pred is None or label not in set(pred["label"]):
        return {"best_pred_rank": float("nan"), "best_pred_error": float("nan")}
    r = pred[pred["label"] == label].iloc[0]
    return {
        "best_pred_rank": int(r["rank"]),
        "best_pred_error": float(r["pred_iter_s"]) / float(best["iter_s_mean"]) - 1,
    }


def _label(row) -> str:
    servers = int(row["servers"]) if row["servers"] == row["servers"] else 0
    return Candidate(
        row["scheme"],
        row["backend"],
        json.loads(row["knobs_json"]),
        servers,
        row["server_hosts"] if servers else "auto",
    ).label


def render(t: pd.DataFrame, missing: list[str] = (), analysis: bool = False) -> str:
    lines = [
        "# `ddlbench advise` against brute force",
        "",
        "Generated by `python scripts/reports/advise_validation.py run` (goal: regret <= 5% in every setting while "
        "measuring <= 25% of the grid).",
        "",
        "| setting | exhaustive best | advise's pick | regret | measured / grid | advise wall | exhaustive wall "
        "| model on the best: rank, time error |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in t.itertuples():
        lines.append(
            f"| {r.setting} | {r.exhaustive_best} ({r.best_samples_per_s:.1f}/s) | {r.advise_pick} "
            f"({r.pick_samples_per_s:.1f}/s) | {r.regret * 100:.1f}% | {r.measured} / {r.grid} "
            f"({r.share_measured:.0%}) | {r.advise_wall_s:.0f} s | {r.exhaustive_wall_s:.0f} s "
            f"| {r.best_pred_rank:.0f}, {r.best_pred_error * 100:+.0f}% |"
        )
    failed = t[(t["regret"] > 0.05) | (t["share_measured"] > 0.25)]
    for r in failed.itertuples():
        lines.append(
            f"\n{r.setting} misses the goal (regret {r.regret * 100:.1f}%, {r.share_measured:.0%} measured): "
            f"the model put the exhaustive best {r.exhaustive_best} at predicted rank {r.best_pred_rank:.0f}, its "
            f"predicted time {r.best_pred_error * 100:+.0f}% off the measured; see runs/advise-{r.setting}/"
            f"advise/report.md for the model's ranking beside the measurements."
        )
    if len(t):
        worst = t.loc[t["regret"].idxmax()]
        lines += ["", f"Worst setting: {worst['setting']} (regret {worst['regret'] * 100:.1f}%)."]
    if missing:
        lines += ["", f"Not in these runs (no exhaustive or no advise run stored): {', '.join(missing)}."]
    if analysis:
        lines += ["", "Why, setting by setting, and what the model got wrong: [ANALYSIS.md](ANALYSIS.md)."]
    return "\n".join(lines) + "\n"
