"""The doctor's readable report: text lines from the collected data. Pure.

The doctor's readable report: plain text lines from the collected data (facts.collect, the smoke
results, gpu_checks.gpu_check_status). Pure: data in, lines out."""

from __future__ import annotations

from harness.doctor.smoke import SmokeConfig, SmokeResult

WIDTH = 12  # label column of the report


def _yes(flag) -> str:
    return "yes" if flag else "no"


def _line(label: str, text: str) -> str:
    return f"{label:<{WIDTH}}{text}"


def _torch(t: dict) -> list[str]:
    build = f"CUDA {t['cuda_build']}" if t["cuda_build"] else "CPU build (no CUDA)"
    dist = ", ".join(f"{k} {_yes(v)}" for k, v in t["distributed"].items())
    return [
        _line(
            "torch",
            f"{t['version']}, {build}, cuDNN {t['cudnn'] or '-'}, NCCL {t['nccl'] or '-'}; torch.distributed: {dist}",
        )
    ]


def _gpus(g: dict, t: dict) -> list[str]:
    if not g["devices"]:
        why = "torch sees no CUDA device" + ("" if t["cuda_build"] else " (a CPU build of torch)")
        smi = f"; nvidia-smi at {g['nvidia_smi']}" if g["nvidia_smi"] else "; no nvidia-smi"
        lines = [_line("GPUs", f"none: {why}{smi}")]
        if g.get("nvidia_hardware") and not t["cuda_build"]:
            lines.append(
                _line(
                    "WARNING",
                    f"this machine has an NVIDIA GPU but torch {t['version']} is a CPU "
                    f"build: every cell would run on the CPU. Keep or install a CUDA "
                    f'build of torch and install ddlbench beside it (README, "GPUs"); '
                    f"the README's first command is for CPU machines",
                )
            )
        return lines
    lines = [
        _line(
            "GPUs",
            f"{g['count']}, driver {g['driver'] or '?'}"
            + (f", CUDA_VISIBLE_DEVICES={g['visible_devices']}" if g["visible_devices"] else ""),
        )
    ]
    for d in g["devices"]:
        lines.append(
            _line(
                "",
                f"cuda:{d['index']} {d['name']}, {d['memory_gib']} GiB, compute capability {d['compute_capability']}",
            )
        )
    if g["topology"]:
        lines.append(_line("", "nvidia-smi topo -m:"))
        lines += [_line("", "  " + row) for row in g["topology"].rstrip().splitlines()]
    return lines


def _network(n: dict) -> list[str]:
    lines = []
    for i in n["interfaces"]:
        state = "up" if i["up"] else ("down" if i["up"] is False else "?")
        speed = f", {i['speed_mbit']} Mbit/s" if i["speed_mbit"] else ""
        addrs = ", ".join(i["addresses"]) or "no address"
        lines.append(_line("network" if not lines else "", f"{i['name']:<10} {state:<4} {addrs}{speed}"))
    h = n["hostname"]
    iface = f" on {h['interface']}" if h["interface"] else ""
    lines.append(_line("hostname", f"{h['hostname']} -> {h['address'] or '?'}{iface}: {h['verdict']}"))
    if h["default_route_interface"]:
        lines.append(_line("", f"default route via {h['default_route_interface']}"))
    for var, value in h["variables"].items():
        lines.append(_line("", f"{var}={value}"))
    return lines


def _backends(backends: list[dict]) -> list[str]:
    lines = ["backends"]
    for b in backends:
        if not b["available"]:
            lines.append(f"  {b['name']:<10} not available: {b['reason']}")
            continue
        versions = ", ".join(f"{k} {v}" for k, v in b["versions"].items() if v not in ("", None))
        lines.append(f"  {b['name']:<10} available ({versions or 'no versions reported'})")
        if b["device_reason"]:
            lines.append(f"  {'':<10} not on this device: {b['device_reason']}")
    return lines


def _slurm(s: dict) -> list[str]:
    tools = ", ".join(f"{t} {_yes(p)}" for t, p in s["tools"].items())
    if not s["in_allocation"]:
        return [_line("slurm", f"not inside an allocation; {tools}")]
    tasks = ",".join(map(str, s["tasks_per_node"])) or "?"
    return [
        _line(
            "slurm",
            f"job {s['job_id']} on {s['nodelist']} ({len(s['nodes'])} nodes), tasks per node "
            f"{tasks}, GPUs per node {s['gpus_per_node'] or '-'}; {tools}",
        )
    ]


def _testbed(tb: dict) -> list[str]:
    if tb["up"]:
        text = f"up: {tb['hosts']} hosts at {tb['rate_mbit']:g} Mbit/s" + (
            f", in use by {tb['held_by']}" if tb["held_by"] else ", free"
        )
    else:
        text = "not up" + (
            f" (cannot be built here: {tb['cannot_build']})"
            if tb["cannot_build"]
            else " (`ddlbench testbed up --hosts 2 --rate 500mbit` builds one)"
        )
    if tb.get("error"):
        text += f"; status check failed: {tb['error']}"
    return [_line("testbed", text)]


def _ds_ops(d: dict) -> list[str]:
    built = ", ".join(d["built_ops"]) or "none yet (compiled on first use, inside the first cell)"
    return [_line("ds ops", f"{d['folder']}{'' if d['exists'] else ' (missing)'}: {built}")]


def _busy(p: dict) -> str:
    """A warning when the 1-minute load exceeds the cores: smoke cells may then time out, and numbers
    measured on a machine busy with other work are noise, whatever their statistics say."""
    if p["load_avg"] and p["load_avg"][0] > p["cores"]:
        return " (busy: other work holds the cores; smoke cells may need --timeout, benchmarks now are noise)"
    return ""


def facts_lines(f: dict) -> list[str]:
    """The "what this machine offers" part of the report."""
    p = f["python"]
    load = " ".join(map(str, p["load_avg"])) if p["load_avg"] else "?"
    lines = [
        "ddlbench doctor: what this machine offers",
        _line("python", f"{p['version']} ({p['executable']}), {p['platform']}"),
        _line("cpu", f"{p['cores']} cores usable, {p['cpu_model']}; load average {load}" + _busy(p)),
    ]
    lines += _torch(f["torch"]) + _gpus(f["gpus"], f["torch"]) + _network(f["network"])
    lines += _backends(f["backends"]) + _slurm(f["slurm"]) + _testbed(f["testbed"]) + _ds_ops(f["deepspeed_ops"])
    return lines


def smoke_header(cfg: SmokeConfig) -> str:
    return (
        f"smoke cells: {cfg.workload} on {cfg.device}, {cfg.workers} workers, batch {cfg.batch}, "
        f"warmup {cfg.warmup}, iters {cfg.iters}, timeout {cfg.timeout_s:g} s"
        + (" (--quick: one scheme per backend)" if cfg.quick else "")
    )


def smoke_lines(results: list[SmokeResult]) -> list[str]:
    lines = []
    for r in results:
        wall = f"{r.wall_s:5.1f} s" if r.wall_s is not None else ""
        lines.append(f"  {r.backend:<10} {r.scheme:<18} {r.status:<8}{wall:>8}  {r.reason}".rstrip())
    return lines


def gpu_lines(checks: list[dict]) -> list[str]:
    ran = sum(bool(c.get("ran")) for c in checks)
    lines = [f"GPU-only checks: {ran} of {len(checks)} ran here"]
    lines += [f"  {c['name']:<26} {c['status']}" for c in checks]
    return lines


def verdict(results: list[SmokeResult], wall_s: float, kept: str | None = None) -> list[str]:
    """The last lines: what passed, what failed, how long it took, and where the failed cells' logs are."""
    n = {s: sum(r.status == s for r in results) for s in ("ok", "failed", "skipped")}
    word = "FAILED" if n["failed"] else "ok"
    lines = [
        f"doctor {word}: {n['ok']} smoke cells ok, {n['failed']} failed, {n['skipped']} backends skipped "
        f"in {wall_s:.0f} s"
    ]
    if n["failed"]:
        where = (
            f"{kept}/cells/<cell>/rank*.log"
            if kept
            else "run again with --keep DIR and read DIR/cells/<cell>/rank*.log"
        )
        lines.append(f"rank logs: {where}; a cell that timed out on a busy machine may pass with a larger --timeout")
    return lines
