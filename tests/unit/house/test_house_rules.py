"""scripts/check_imports.py enforces the rules docs/ARCHITECTURE.md states: the tree passes, and each
launcher rule catches a planted breach (a launcher name branched on outside its module, a launcher
module importing a backend)."""

from __future__ import annotations

import importlib.util
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
    assert "0 upward import(s)" in out.stdout and "0 layering breach(es)" in out.stdout


def test_a_launcher_name_outside_its_module_is_caught(tmp_path, monkeypatch):
    ci = _checker()
    monkeypatch.setattr(ci, "ROOT", tmp_path)
    planted = tmp_path / "report.py"
    planted.write_text('def f(row):\n    return row["launcher"] == "srun"\n\n'
                       'def g(s):\n    return s["scheme"] != "local"  # a scheme, not a launcher\n')
    home = tmp_path / "srun.py"
    home.write_text('def f(launcher):\n    return launcher == "srun"\n')
    found = ci.launcher_names({"harness.report.x": planted, "harness.launchers.srun.launcher": home})
    assert len(found) == 1 and "report.py:2" in found[0] and "srun" in found[0]


def test_a_launcher_importing_a_backend_is_caught():
    ci = _checker()
    edges = {"harness.launchers.srun.launcher": {"harness.backends"}, "harness.backends": set()}
    known = {m: SCRIPT for m in edges}  # the comparison scan reads a file without launcher names
    found = ci.layering(edges, known)
    assert any("harness.launchers.srun.launcher imports harness.backends" in line for line in found)


def test_folders_are_layers_a_loose_module_an_upward_import_and_a_command_importing_a_command_are_caught():
    ci = _checker()
    known = {"harness.cell": SCRIPT, "harness.core.errors": SCRIPT}
    assert any("belongs to no layer" in line for line in ci.folders(known))
    assert ci.layer_of("harness.core.errors") < ci.layer_of("harness.launchers.local.launcher") \
        < ci.layer_of("harness.backends.torch_dist") < ci.layer_of("harness.cli.commands.run")
    up = ci.upward({"harness.contracts.recipes": {"harness.launchers.srun.plan"}, "harness.launchers.srun.plan": set()})
    assert up and "harness.contracts.recipes (harness.contracts) imports harness.launchers.srun.plan" in up[0]
    cmd = ci.commands_import_commands({"harness.cli.commands.sweep": {"harness.cli.commands.run"},
                                      "harness.cli.commands.run": set()})
    assert cmd and "commands never import commands" in cmd[0]
    layers = subprocess.run([sys.executable, str(SCRIPT), "--layers"], capture_output=True, text=True, cwd=ROOT).stdout
    folders = sorted(p.name for p in (ROOT / "harness").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    listed = [line.split()[1] for line in layers.splitlines()]
    assert sorted(m.removeprefix("harness.") for m in listed if m.startswith("harness.")) == folders
    assert sorted(p.name for p in (ROOT / "harness").glob("*.py")) == ["__init__.py"], "harness/ holds folders only"


def test_a_launcher_importing_another_launchers_folder_is_caught():
    ci = _checker()
    edges = {"harness.launchers.testbed.launcher": {"harness.launchers.local.launcher", "harness.spawner.cell",
                                                     "harness.launchers.testbed.recipe"},
             "harness.launchers.choose": {"harness.launchers.local.launcher", "harness.launchers.srun.launcher"},
             "harness.launchers.sbatch.script": {"harness.contracts.rendezvous"}}
    found = ci.launchers_import_launchers(edges)
    assert len(found) == 1 and found[0].startswith(
        "harness.launchers.testbed.launcher imports harness.launchers.local.launcher: no launcher imports another")


def test_a_backends_library_may_be_imported_where_used_and_nothing_else(tmp_path, monkeypatch):
    """The optional libraries come from the backends' own `library=` (a new backend edits no list in the
    checker); an ordinary dependency imported inside a function is still caught."""
    ci = _checker()
    monkeypatch.setattr(ci, "ROOT", tmp_path)
    monkeypatch.setattr(ci, "BACKENDS_PKG", tmp_path / "harness/backends")
    (tmp_path / "harness/backends/toylink").mkdir(parents=True)
    (tmp_path / "harness/backends/toylink/__init__.py").write_text(
        'register(BackendEntry(name="toylink", description="", start=None, library="toylib"))\n')
    planted = tmp_path / "harness/backends/toylink/transport.py"
    planted.write_text("def start():\n    import toylib  # optional: only this backend needs it\n\n"
                       "def stop():\n    import json\n")
    assert "toylib" in ci.allowed_local() and set(ci.HEAVY) <= set(ci.allowed_local())
    _, local, _ = ci.scan({"harness.backends.toylink.transport": planted})
    assert [(line, what) for _, line, what in local] == [(5, "json")]
