"""The study report's sections on the 2019 stacks' own costs (docs/ARCHITECTURE.md, "Predictor"): what each
mechanism does to the ranking (harness/study/curve.mechanism_effects), interval widths per network and
method, per-collective start-up against the authors' fits (cluster.startup_rows), and the two
microbenchmarks behind the new inputs (scripts/reference/gil_handoff.py, zmq_van.py). Pure: tables in,
Markdown out."""

from __future__ import annotations

import pandas as pd


def mechanism_table(effects: pd.DataFrame) -> str:
    """One row per mechanism and size: rows whose winner changes, who gains and loses most with it in."""
    lines = [
        "| mechanism | GPUs | winner changed | best with it | best without it | gains most | loses most | "
        "cell moved most |",
        "|---|---:|---:|---|---|---|---|---|",
    ]
    for r in effects.itertuples():
        gain = f"{r.gains_most} {r.gains_most_change:+.1%}" if r.gains_most_change > 0.0005 else "-"
        lose = f"{r.loses_most} {r.loses_most_change:+.1%}" if r.loses_most_change < -0.0005 else "-"
        far = f"{r.largest_cell} {r.largest_change:+.1%}" if abs(r.largest_change) > 0.0005 else "-"
        lines.append(
            f"| {r.mechanism} | {r.workers} | {r.winner_changed} of {r.rows} | {r.best_with} | "
            f"{r.best_without} | {gain} | {lose} | {far} |"
        )
    return "\n".join(lines)


def mechanism_changes(effects: pd.DataFrame) -> list[str]:
    """The rows whose best method a mechanism changes, one line per mechanism and size."""
    out = []
    for r in effects.itertuples():
        if r.changed:
            out.append(f"{r.mechanism}, {r.workers} GPUs: {r.changed} (without it -> with it)")
    return out


def width_table(df: pd.DataFrame, methods: list[str]) -> str:
    """Median interval width (pred_high - pred_low over the prediction) per network and method."""
    d = df[df["scheme"].isin(methods)].assign(width=lambda x: (x["pred_high"] - x["pred_low"]) / x["throughput_median"])
    t = d.pivot_table(index="scheme", columns="network", values="width", aggfunc="median").reindex(methods)
    nets = list(t.columns)
    lines = ["| method | " + " | ".join(nets) + " |", "|---|" + "---:|" * len(nets)]
    for m, row in t.iterrows():
        lines.append(f"| {m} | " + " | ".join(f"{row[n]:.0%}" for n in nets) + " |")
    overall = d.groupby("network")["width"].median()
    lines.append("| all | " + " | ".join(f"**{overall[n]:.0%}**" for n in nets) + " |")
    return "\n".join(lines)


def startup_table(rows: list[dict]) -> str:
    """Per-collective start-up: this model against the authors' fits and NCCL 2.4's tuning model."""
    lines = [
        "| network | GPUs | model: NCCL 4 KB | + Horovod round | + launch | = model | authors' fit | their "
        "table | their cluster | NCCL 2.4 tuning latency |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    us = lambda s: f"{s * 1e6:.0f} us"
    for r in rows:
        lines.append(
            f"| {r['network']} | {r['workers']} | {us(r['nccl_s'])} | {us(r['negotiation_s'])} | "
            f"{us(r['launch_s'])} | **{us(r['model_s'])}** | {us(r['authors_fit_s'])} | "
            f"{us(r['authors_table_s'])} | {r['authors_cluster']} | {us(r['nccl24_model_s'])} |"
        )
    return "\n".join(lines)


def gil_lines(gil: dict) -> list[str]:
    """The GIL microbenchmark's figures, one line each."""
    out = []
    for h in gil["handoff"]:
        if h["switch_ms"] == 5.0:
            out.append(
                f"hand-off against {h['spinners']} spinning thread(s) whose poll {h['poll']}: median wait "
                f"{h['median_s'] * 1e3:.3f} ms (10th-90th percentile {h['p10_s'] * 1e3:.3f}-"
                f"{h['p90_s'] * 1e3:.3f}) at the default 5 ms switch interval"
            )
    keeps = {h["switch_ms"]: h["median_s"] for h in gil["handoff"] if h["spinners"] == 1 and h["poll"] == "keeps GIL"}
    if keeps:
        out.append(
            "against one spinner that keeps the GIL, by switch interval: "
            + ", ".join(f"{sw:g} ms -> {w * 1e3:.2f} ms" for sw, w in sorted(keeps.items()))
        )
    for d in gil["drain"]:
        out.append(
            f"with the hook's work in flight for {d['done_ms']:g} ms: wait {d['median_s'] * 1e3:.3f} ms "
            f"(the poller gives the GIL up when its queue empties)"
        )
    for a in gil.get("autograd", []):
        out.append(
            f"torch's autograd engine, {a['backward_alone_per_layer_s'] * 1e6:.0f} us a layer, hooks as the "
            f"plugin registers them: the spinner won the race in {a['convoy_share']:.0%} of "
            f"{a['trials']} trials, then each hooked layer waited {a['convoy_intervals_per_hook']:.2f} "
            f"switch intervals"
        )
    c = gil["python_costs"]
    out.append(
        f"Python per partition on the hook {c['task_per_partition_s'] * 1e6:.1f} us, per finished handle "
        f"{c['done_per_handle_s'] * 1e6:.1f} us, per step of the optimizer's name search "
        f"{c['scan_step_s'] * 1e6:.2f} us, per torch op {c['torch_op_s'] * 1e6:.2f} us (CPython "
        f"{gil.get('python', '?')})"
    )
    for name, f in gil.get("forward", {}).items():
        out.append(f"{name}: {f['torch_calls']} torch calls in a forward, {f['per_layer']:.2f} per layer")
    return out


def van_lines(van: dict) -> list[str]:
    """The ZeroMQ van microbenchmark's figures."""
    return [
        f"one ZeroMQ I/O thread, 4,096,000-byte messages over loopback: {van['one-way_gbyte_s_best']:.2f} GB/s "
        f"one way, {van['both_gbyte_s_best']:.2f} GB/s with pushes and pulls at once (runs: "
        + ", ".join(f"{x:.2f}" for x in van["both_gbyte_s_all"])
        + ")"
    ]
