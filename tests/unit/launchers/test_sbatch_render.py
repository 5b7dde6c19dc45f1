"""Pure tests of the Slurm side: sbatch text against committed references, host lists, SLURM_* -> RankIdentity.

    pytest tests/unit/launchers/test_sbatch_render.py
    python tests/unit/launchers/test_sbatch_render.py --regenerate   # rewrite tests/data/sbatch_reference_<style>.sh,
                                                     # then read the diff before committing it

Each launch style belongs to a backend, which declares its reference script's spec (SbatchStyle.reference):
a new backend's style needs no edit here, only its reference file written by --regenerate.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import backends
from harness.contracts.hostlist import expand_hostlist, expand_tasks_per_node
from harness.contracts.recipes.sbatch import SbatchSpec
from harness.core.errors import UserError
from harness.launchers.identity import from_environ
from harness.launchers.sbatch.script import launch_styles, render_sbatch
from harness.launchers.srun.env import from_slurm, port_for_job
from helpers import ROOT

DATA = ROOT / "tests" / "data"
backends.load()  # run as a script (--regenerate) too, where tests/conftest.py has not loaded them

# One spec per launch style, each exercising different options, declared by the style's backend. The
# reference files are their text.
REFERENCE_SPECS = {name: SbatchSpec(**style.reference) for name, style in launch_styles().items()}


LAUNCH_STYLES = tuple(launch_styles())


def reference_path(style: str) -> Path:
    return DATA / f"sbatch_reference_{style}.sh"


# ------------------------------------------------------------------------------------ sbatch text


def test_every_style_has_a_reference():
    assert set(REFERENCE_SPECS) == set(LAUNCH_STYLES)
    assert all(launch_styles()[name].reference for name in LAUNCH_STYLES), "a style declares no reference spec"
    committed = {
        p.name for p in DATA.glob("sbatch_reference_*.sh") if not p.name.startswith("sbatch_reference_submit")
    }  # test_slurm_sweep.py's
    assert committed == {reference_path(name).name for name in LAUNCH_STYLES}, "a reference is stray or missing"


@pytest.mark.parametrize("style", LAUNCH_STYLES)
def test_render_matches_reference(style):
    expected = reference_path(style).read_text()
    assert render_sbatch(REFERENCE_SPECS[style]) == expected, (
        f"sbatch text for {style} changed; if intended, run `python tests/unit/launchers/test_sbatch_render.py "
        f"--regenerate` and review the diff"
    )


@pytest.mark.parametrize("style", LAUNCH_STYLES)
def test_every_sbatch_line_is_commented(style):
    lines = [ln for ln in render_sbatch(REFERENCE_SPECS[style]).splitlines() if ln.startswith("#SBATCH")]
    assert lines
    for line in lines:
        option, sep, comment = line.partition("  # ")
        assert sep and comment.strip(), f"undocumented directive: {line!r}"
        assert " " not in option.removeprefix("#SBATCH ").strip()


@pytest.mark.parametrize("style", LAUNCH_STYLES)
def test_rendered_script_is_valid_bash(style):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not installed")
    res = subprocess.run([bash, "-n"], input=render_sbatch(REFERENCE_SPECS[style]), text=True, capture_output=True)
    assert res.returncode == 0, res.stderr


def test_render_is_pure_and_env_order_free():
    a = SbatchSpec(job_name="j", command=["x"], env={"A": "1", "B": "2"})
    b = SbatchSpec(job_name="j", command=("x",), env={"B": "2", "A": "1"})
    assert render_sbatch(a) == render_sbatch(a) == render_sbatch(b)


def test_script_port_formula_equals_port_for_job():
    line = next(
        ln for ln in render_sbatch(REFERENCE_SPECS["srun"]).splitlines() if ln.startswith("export MASTER_PORT=")
    )
    for job_id in (1, 11999, 12000, 987654):
        out = subprocess.run(
            ["bash", "-c", f"{line}\necho $MASTER_PORT"],
            text=True,
            capture_output=True,
            env={"SLURM_JOB_ID": str(job_id), "PATH": "/usr/bin:/bin"},
        ).stdout
        assert int(out) == port_for_job(job_id)


def test_byteps_colocated_servers_use_worker_nodes():
    text = render_sbatch(SbatchSpec(job_name="b", command=["w"], nodes=3, launch="byteps", ps_servers=2))
    assert "#SBATCH --nodes=3 " in text
    assert 'SERVER_NODES=$(IFS=,; echo "${HOSTS[*]:0:2}")' in text
    assert "--nodes=2 --ntasks=2" in text


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"launch": "mpirun"}, f"available: {', '.join(launch_styles())}, or 'sweep'"),
        ({"job_name": "two words"}, "job name"),
        ({"nodes": 0}, "nodes=0"),
        ({"command": ()}, "empty command"),
        ({"extra_sbatch": ("exclusive",)}, "one option"),
        ({"env": {"BAD-NAME": "1"}}, "BAD-NAME"),
        ({"horovod_controller": "ssh"}, "gloo"),
    ],
)
def test_bad_spec_is_a_user_error(kwargs, words):
    args = {"job_name": "j", "command": ("x",)} | kwargs
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace("[", r"\[")):
        render_sbatch(SbatchSpec(**args))


# -------------------------------------------------------------------------------------- hostlists


@pytest.mark.parametrize(
    "text, hosts",
    [
        ("n1", ["n1"]),
        ("n[1-3,5],gpu07", ["n1", "n2", "n3", "n5", "gpu07"]),
        ("gpu[08-11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
        ("node[098-101]", ["node098", "node099", "node100", "node101"]),
        ("rack[1-2]-n[1,3]", ["rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"]),
        ("a,b[2],c", ["a", "b2", "c"]),
        ("n[1-2]x", ["n1x", "n2x"]),
    ],
)
def test_expand_hostlist(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["n[1-3", "n1-3]", "n[a-b]", "n[3-1]", "n[[1]]"])
def test_expand_hostlist_rejects_malformed(bad):
    with pytest.raises(ValueError):
        expand_hostlist(bad)


# Agreement with Slurm's own parser (scontrol show hostnames) needs a slurm.conf, so it runs with the
# local cluster up: tests/integration/slurm/test_slurm_local.py::test_expand_hostlist_agrees_with_slurm.


@pytest.mark.parametrize(
    "text, counts",
    [
        ("2", [2]),
        ("2(x3)", [2, 2, 2]),
        ("2,1", [2, 1]),
        ("4(x2),3,1(x2)", [4, 4, 3, 1, 1]),
    ],
)
def test_expand_tasks_per_node(text, counts):
    assert expand_tasks_per_node(text) == counts


# ------------------------------------------------------------------------------------ from_slurm


def step_env(procid: int, nodeid: int, localid: int, **over) -> dict[str, str]:
    """SLURM_* of task `procid` in `srun` inside `sbatch -N2 --ntasks-per-node=1`, as printed by a real
    Slurm 22.05 (slurm/local), trimmed of unrelated variables."""
    env = {
        "SLURM_CLUSTER_NAME": "ddlbench-local",
        "SLURM_JOB_ID": "4242",
        "SLURM_JOBID": "4242",
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_NODELIST": "n[1-2]",
        "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NNODES": "2",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_NTASKS": "2",
        "SLURM_NPROCS": "2",
        "SLURM_NTASKS_PER_NODE": "1",
        "SLURM_TASKS_PER_NODE": "1(x2)",
        "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
        "SLURM_STEP_ID": "0",
        "SLURM_STEPID": "0",
        "SLURM_PROCID": str(procid),
        "SLURM_NODEID": str(nodeid),
        "SLURM_LOCALID": str(localid),
        "SLURMD_NODENAME": f"n{nodeid + 1}",
    }
    env.update(over)
    return env


def test_from_slurm_two_nodes_one_task_each():
    envs = [from_slurm(step_env(r, r, 0), use_scontrol=False) for r in (0, 1)]
    assert [(e.rank, e.node_rank, e.local_rank) for e in envs] == [(0, 0, 0), (1, 1, 0)]
    for e in envs:
        assert (e.world_size, e.local_world_size, e.nodes) == (2, 1, 2)
        assert (e.master_addr, e.master_port) == ("n1", port_for_job(4242))
        assert e.source == "slurm"
        assert e.extra == {"slurm_job_id": "4242", "slurm_nodelist": "n[1-2]", "slurm_step_id": "0"}


def test_from_slurm_uneven_tasks_per_node_and_hostlist():
    # sbatch -n5 -N3 on gpu[07-09]: tasks per node 2,2,1; task 4 is alone on gpu09.
    over = {
        "SLURM_JOB_NODELIST": "gpu[07-09]",
        "SLURM_STEP_NODELIST": "gpu[07-09]",
        "SLURM_NTASKS": "5",
        "SLURM_JOB_NUM_NODES": "3",
        "SLURM_NNODES": "3",
        "SLURM_STEP_NUM_NODES": "3",
        "SLURM_TASKS_PER_NODE": "2(x2),1",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2),1",
    }
    env = step_env(4, 2, 0, **over)
    del env["SLURM_NTASKS_PER_NODE"]  # Slurm sets it only for --ntasks-per-node
    e = from_slurm(env, use_scontrol=False)
    assert (e.rank, e.world_size, e.node_rank, e.nodes, e.local_rank, e.local_world_size) == (4, 5, 2, 3, 0, 1)
    assert e.master_addr == "gpu07"
    e1 = from_slurm(step_env(1, 0, 1, **over), use_scontrol=False)
    assert e1.local_world_size == 2


def test_from_slurm_step_on_part_of_the_allocation():
    # A step on the last two of three nodes (as byteps' worker step may be): the step's list counts.
    env = step_env(0, 0, 0, SLURM_JOB_NODELIST="n[1-3]", SLURM_JOB_NUM_NODES="3", SLURM_STEP_NODELIST="n[2-3]")
    e = from_slurm(env, use_scontrol=False)
    assert (e.master_addr, e.nodes) == ("n2", 2)
    assert e.extra["slurm_nodelist"] == "n[1-3]"


def test_from_slurm_honours_exported_master_addr_and_port():
    e = from_slurm(step_env(1, 1, 0, MASTER_ADDR="10.0.0.7", MASTER_PORT="31000"), use_scontrol=False)
    assert (e.master_addr, e.master_port) == ("10.0.0.7", 31000)


def test_from_slurm_in_batch_script_without_step():
    env = step_env(0, 0, 0)
    for k in (
        "SLURM_STEP_ID",
        "SLURM_STEPID",
        "SLURM_STEP_NODELIST",
        "SLURM_STEP_NUM_NODES",
        "SLURM_STEP_TASKS_PER_NODE",
    ):
        del env[k]
    e = from_slurm(env, use_scontrol=False)
    assert e.extra["slurm_step_id"] is None and e.master_addr == "n1"


@pytest.mark.parametrize(
    "over, words",
    [
        ({"SLURM_PROCID": "x"}, "SLURM_PROCID='x' is not an integer"),
        ({"SLURM_PROCID": "5"}, "inconsistent"),
        ({"SLURM_TASKS_PER_NODE": "two", "SLURM_STEP_TASKS_PER_NODE": ""}, "SLURM_TASKS_PER_NODE"),
        ({"SLURM_STEP_NODELIST": "n[1-"}, "cannot read the Slurm node list"),
    ],
)
def test_from_slurm_bad_variables_are_user_errors(over, words):
    with pytest.raises(UserError, match=words.replace("[", r"\[")):
        from_slurm(step_env(0, 0, 0, **over), use_scontrol=False)


def test_from_environ_routes_slurm_tasks_here():
    e = from_environ(step_env(1, 1, 0, MASTER_ADDR="127.0.0.1"))
    assert (e.source, e.rank, e.world_size) == ("slurm", 1, 2)


def test_from_environ_takes_the_host_count_from_the_launcher():
    base = {"RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    assert from_environ(base).nodes == 1  # no launcher word: world // local_world, as before
    assert from_environ({**base, "GROUP_WORLD_SIZE": "2"}).nodes == 2  # 3 workers on 2 hosts (torchrun, testbed)


def test_port_for_job():
    assert port_for_job(None) == 29500
    assert port_for_job("4242") == port_for_job(4242) == 24242
    assert 20000 <= port_for_job(10**9 + 7) < 32000


if __name__ == "__main__" and "--regenerate" in sys.argv:
    DATA.mkdir(parents=True, exist_ok=True)
    for name, spec in REFERENCE_SPECS.items():
        reference_path(name).write_text(render_sbatch(spec))
        print("wrote", reference_path(name).relative_to(ROOT))
