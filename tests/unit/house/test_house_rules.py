"""The house rules docs/ARCHITECTURE.md states hold: import-linter's contracts (pyproject.toml, `lint-imports`)
and scripts/check_imports.py (what the library cannot see) pass on the tree, and each catches a planted breach in
one line (an upward import, an import between independent peers, a command importing a command, a module outside
every layer, an import cycle, a launcher's folder importing another's or imported from another layer, generic code
importing a backend, the study's wing imported outside the command line, workloads/ out of its layer; a backend or
launcher name branched on outside its place, a function-local import, a load by name breaking a contract, a cycle
through a package's own import)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import tomllib

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
    assert "0 name or load breach(es), 0 load(s) breaking a contract" in out.stdout, out.stdout


def test_a_backend_or_launcher_name_outside_its_place_is_caught(tmp_path, monkeypatch):
    """Rule 4: generic code (the contract `generic`'s modules) compares nothing with a backend's name; rule 5: no
    code outside a launcher's folder and the registry compares a launcher expression with a launcher's name."""
    ci = _checker()
    monkeypatch.setattr(ci, "ROOT", tmp_path)
    planted = tmp_path / "report.py"
    planted.write_text(
        'def f(row):\n    return row["launcher"] == "srun"\n\n'
        'def g(s):\n    return s["scheme"] != "local"  # a scheme, not a launcher\n'
    )
    home = tmp_path / "srun.py"
    home.write_text('def f(launcher):\n    return launcher == "srun"\n')
    generic = tmp_path / "env.py"
    generic.write_text('def f(cell):\n    return cell.backend in ("horovod", "x")\n')
    assert "harness.procs" in ci.GENERIC
    found = ci.name_rules(
        {"harness.report.x": planted, "harness.launchers.srun.launcher": home, "harness.procs.env": generic}
    )
    assert len(found) == 2 and "report.py:2" in found[1] and "srun" in found[1], found
    assert found[0].startswith("env.py:2: generic code branches on backend name(s) horovod"), found


def _layer(module: str) -> int:
    """The line of pyproject.toml's layers contract (bottom: 0) whose folders hold `module`; workloads/ on the
    line of harness/sim/, where its contracts place it."""
    (contract,) = [c for c in _contracts() if c["type"] == "layers"]
    lines = [[f"harness.{n.strip().strip('()')}" for n in line.split("|")] for line in reversed(contract["layers"])]
    module = "harness.sim" if module.startswith("workloads") else module
    return next(i for i, peers in enumerate(lines) for p in peers if module == p or module.startswith(p + "."))


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_contracts_hold_and_every_folder_is_in_the_layers():
    """lint-imports passes on the tree; the checker reads the same layers (pyproject.toml), and every folder of
    harness/ is in them, peers on one line (a module outside them fails lint-imports: the layers contract is
    `exhaustive`, planted below)."""
    out = subprocess.run(["lint-imports", "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (
        _layer("harness.core.errors")
        < _layer("harness.launchers.local.launcher")
        < _layer("harness.backends.torch_dist")
        < _layer("harness.cli.commands.run")
    )
    assert _layer("harness.gate.keys") == _layer("harness.schemes.ddp")  # peers: neither imports the other
    (below,) = [c["source_modules"] for c in _contracts() if c["id"] == "workloads-below"]
    assert "harness.sim" in below and not {"harness.measure", "harness.warm"} & set(below)  # workloads/ on sim's line
    (contract,) = [c for c in _contracts() if c["type"] == "layers"]
    listed = [n.strip().strip("()") for line in contract["layers"] for n in line.split("|")]
    folders = sorted(p.name for p in (ROOT / "harness").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert set(folders) <= set(listed) and contract["exhaustive"], (folders, listed)
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
    importing another's (the registry beside the folders may import any), a launcher's folder imported from outside
    harness/launchers/ (a backend's, a new launcher's: `launchers-behind`, which lists no folder by name), generic
    code importing a backend, the study's wing imported outside the command line, workloads/ imported from below
    its layer and importing above it, an experiment imported by the harness (an experiment importing the harness is
    allowed): each fails its contract of pyproject.toml, named on one line, and no other breach is reported."""
    repo = _copy_of_the_house(tmp_path)
    (repo / "harness/cell.py").write_text('"""A module in no folder."""\n')
    (repo / "harness/core/_ping.py").write_text("import harness.core._ping2\n")
    (repo / "harness/core/_ping2.py").write_text("def f():\n    import harness.core._ping\n")  # a local import counts
    other = _plant(repo / "harness/launchers/testbed/launcher.py", "from harness.launchers.local import launcher")
    _plant(repo / "harness/launchers/choose.py", "from harness.launchers.srun import launcher")
    (repo / "harness/launchers/toy").mkdir()
    (repo / "harness/launchers/toy/__init__.py").write_text('"""A new launcher."""\n')
    backend = _plant(repo / "harness/backends/horovod/launch.py", "from harness.launchers.local import launcher")
    new = _plant(repo / "harness/jobs/slurm.py", "import harness.launchers.toy")
    door = _plant(repo / "harness/jobs/sweep_jobs.py", "from harness.launchers import choose, identity")
    generic = _plant(repo / "harness/experiment/cells.py", "from harness.backends.torch_dist import launch")
    study = _plant(repo / "harness/advise/observed.py", "import harness.study")
    up = _plant(repo / "workloads/vgg.py", "from harness.gate import keys")
    below = _plant(repo / "harness/procs/env.py", "import workloads.base")
    wing = _plant(repo / "harness/report/prediction.py", "from experiments.spread import spread")
    assert door
    assert _broken(repo, "layers") == ["- harness.cell"]
    cycle = _broken(repo, "acyclic")
    assert cycle[0] == "No cycles are allowed in harness.core." and cycle[1:] in (
        ["- ._ping -> ._ping2 (1 import)"],
        ["- ._ping2 -> ._ping (1 import)"],
    ), cycle
    assert _broken(repo, "launchers") == [
        f"- harness.launchers.testbed.launcher -> harness.launchers.local.launcher (l.{other})"
    ]
    assert sorted(_broken(repo, "launchers-behind")) == [
        f"- harness.backends.horovod.launch -> harness.launchers.local.launcher (l.{backend})",
        f"- harness.jobs.slurm -> harness.launchers.toy (l.{new})",
    ]
    assert _broken(repo, "generic") == [
        f"- harness.experiment.cells -> harness.backends.torch_dist.launch (l.{generic})"
    ]
    assert _broken(repo, "study") == [f"- harness.advise.observed -> harness.study (l.{study})"]
    assert _broken(repo, "workloads-above") == [f"- workloads.vgg -> harness.gate.keys (l.{up})"]
    assert _broken(repo, "workloads-below") == [f"- harness.procs.env -> workloads.base (l.{below})"]
    assert _broken(repo, "commands") == []
    assert _broken(repo, "experiments") == [f"- harness.report.prediction -> experiments.spread.spread (l.{wing})"]


def _run_checker(repo) -> list[str]:
    """scripts/check_imports.py run on `repo`: its lines, the summary left out (it must fail)."""
    out = subprocess.run(
        [sys.executable, str(repo / "scripts" / SCRIPT.name)], capture_output=True, text=True, cwd=repo
    )
    assert out.returncode == 1, out.stdout + out.stderr
    return out.stdout.splitlines()[:-1]


def test_loads_by_name_are_held_to_every_contract_in_one_line_each(tmp_path):
    """A load by name (a literal, a table, an f-string, `__import__`) is an import: one up the layers, one into a
    launcher's folder from outside harness/launchers/ and one closing a cycle fail the checker, each naming the
    contract it breaks, which lint-imports alone cannot see."""
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
    (repo / "harness/core/_ping.py").write_text("import harness.core._ping2\n")
    (repo / "harness/core/_ping2.py").write_text('__import__("harness.core._ping")\n')
    launcher = _plant(
        repo / "harness/advise/observed.py", 'importlib.import_module("harness.launchers.local.launcher")'
    )
    _plant(repo / "harness/advise/observed.py", "import importlib")
    found = _run_checker(repo)
    names = {c["id"]: f'"{c["name"]}"' for c in _contracts()}
    sites = {
        f"harness/advise/observed.py:{launcher + 1}: harness.advise.observed loads harness.launchers.local.launcher "
        "by importlib.import_module": {names["launchers-behind"]},
        f"harness/contracts/cell.py:{at + 4}: harness.contracts.cell loads harness.backends by "
        "importlib.import_module": {names["layers"], names["acyclic"]},  # and the chains it closes between launchers
        "harness/core/_ping2.py:1: harness.core._ping2 loads harness.core._ping by __import__": {names["acyclic"]},
    }
    prefix = "load breaks a contract: "
    assert all(line.startswith(prefix) and line.split(", which breaks ")[0][len(prefix) :] in sites for line in found)
    for site, broken in sites.items():
        assert broken <= {line.split(", which breaks ")[1] for line in found if site in line}, (site, found)


def test_loads_by_name_are_followed_as_imports(tmp_path, monkeypatch):
    """A literal, a table, an f-string (one name after a literal package: any module it can be) and `__import__`
    become edges; a name only known at run time fails unless its module is listed (RUN_TIME_LOADS) with why, and so
    does a name that is no module."""
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
    loads, _, unread = ci.scan(known)
    assert {dep for mod, dep in loads if mod == "harness.core.loads"} == {
        "harness.gate.one",
        "harness.gate.two",
        "harness.sim.a",
        "harness.sim.b",
        "harness.core.other",
    }
    assert loads[("harness.core.loads", "harness.sim.a")] == (7, "importlib.import_module")
    assert loads[("harness.core.loads", "harness.core.other")] == (8, "__import__")
    assert [(line, what.split(":")[0]) for _, line, what in unread] == [
        (9, "importlib.import_module(os.environ['WHO']) loads a module named only at run time"),
        (10, "importlib.import_module('harness.gate.gone') names harness.gate.gone, which is no module"),
    ]
    monkeypatch.setitem(ci.RUN_TIME_LOADS, "harness.core.loads", "a test's")
    assert len(ci.scan(known)[2]) == 1  # listed: the run-time name passes, the missing module still fails


def test_a_cycle_through_a_packages_own_import_is_caught(tmp_path):
    """A package's __init__ importing its module that imports the package back: no sibling cycle, so
    lint-imports' acyclic_siblings does not count it; the checker does. A module importing a package that holds
    it without a way back is no cycle."""
    repo = _copy_of_the_house(tmp_path)
    (repo / "harness/backends/_toy.py").write_text("from harness.backends import PLUGINS\n")
    at = _plant(repo / "harness/backends/__init__.py", "from harness.backends import _toy")
    _plant(repo / "harness/gate/keys.py", "import harness.gate")
    assert _run_checker(repo) == [
        "import cycle (2 modules): harness.backends._toy -> harness.backends -> harness.backends._toy",
        "    harness/backends/_toy.py:1: harness.backends._toy imports harness.backends",
        f"    harness/backends/__init__.py:{at}: harness.backends imports harness.backends._toy",
    ]
