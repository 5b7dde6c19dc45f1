"""`ddlbench doctor`: the facts report through click's CliRunner, the hostname-to-loopback verdict as a pure
function, bad options as one-line errors, and a real `ddlbench doctor --quick` whose smoke cells run."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.contracts.backend import BACKENDS
from harness.doctor.gpu_checks import GPU_CHECKS, gpu_check_status
from harness.doctor.network import hostname_verdict
from harness.doctor.smoke import SmokeConfig, plan, schemes_for
from helpers import ROOT, require

FACT_KEYS = {"python", "torch", "gpus", "network", "backends", "slurm", "testbed", "deepspeed_ops", "device"}
SMOKE_TIMEOUT_S = 240
"""Per cell in the subprocess test: the suite may run beside other multi-process tests on 2 cores, where
a cell that takes 15 s alone can take a minute; the doctor's own default (60 s) is for a quiet machine."""


def invoke(*args):
    return CliRunner().invoke(cli, ["doctor", *args], catch_exceptions=False)


def test_facts_report_names_torch_every_backend_and_the_gpu_checks():
    res = invoke("--no-cells", "--device", "cpu")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "what this machine offers" in out and "\ntorch " in out
    for name, _ in BACKENDS.items():
        assert f"  {name} " in out, f"backend {name} missing from the report"
    for section in ("network", "hostname", "slurm", "testbed", "ds ops"):
        assert f"\n{section}" in out
    for check in GPU_CHECKS:  # CPU here: each GPU-only check named, and said to be not run
        assert f"{check.name}" in out
    assert out.count("not run: no CUDA device") == len(GPU_CHECKS)
    assert "\nsmoke cells:" not in out  # --no-cells


def test_a_cpu_torch_on_a_machine_with_an_nvidia_gpu_is_warned_about(monkeypatch, tmp_path):
    """An NVIDIA driver present (its /proc file faked here) with a CPU build of torch: the report says so."""
    from harness.doctor import facts

    sign = tmp_path / "version"
    sign.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.1\n")
    assert facts.nvidia_hardware(signs=(str(sign),))
    monkeypatch.setattr(facts, "nvidia_hardware", lambda: True)
    out = invoke("--no-cells", "--device", "cpu").stdout
    assert "WARNING" in out and "has an NVIDIA GPU but torch" in out and "CPU build" in out
    monkeypatch.setattr(facts, "nvidia_hardware", lambda: False)
    assert "has an NVIDIA GPU" not in invoke("--no-cells", "--device", "cpu").stdout


def test_json_parses_and_has_the_keys():
    res = invoke("--no-cells", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # stdout is the document only (library chatter goes to stderr)
    assert {"facts", "smoke", "gpu_checks", "ok", "wall_s"} <= set(doc)
    assert set(doc["facts"]) >= FACT_KEYS
    assert doc["facts"]["torch"]["version"]
    assert {b["name"] for b in doc["facts"]["backends"]} == set(BACKENDS)
    for b in doc["facts"]["backends"]:
        assert b["available"] == (b["reason"] is None)
    assert doc["smoke"] == [] and doc["ok"] is True


@pytest.mark.parametrize(
    "hostname, address, iface, loopback",
    [
        ("vm", "127.0.1.1", "lo", True),  # Debian's /etc/hosts line for the hostname
        ("vm", "127.0.0.1", "lo", True),
        ("n1", "::1", "lo", True),
        ("n1", "10.0.0.5", "eth0", False),
        ("n1", "10.0.0.5", None, False),  # no `ip`: the address alone decides
    ],
)
def test_hostname_loopback_verdict(hostname, address, iface, loopback):
    v = hostname_verdict(hostname, address, iface, suggest="eth0")
    assert v["loopback"] is loopback
    if loopback:
        assert "multi-node" in v["verdict"] and "GLOO_SOCKET_IFNAME=eth0" in v["verdict"]
    else:
        assert "not loopback" in v["verdict"]


def test_hostname_that_does_not_resolve():
    v = hostname_verdict("ghost", None, None)
    assert v["loopback"] is None and "does not resolve" in v["verdict"]


def test_gpu_checks_by_gpu_count():
    assert {c["status"] for c in gpu_check_status(0)} == {"not run: no CUDA device"}
    one = {c["name"]: c["status"] for c in gpu_check_status(1)}
    assert one["NCCL credit window"].startswith("not run: needs 2 GPUs")
    assert all("pytest -m gpu" in c["status"] for c in gpu_check_status(8))


def test_plan_skips_unusable_backends_and_never_runs_local():
    backends = [
        {"name": "torch", "reason": None, "device_reason": None},
        {"name": "byteps", "reason": "backend byteps is not installed", "device_reason": None},
    ]
    cells, known = plan(SmokeConfig(device="cpu", quick=False), backends)
    assert {c.backend for c in cells} == {"torch"} and "local" not in {c.scheme for c in cells}
    assert {c.scheme for c in cells} == set(schemes_for("torch", quick=False))
    assert [(k.backend, k.status, k.reason) for k in known] == [
        ("byteps", "skipped", "backend byteps is not installed")
    ]
    assert all(c.workers == 2 and c.batch == 2 and c.iters == 2 and c.warmup == 1 for c in cells)
    assert len(schemes_for("torch", quick=True)) == 1


@pytest.mark.parametrize(
    "args, words",
    [
        (["--workload", "resnet51"], ["unknown workload 'resnet51'", "resnet50-tiny"]),
        (["--device", "tpu"], ["unknown device 'tpu'"]),
        (["--timeout", "0"], ["--timeout must be"]),
        (["--timeout", "nan"], ["--timeout must be"]),
    ],
)
def test_bad_option_is_one_line_exit_2(args, words):
    res = invoke(*args)
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in res.output, res.output
    for w in words:
        assert w in lines[0]


def test_keep_refuses_a_directory_holding_a_run(tmp_path):
    (tmp_path / "summary.parquet").write_bytes(b"")
    res = invoke("--keep", str(tmp_path))
    assert res.exit_code == 2 and "already holds a run" in res.output, res.output


@pytest.mark.slow
def test_doctor_quick_runs_a_smoke_cell_per_usable_backend(tmp_path):
    exe = shutil.which("ddlbench")
    assert exe, "the ddlbench entry point is not on PATH: pip install -e ."
    keep = tmp_path / "doctor"
    p = subprocess.run(
        [exe, "doctor", "--quick", "--device", "cpu", "--json", "--keep", str(keep), "--timeout", str(SMOKE_TIMEOUT_S)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    doc = json.loads(p.stdout)
    by_backend = {r["backend"]: r for r in doc["smoke"]}
    assert set(by_backend) == set(BACKENDS)  # one row per backend with --quick: run or skipped
    for b in doc["facts"]["backends"]:
        row = by_backend[b["name"]]
        if b["available"]:  # torch always; horovod and deepspeed are installed on this machine kind
            assert row["status"] == "ok", (row, p.stderr[-2000:])
        else:
            assert row["status"] == "skipped" and row["reason"] == b["reason"]
    assert p.returncode == 0 and doc["ok"], p.stderr[-2000:]
    summary = pd.read_parquet(keep / "summary.parquet")  # the smoke run kept, as any run directory
    assert sorted(summary["status"]) == ["ok"] * sum(b["available"] for b in doc["facts"]["backends"])
    usable = {b["name"] for b in doc["facts"]["backends"] if b["available"]}
    require(
        {"horovod", "deepspeed"} <= usable,
        f"horovod and deepspeed are not both usable here (usable: "
        f"{', '.join(sorted(usable))}); run scripts/install_frameworks.sh",
    )


# --- the GPU timing check's verdict (harness/doctor/timing/verdicts.py) -----------------------------------------------
@pytest.mark.parametrize(
    "ratio, spread, verdict",
    [
        (1.000, 0.000, "ok"),  # resnet50 fp32 on the H200: harness = bare, the bare loop steady
        (0.990, 0.004, "FAILED"),  # the harness costs 1% against a steady reference
        (1.050, 0.010, "FAILED"),  # faster than its reference: measures something else
        (0.901, 0.281, "undecided"),  # bert-base bf16 on the H200: the bare loop itself moved 28% between rounds
        (1.000, 0.021, "undecided"),  # even a perfect ratio decides nothing against a drifting reference
    ],
)
def test_a_ratio_is_judged_only_against_a_steady_reference(ratio, spread, verdict):
    from harness.doctor.timing.verdicts import judge

    assert judge(ratio, spread) == verdict


def test_verdicts_fail_only_decided_cells():
    import pandas as pd

    from harness.doctor.timing.verdicts import verdicts

    variants = pd.DataFrame(
        [
            {"round": r, "workload": wl, "dtype": "bf16", "variant": "bare", "per_s": v}
            for wl, a, b in (("steady", 100.0, 100.2), ("drifting", 2832.0, 2037.0))
            for r, v in (("A", a), ("B", b))
        ]
    )
    cells = pd.DataFrame(
        [
            {
                "workload": "steady",
                "dtype": "bf16",
                "throughput_median": 95.0,
                "batch_per_worker": 8,
                "seq_len": 64,
                "iter_s_median": 0.08,
            },
            {
                "workload": "drifting",
                "dtype": "bf16",
                "throughput_median": 2193.0,
                "batch_per_worker": 64,
                "seq_len": 64,
                "iter_s_median": 0.03,
            },
        ]
    )
    table = verdicts(variants, cells, bounds=True).set_index("workload")
    assert table.loc["steady", "verdict"] == "FAILED" and not table.loc["steady", "ok"]
    assert table.loc["drifting", "verdict"] == "undecided" and not table.loc["drifting", "ok"]
    assert table.loc["drifting", "bare_spread"] == pytest.approx(1 - 2037 / 2832)


class _DriftingLoop:
    """A fake loop whose speed falls 5% per timing, shared by both sides (the host's pace drifting)."""

    def __init__(self, pace: list, cost: float):
        self.pace, self.cost = pace, cost

    def time(self, warmup, iters):
        self.pace[0] *= 0.95
        return {"throughput": self.pace[0] * self.cost}


def test_pairs_alternate_and_their_median_cancels_a_drift_the_rounds_cannot():
    from harness.doctor.timing.paired import PAIRS, decide, pair_rounds, summarise

    pace = [100.0]
    rows = pair_rounds(_DriftingLoop(pace, 1.0), _DriftingLoop(pace, 0.998), warmup=1, iters=3)
    assert [r["first"] for r in rows] == ["bare", "harness"] * (PAIRS // 2), "the order flips every pair"
    ratio, dispersion = summarise([r["ratio"] for r in rows])
    # the pace fell by 1 - 0.95**12 = 46% over the pairs; each pair's ratio is off by +-5%, their median by
    # much less, and flipping the order puts the errors on both sides
    assert ratio == pytest.approx(0.998, abs=0.03) and dispersion > 0.02
    assert decide(ratio, dispersion, 0.995, 1.03) == "undecided", "a drift faster than a pair decides nothing"
    assert summarise([0.999, 1.000, 1.001, 1.000, 0.998, 1.002])[1] < 0.02
    assert decide(1.000, 0.004, 0.995, 1.03) == "ok" and decide(0.98, 0.004, 0.995, 1.03) == "FAILED"


def test_a_drifting_cell_is_decided_on_its_pairs():
    import pandas as pd

    from harness.doctor.timing.verdicts import verdicts

    variants = pd.DataFrame(
        [
            {"round": r, "workload": "w", "dtype": "bf16", "variant": "bare", "per_s": v}
            for r, v in (("A", 2832.0), ("B", 2037.0))
        ]
    )
    cells = pd.DataFrame(
        [
            {
                "workload": "w",
                "dtype": "bf16",
                "throughput_median": 2193.0,
                "batch_per_worker": 64,
                "seq_len": 64,
                "iter_s_median": 0.03,
            }
        ]
    )
    steady = pd.DataFrame(
        [
            {
                "workload": "w",
                "dtype": "bf16",
                "pair": i,
                "first": "bare",
                "bare_per_s": 1.0,
                "harness_per_s": r,
                "ratio": r,
            }
            for i, r in enumerate([0.999, 1.001, 1.0, 1.002])
        ]
    )
    row = verdicts(variants, cells, True, steady).iloc[0]
    assert (row["verdict"], row["decided_by"]) == ("ok", "paired")
    assert row["paired_ratio"] == pytest.approx(1.0005)
    slow = steady.assign(ratio=[0.97, 0.975, 0.972, 0.971])
    row = verdicts(variants, cells, True, slow).iloc[0]
    assert (row["verdict"], row["decided_by"]) == ("FAILED", "paired")
    assert verdicts(variants, cells, False, slow).iloc[0]["verdict"] == "recorded"


def test_a_host_bound_cell_is_undecided_with_the_host_pace_measured_in_the_same_run():
    """The H200 cases (README, "GPUs"): bert-base bf16 (device 0.05 ms behind, harness 1.34x a bare loop whose
    two rounds moved 6%) and gpt2-small bf16 (3.1 ms of 37.5 ms) are host-bound: `undecided`, with the bare
    loop's spread as the host's pace, never a pass, whatever their ratio or pairs say; resnet50 bf16 (a whole
    iteration behind) is judged."""
    import pandas as pd

    from harness.doctor.timing.verdicts import verdicts

    bare = {"bert-base": (1421.5, 1343.4), "gpt2-small": (212.9, 209.0), "resnet50": (2226.5, 2236.3)}
    variants = pd.DataFrame(
        [
            {"round": r, "workload": wl, "dtype": "bf16", "variant": "bare", "per_s": v}
            for wl, ab in bare.items()
            for r, v in zip("AB", ab)
        ]
    )
    cells = pd.DataFrame(
        [
            {
                "workload": "bert-base",
                "dtype": "bf16",
                "throughput_median": 1854.9,
                "batch_per_worker": 64,
                "seq_len": 64,
                "iter_s_median": 0.0345,
                "device_lag_s": 0.000053,
                "host_bound": True,
            },
            {
                "workload": "gpt2-small",
                "dtype": "bf16",
                "throughput_median": 210.6,
                "batch_per_worker": 8,
                "seq_len": 512,
                "iter_s_median": 0.0375,
                "device_lag_s": 0.0031,
                "host_bound": True,
            },
            {
                "workload": "resnet50",
                "dtype": "bf16",
                "throughput_median": 2247.7,
                "batch_per_worker": 64,
                "seq_len": None,
                "iter_s_median": 0.0285,
                "device_lag_s": 0.0283,
                "host_bound": False,
            },
        ]
    )
    pairs = pd.DataFrame(
        [
            {
                "workload": "gpt2-small",
                "dtype": "bf16",
                "pair": i,
                "first": "bare",
                "bare_per_s": 1.0,
                "harness_per_s": 1.0,
                "ratio": 1.0,
            }
            for i in range(6)
        ]
    )
    table = verdicts(variants, cells, True, pairs).set_index("workload")
    assert table.loc["bert-base", "text"] == "undecided: host-bound, host pace varied 5.5%"
    assert table.loc["gpt2-small", "text"] == "undecided: host-bound, host pace varied 1.8%"
    assert not table.loc["gpt2-small", "ok"], "steady pairs do not make a host-bound cell pass"
    assert (table.loc["resnet50", "verdict"], table.loc["resnet50", "decided_by"]) == ("ok", "cell")


def test_on_a_cpu_the_pairs_decide_every_cell():
    """The CPU mode (harness/doctor/timing/cpu_pairs.py): the cell's own process against a bare loop's, alternated;
    their median decides even where the bare rounds held still, and a scatter of more than 2% is said as such."""
    import pandas as pd

    from harness.doctor.timing.verdicts import verdicts

    variants = pd.DataFrame(
        [
            {"round": r, "workload": "w", "dtype": "fp32", "variant": "bare", "per_s": v}
            for r, v in (("A", 30.0), ("B", 30.1))
        ]
    )
    cells = pd.DataFrame(
        [
            {
                "workload": "w",
                "dtype": "fp32",
                "throughput_median": 30.0,
                "batch_per_worker": 8,
                "seq_len": 64,
                "iter_s_median": 0.26,
                "host_bound": None,
            }
        ]
    )
    slow = pd.DataFrame(
        [
            {
                "workload": "w",
                "dtype": "fp32",
                "pair": i,
                "first": "bare",
                "bare_per_s": 1.0,
                "harness_per_s": r,
                "ratio": r,
            }
            for i, r in enumerate([0.95, 0.951, 0.949, 0.95])
        ]
    )
    row = verdicts(variants, cells, True, slow, pairs_decide=True).iloc[0]
    assert (row["verdict"], row["decided_by"]) == ("FAILED", "paired"), "5% slower in pairs fails, rounds or not"
    close = slow.assign(ratio=[0.985, 0.99, 0.98, 0.988])  # within what two CPU processes differ by
    row = verdicts(variants, cells, True, close, pairs_decide=True).iloc[0]
    assert (row["verdict"], row["decided_by"]) == ("ok", "paired")
    row = verdicts(variants.assign(per_s=[30.0, 33.0]), cells, True, close).iloc[0]
    assert row["verdict"] == "FAILED", "on a GPU (in-process pairs) the 0.5% bound holds"
    scattered = slow.assign(ratio=[0.90, 1.0, 0.95, 1.05])
    row = verdicts(variants, cells, True, scattered, pairs_decide=True).iloc[0]
    assert row["text"].startswith("undecided: its alternated pairs scatter ")


@pytest.mark.parametrize(
    "profiled, before, after, status",
    [
        (0.0800, 0.0409, 0.0409, "FAILED"),  # bert-large's hooked profile on the H200: 2x its bare loop
        (0.0415, 0.0409, 0.0412, "ok"),  # within 15% of the bare loop either side of it
        (0.0480, 0.0409, 0.0520, "undecided"),  # the bare loop moved 21% around it (a host-bound cell's pace)
    ],
)
def test_a_profile_is_judged_against_the_bare_loop_either_side_of_it(profiled, before, after, status):
    from harness.doctor.timing.gpu_timing import profile_verdict

    assert profile_verdict(profiled, before, after)[0] == status


def test_the_doctor_and_the_gpu_module_are_two_rooms_each_file_opening_with_one_line():
    """Issue 46: `ddlbench doctor` (harness/doctor/) and the GPU module with its timing check
    (harness/doctor/timing/) are two rooms; every file's docstring opens with one line saying what it is."""
    doctor = sorted((ROOT / "harness" / "doctor").glob("*.py"))
    timing = sorted((ROOT / "harness" / "doctor" / "timing").glob("*.py"))
    assert {p.stem for p in timing} >= {"gpu_report", "gpu_timing", "budget", "summary", "verdicts", "bare_loop"}
    assert not {p.stem for p in doctor} & {p.stem for p in timing if p.stem != "__init__"}
    for path in doctor + timing:
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        lines = (doc or "").split("\n")
        assert doc and (len(lines) == 1 or not lines[1].strip()), f"{path.relative_to(ROOT)}: no one-line opening"
