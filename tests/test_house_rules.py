"""scripts/check_imports.py enforces the rules docs/ARCHITECTURE.md states: the tree passes, and each
launcher rule catches a planted breach (a launcher name branched on outside its module, a launcher
module importing a backend)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
    found = ci.launcher_names({"harness.report.x": planted, "harness.launch.srun": home})
    assert len(found) == 1 and "report.py:2" in found[0] and "srun" in found[0]


def test_a_launcher_importing_a_backend_is_caught():
    ci = _checker()
    edges = {"harness.launch.srun": {"harness.backends"}, "harness.backends": set()}
    known = {m: SCRIPT for m in edges}  # the comparison scan reads a file without launcher names
    found = ci.layering(edges, known)
    assert any("harness.launch.srun imports harness.backends" in line for line in found)
