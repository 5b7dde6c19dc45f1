"""The report's network-model figures: pure functions DataFrame -> matplotlib Figure.

    fits = commbench_fits(commbench)              # alpha, beta per (collective, backend, N, network)
    fig = busbw_vs_size(commbench)                # (e) busbw vs message size (log x) with the fit line
    fig = predicted_vs_measured(summary)          # (f) source=predicted rows over the measured ones
    tab = prediction_errors(summary)              # the same pairs as a table

The alpha-beta fit is the harness's own (harness.grouping.cost.fit_alpha_beta, least squares of
t = alpha + beta * bytes on the median time per size): the model MG-WFBP plans with (harness.grouping.rules.merge_plan).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from harness.grouping.cost import fit_alpha_beta
from harness.measure.stats import busbw_factor
from harness.report.data import match_predicted, measured, ok, predicted, with_series
from harness.report.figures import _no_data, _panels, _series_order, _unit, plt, scheme_colors

SERIES_KEYS = ["collective", "backend", "workers", "network"]


def _bytes(v: float, _pos=None) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024:
            return f"{v:.0f} {unit}"
        v /= 1024
    return f"{v:.0f} TiB"


def commbench_fits(cb: pd.DataFrame) -> pd.DataFrame:
    """Per (collective, backend, workers, network): alpha (s), beta (s/byte), 1/beta in Gbit/s, sizes,
    and where the fit came from: the table's own fit_alpha_s/fit_beta_s_per_byte columns when the
    commbench stored them, else fitted here on the per-size median times."""
    rows = []
    if cb is None or cb.empty:
        return pd.DataFrame(columns=[*SERIES_KEYS, "alpha_s", "beta_s_per_byte", "inv_beta_gbit_s", "sizes", "fit"])
    cb = cb.assign(network=cb["network"].fillna("unknown").astype(str))
    for key, d in cb.groupby(SERIES_KEYS, sort=True):
        med = d.groupby("size_bytes")["time_s"].median()
        stored = [d[c].dropna() if c in d else pd.Series(dtype=float) for c in ("fit_alpha_s", "fit_beta_s_per_byte")]
        if all(len(x) for x in stored):
            a, b, how = float(stored[0].iloc[0]), float(stored[1].iloc[0]), "stored"
        elif len(med) >= 2:
            (a, b), how = fit_alpha_beta(med.index.astype(float).tolist(), med.to_list()), "fitted here"
        else:
            a, b, how = float("nan"), float("nan"), "too few sizes"
        rows.append(
            {
                **dict(zip(SERIES_KEYS, key)),
                "alpha_s": a,
                "beta_s_per_byte": b,
                "inv_beta_gbit_s": 8 / b / 1e9 if b and np.isfinite(b) else float("nan"),
                "sizes": len(med),
                "fit": how,
            }
        )
    return pd.DataFrame(rows)


def busbw_vs_size(cb: pd.DataFrame) -> plt.Figure:
    """(e) Bus bandwidth (median over repetitions) vs message size, log x, with the alpha-beta fit:
    busbw_fit(m) = 8 m / (alpha + beta m) * f, f = 2(N-1)/N for all-reduce (nccl-tests' convention)."""
    if cb is None or cb.empty:
        return _no_data("no commbench table in these runs")
    cb = cb.assign(network=cb["network"].fillna("unknown").astype(str))
    fits = commbench_fits(cb).set_index(SERIES_KEYS)
    colls = sorted(cb["collective"].unique())
    fig, axes = _panels(1, len(colls), 5.4, 3.8)
    cmap = plt.get_cmap("tab10")
    for j, coll in enumerate(colls):
        ax = axes[0][j]
        d = cb[cb["collective"] == coll]
        for i, (key, g) in enumerate(d.groupby(SERIES_KEYS, sort=True)):
            color = cmap(i % cmap.N)
            med = g.groupby("size_bytes")["busbw_gbit_s"].median()
            name = f"{key[1]} N={int(key[2])} {key[3]}"
            ax.plot(med.index, med.values, "o", color=color, markersize=4, label=f"{name}: median of reps")
            f = fits.loc[key]
            if np.isfinite(f["alpha_s"]) and np.isfinite(f["beta_s_per_byte"]):
                m = np.geomspace(med.index.min(), med.index.max(), 100)
                fit = 8 * m / (f["alpha_s"] + f["beta_s_per_byte"] * m) / 1e9 * busbw_factor(coll, int(key[2]))
                ax.plot(
                    m,
                    fit,
                    "--",
                    color=color,
                    linewidth=1,
                    label=f"fit α={f['alpha_s'] * 1e6:.0f} µs, 1/β={f['inv_beta_gbit_s']:.2f} Gbit/s",
                )
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(_bytes))
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        ax.set_xlabel("message size")
        ax.set_ylabel("bus bandwidth (Gbit/s)")
        ax.set_title(coll, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(
        "Collective micro-benchmark: busbw = (size/time)·2(N-1)/N for all-reduce; fit t = α + β·size", fontsize=9
    )
    return fig


def prediction_errors(summary: pd.DataFrame) -> pd.DataFrame:
    """Predicted rows matched to measured ones (workload, series, workers, network): both X, error %."""
    cols = ["workload", "series", "workers", "network", "measured_x", "predicted_x", "error_pct"]
    p = with_series(predicted(summary))
    m = with_series(ok(measured(summary)))
    if p.empty or m.empty:
        return pd.DataFrame(columns=cols)
    keys = ["workload", "series", "workers", "network"]
    for df in (p, m):
        df["network"] = df["network"].fillna("unknown").astype(str)
    j = match_predicted(p, m, keys, ["throughput_median"])
    j = j.rename(columns={"throughput_median_measured": "measured_x", "throughput_median_predicted": "predicted_x"})
    j["error_pct"] = (j["predicted_x"] / j["measured_x"] - 1) * 100
    return j[cols].sort_values(keys).reset_index(drop=True)


def predicted_vs_measured(summary: pd.DataFrame) -> plt.Figure:
    """(f) Throughput vs workers per scheme: measured (solid, markers) and predicted (dashed), one
    panel per workload and network of the predicted rows."""
    p = with_series(predicted(summary))
    if p.empty:
        return _no_data("no predicted rows (source=predicted) in these runs")
    p = p[p["scheme"] != "local"].assign(network=lambda d: d["network"].fillna("unknown").astype(str))
    m = with_series(ok(measured(summary)))
    m = (
        m[m["scheme"] != "local"].assign(network=lambda d: d["network"].fillna("unknown").astype(str))
        if not m.empty
        else m
    )
    panels = sorted({(r["workload"], r["network"]) for _, r in p.iterrows()})
    colors = scheme_colors(_series_order(pd.concat([p, m], ignore_index=True)))
    fig, axes = _panels(1, len(panels), max(4.8, 8.0 / len(panels)), 3.8)
    for j, (wl, net) in enumerate(panels):
        ax = axes[0][j]
        pp = p[(p["workload"] == wl) & (p["network"] == net)]
        mm = m[(m["workload"] == wl) & (m["network"] == net)] if not m.empty else m
        for name in [n for n in colors if n in set(pp["series"]) | set(mm["series"] if len(mm) else [])]:
            dm = mm[mm["series"] == name].sort_values("workers") if len(mm) else mm
            if len(dm):
                ax.plot(dm["workers"], dm["throughput_median"], "o-", color=colors[name], label=f"{name} measured")
            dp = pp[pp["series"] == name].sort_values("workers")
            if len(dp):
                ax.plot(
                    dp["workers"],
                    dp["throughput_median"],
                    "s--",
                    color=colors[name],
                    markersize=3,
                    linewidth=1,
                    label=f"{name} predicted",
                )
        if mm is None or len(mm) == 0:
            ax.text(
                0.99,
                0.01,
                f"no measured cells on network {net!r}",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=7,
                color="#555555",
            )
        if pp["workers"].max() > 8:
            ax.set_xscale("log", base=2)
        ax.set_xlabel("workers N")
        ax.set_ylabel(f"median throughput ({_unit(pp)}/s)")
        ax.set_title(f"{wl} @ {net}", fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=c, linewidth=2, label=n) for n, c in colors.items()]
    handles += [
        Line2D([], [], color="black", marker="o", label="measured (median)"),
        Line2D(
            [],
            [],
            color="black",
            marker="s",
            markersize=3,
            linestyle="--",
            linewidth=1,
            label="predicted (source=predicted)",
        ),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=8, frameon=False)
    fig.suptitle("Predicted (dashed) vs measured (solid) throughput", fontsize=10)
    return fig
