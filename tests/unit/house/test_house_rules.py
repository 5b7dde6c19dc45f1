"""The house rules docs/ARCHITECTURE.md states hold: import-linter's contracts (pyproject.toml, `lint-imports`)
and scripts/check_imports.py (what the library cannot see) pass on the tree, and each catches a planted breach in
one line (an upward import, an import between independent peers, a command importing a command, a module outside
every layer, an import cycle, a launcher's folder importing another's, the study's wing imported outside the command
line, workloads/ out of its layer; a launcher's folder imported from another layer, a launcher name branched on
outside its module, a load by name up the layers, a cycle through a load by name or a package's own import)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

from helpers import ROOT

SCRIPT = ROOT / "scripts" / "check_imports.py"


def _checker():
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_tree_keeps_the_rules():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 upward load(s)" in out.stdout and "0 layering breach(es)" in out.stdout


def test_a_launcher_name_outside_its_module_is_caught(tmp_path, monkeypatch):
    ci = _checker()
    monkeypatch.setattr(ci, "ROOT", tmp_path)
    planted = tmp_path / "report.py"
    planted.write_text(
        'def f(row):\n    return row["launcher"] == "srun"\n\n'
        'def g(s):\n    return s["scheme"] != "local"  # a scheme, not a launcher\n'
    )
    home = tmp_path / "srun.py"
    home.write_text('def f(launcher):\n    return launcher == "srun"\n')
    found = ci.launcher_names({"harness.report.x": planted, "harness.launchers.srun.launcher": home})
    assert len(found) == 1 and "report.py:2" in found[0] and "srun" in found[0]


def test_the_contracts_hold_and_every_folder_is_in_the_layers():
    """lint-imports passes on the tree; the checker reads the same layers (pyproject.toml), and every folder of
    harness/ is in them, peers on one line (a module outside them fails lint-imports: the layers contract is
    `exhaustive`, planted below)."""
    out = subprocess.run(["lint-imports", "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ci = _checker()
    assert (
        ci.layer_of("harness.core.errors")
        < ci.layer_of("harness.launchers.local.launcher")
        < ci.layer_of("harness.backends.torch_dist")
        < ci.layer_of("harness.cli.commands.run")
    )
    assert ci.layer_of("harness.gate.keys") == ci.layer_of("harness.schemes.ddp")  # peers: neither imports the other
    assert ci.layer_of("workloads.base") == ci.layer_of("harness.sim.des")  # workloads/: its own contracts place it
    layers = subprocess.run([sys.executable, str(SCRIPT), "--layers"], capture_output=True, text=True, cwd=ROOT).stdout
    folders = sorted(p.name for p in (ROOT / "harness").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    listed = [line.split()[1] for line in layers.splitlines()]
    assert sorted(m.removeprefix("harness.") for m in listed if m.startswith("harness.")) == folders
    assert sorted(p.name for p in (ROOT / "harness").glob("*.py")) == ["__init__.py"], "harness/ holds folders only"


def test_a_backends_library_may_be_imported_where_used_and_nothing_else(tmp_path, monkeypatch):
    """The optional libraries come from the backends' own `library=` (a new backend edits no list in the
    checker); an ordinary dependency imported inside a function is still caught."""
    ci = _checker()
    monkeypatch.setattr(ci, "ROOT", tmp_path)
    monkeypatch.setattr(ci, "BACKENDS_PKG", tmp_path / "harness/backends")
    (tmp_path / "harness/backends/toylink").mkdir(parents=True)
    (tmp_path / "harness/backends/toylink/__init__.py").write_text(
        'register(BackendEntry(name="toylink", description="", start=None, library="toylib"))\n'
    )
    planted = tmp_path / "harness/backends/toylink/transport.py"
    planted.write_text(
        "def start():\n    import toylib  # optional: only this backend needs it\n\ndef stop():\n    import json\n"
    )
    assert "toylib" in ci.allowed_local() and set(ci.HEAVY) <= set(ci.allowed_local())
    _, local, *_ = ci.scan({"harness.backends.toylink.transport": planted})
    assert [(line, what) for _, line, what in local] == [(5, "json")]


def _copy_of_the_house(dst):
    """The packages, the contracts (pyproject.toml) and the checker, as files (neither tool runs them)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("harness", "workloads", "experiments"):
        shutil.copytree(ROOT / folder, dst / folder, ignore=ignore)
    (dst / "scripts").mkdir()
    shutil.copy(SCRIPT, dst / "scripts" / SCRIPT.name)
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


def _plant(path, line: str) -> int:
    """Add an import line after the module's last top-level import; its line number."""
    lines = path.read_text().splitlines()
    at = max(i for i, text in enumerate(lines) if text.startswith(("from ", "import "))) + 1
    lines[at:at] = [line]
    path.write_text("\n".join(lines) + "\n")
    return at + 1


def test_planted_breaches_of_the_layer_contracts_fail_lint_imports_in_one_line_each(tmp_path):
    """An upward import, an import between independent peers and a command importing a command: lint-imports
    (its contracts "layers" and "commands"; the upward import also closes cycles, which "acyclic" names) fails,
    naming each import on one line."""
    repo = _copy_of_the_house(tmp_path)
    up = _plant(repo / "harness/contracts/cell.py", "from harness.backends import PLUGINS")
    peers = _plant(repo / "harness/gate/keys.py", "from harness.schemes.knobs import Knobs")
    cmd = _plant(repo / "harness/cli/commands/show.py", "from harness.cli.commands import run")
    out = subprocess.run(
        ["lint-imports", "--no-cache", "--contract", "layers", "--contract", "commands"],
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert out.returncode == 1, out.stdout[-3000:]
    found = sorted(line for line in out.stdout.splitlines() if line.startswith("- "))
    assert found == sorted(
        [
            f"- harness.contracts.cell -> harness.backends (l.{up})",
            f"- harness.gate.keys -> harness.schemes.knobs (l.{peers})",
            f"- harness.cli.commands.show -> harness.cli.commands.run (l.{cmd})",
        ]
    ), out.stdout


def _broken(repo, contract: str) -> list[str]:
    """lint-imports on `repo` with one contract of its pyproject.toml: the breaches it names, one line each
    (blanks squeezed); [] when the contract is kept."""
    out = subprocess.run(
        ["lint-imports", "--no-cache", "--contract", contract],
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert out.returncode in (0, 1), out.stdout[-3000:] + out.stderr[-3000:]
    lines = [" ".join(line.split()) for line in out.stdout.splitlines()]
    found = [line for line in lines if line.startswith("- ") or line.startswith("No cycles are allowed in")]
    assert (out.returncode == 1) == bool(found), out.stdout[-3000:]
    return found


def test_planted_breaches_of_the_house_contracts_fail_lint_imports_in_one_line_each(tmp_path):
    """A module outside every layer (`exhaustive`), an import cycle (`acyclic_siblings`), a launcher's folder
    importing another's (the registry beside the folders may import any), the study's wing imported outside the
    command line, workloads/ imported from below its layer and importing above it, an experiment imported by the
    harness (an experiment importing the harness is allowed): each fails its contract of pyproject.toml, named on one
    line, and no other breach is reported."""
    repo = _copy_of_the_house(tmp_path)
    (repo / "harness/cell.py").write_text('"""A module in no folder."""\n')
    (repo / "harness/core/_ping.py").write_text("import harness.core._pong\n")
    (repo / "harness/core/_pong.py").write_text("def f():\n    import harness.core._ping\n")  # a local import counts
    other = _plant(repo / "harness/launchers/testbed/launcher.py", "from harness.launchers.local import launcher")
    _plant(repo / "harness/launchers/choose.py", "from harness.launchers.srun import launcher")
    study = _plant(repo / "harness/advise/observed.py", "import harness.study")
    up = _plant(repo / "workloads/vgg.py", "from harness.gate import keys")
    below = _plant(repo / "harness/procs/env.py", "import workloads.base")
    wing = _plant(repo / "harness/report/prediction.py", "from experiments.spread import spread")
    assert _broken(repo, "layers") == ["- harness.cell"]
    cycle = _broken(repo, "acyclic")
    assert cycle[0] == "No cycles are allowed in harness.core." and cycle[1:] in (
        ["- ._ping -> ._pong (1 import)"],
        ["- ._pong -> ._ping (1 import)"],
    ), cycle
    assert _broken(repo, "launchers") == [
        f"- harness.launchers.testbed.launcher -> harness.launchers.local.launcher (l.{other})"
    ]
    assert _broken(repo, "study") == [f"- harness.advise.observed -> harness.study (l.{study})"]
    assert _broken(repo, "workloads-above") == [f"- workloads.vgg -> harness.gate.keys (l.{up})"]
    assert _broken(repo, "workloads-below") == [f"- harness.procs.env -> workloads.base (l.{below})"]
    assert _broken(repo, "commands") == []
    assert _broken(repo, "experiments") == [f"- harness.report.prediction -> experiments.spread.spread (l.{wing})"]


def test_a_planted_upward_import_module_fails_the_checker_in_one_line(tmp_path):
    repo = _copy_of_the_house(tmp_path)
    planted = repo / "harness" / "contracts" / "cell.py"
    lines = planted.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("from __future__")) + 1
    lines[at:at] = [
        "import importlib",
        'TABLE = ("harness.backends",)',
        "for _name in TABLE:",
        "    importlib.import_module(_name)",
    ]
    planted.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [sys.executable, str(repo / "scripts" / SCRIPT.name)], capture_output=True, text=True, cwd=repo
    )
    assert out.returncode == 1, out.stdout
    found = [line for line in out.stdout.splitlines() if line.startswith("upward load:")]
    assert found == [
        f"upward load: harness/contracts/cell.py:{at + 4}: harness.contracts.cell (harness.contracts) "
        "loads harness.backends (harness.backends) by importlib.import_module: move what it needs down"
    ]


def test_loads_by_name_are_followed_as_imports(tmp_path, monkeypatch):
    """A literal, a table, an f-string (one name after a literal package: any module it can be) and
    `__import__` become edges, seen by the layering and the checker's cycle search (a cycle through a load,
    which lint-imports cannot see); a name only known at run time fails unless its module is listed
    (RUN_TIME_LOADS) with why."""
    ci = _checker()
    monkeypatch.setattr(ci, "ROOT", tmp_path)
    files = {
        "harness/core/loads.py": (
            "import importlib\nimport os\n"
            'importlib.import_module("harness.gate.one")\n'
            'for name in ("harness.gate.two",):\n    importlib.import_module(name)\n'
            'def f(x):\n    return importlib.import_module(f"harness.sim.{x}")\n'
            '__import__("harness.core.other")\n'
            'importlib.import_module(os.environ["WHO"])\n'
            'importlib.import_module("harness.gate.gone")\n'
        ),
        "harness/core/other.py": "import harness.core.loads\n",
        "harness/gate/one.py": "",
        "harness/gate/two.py": "",
        "harness/sim/a.py": "",
        "harness/sim/b.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    known = {rel.removesuffix(".py").replace("/", "."): tmp_path / rel for rel in files}
    edges, _, sites, unread = ci.scan(known)
    assert edges["harness.core.loads"] == {
        "harness.gate.one",
        "harness.gate.two",
        "harness.sim.a",
        "harness.sim.b",
        "harness.core.other",
    }
    assert sites[("harness.core.loads", "harness.sim.a")] == (7, "importlib.import_module")
    assert sites[("harness.core.loads", "harness.core.other")] == (8, "__import__")
    assert ci.unseen_cycles(edges, sites) == [["harness.core.loads", "harness.core.other"]]  # by __import__
    up = ci.upward(edges, sites, known)
    assert any(
        line.startswith("harness/core/loads.py:3: harness.core.loads (harness.core) loads harness.gate.one")
        for line in up
    )
    load = {("harness.gate.keys", "harness.schemes.ddp"): (4, "importlib.import_module")}  # between two peers
    assert ci.upward({"harness.gate.keys": {"harness.schemes.ddp"}}, load) == [
        "harness.gate.keys (harness.gate) loads harness.schemes.ddp (harness.schemes) by importlib.import_module"
    ]
    assert ci.upward({"harness.gate.keys": {"harness.schemes.ddp"}}, {}) == []  # an import: lint-imports' own
    assert [(line, what.split(":")[0]) for _, line, what in unread] == [
        (9, "importlib.import_module(os.environ['WHO']) loads a module named only at run time"),
        (10, "importlib.import_module('harness.gate.gone') names harness.gate.gone, which is no module"),
    ]
    monkeypatch.setitem(ci.RUN_TIME_LOADS, "harness.core.loads", "a test's")
    assert len(ci.scan(known)[3]) == 1  # listed: the run-time name passes, the missing module still fails


def test_a_launchers_folder_imported_from_another_layer_fails_the_checker_in_one_line(tmp_path):
    """Rule 6: outside harness/launchers/ a launcher is chosen through the registry and asked; what every layer
    needs (a launcher's recipe type and its helpers, rate labels, Slurm's notations) lives below. No exceptions:
    a backend importing a launcher's folder (its launcher.py or any other module) and a module importing the
    batch scripts' folder are caught, the launchers' own modules beside the folders are not."""
    repo = _copy_of_the_house(tmp_path)
    planted = repo / "harness" / "advise" / "observed.py"
    lines = planted.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("from harness")) + 1
    lines[at:at] = ["from harness.launchers.testbed.launcher import make"]
    planted.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [sys.executable, str(repo / "scripts" / SCRIPT.name)], capture_output=True, text=True, cwd=repo
    )
    assert out.returncode == 1, out.stdout
    found = [line for line in out.stdout.splitlines() if line.startswith("layering:")]
    assert found == [
        f"layering: harness/advise/observed.py:{at + 1}: harness.advise.observed imports "
        "harness.launchers.testbed.launcher: a launcher's folder is imported only inside "
        "harness/launchers/; choose the launcher through harness/launchers/choose.py and ask it, or "
        "move what it shares below (harness/testbed/, harness/networks/, harness/contracts/)"
    ]
    ci = _checker()
    edges = {
        "harness.backends.horovod": {
            "harness.launchers.srun.env",
            "harness.launchers.local.launcher",
            "harness.launchers.identity",
            "harness.contracts.recipes.srun",
        },
        "harness.jobs.sweep_jobs": {"harness.launchers.sbatch.script", "harness.launchers.choose"},
        "harness.launchers.choose": {"harness.launchers.local.launcher", "harness.launchers.sbatch.script"},
    }
    found = ci.launchers_behind_their_contract(edges)
    assert [line.split(":")[0] for line in found] == [
        "harness.backends.horovod imports harness.launchers.local.launcher",
        "harness.backends.horovod imports harness.launchers.srun.env",
        "harness.jobs.sweep_jobs imports harness.launchers.sbatch.script",
    ], found


def test_a_cycle_through_a_packages_own_import_is_caught(tmp_path, monkeypatch):
    """A package's __init__ importing its module that imports the package back: no sibling cycle, so
    lint-imports' acyclic_siblings does not count it; the checker does. A module importing a package that holds
    it without a way back is no cycle."""
    ci = _checker()
    monkeypatch.setattr(ci, "ROOT", tmp_path)
    files = {
        "harness/backends/__init__.py": "from harness.backends import toy\nPLUGINS = (toy,)\n",
        "harness/backends/toy.py": "from harness.backends import PLUGINS\n",
        "harness/gate/__init__.py": "",
        "harness/gate/keys.py": "import harness.gate\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    known = {ci.module_name(tmp_path / rel): tmp_path / rel for rel in files}
    edges, _, sites, _ = ci.scan(known)
    assert ci.unseen_cycles(edges, sites) == [["harness.backends.toy", "harness.backends"]]
