"""A command line that answers at once (issue 46): `ddlbench --help`, `ddlbench COMMAND --help` and `ddlbench list`
import no torch (each command imports what runs it when it runs; `list` reads the registries' declarations from
harness/cli/catalog.json), and the catalogue is what the registries declare."""

from __future__ import annotations

import json
import subprocess
import sys

from harness.cli import catalog
from harness.cli.main import COMMANDS
from helpers import ROOT

PROBE = """
import sys
from click.testing import CliRunner
import harness.cli.main as main
for argv in {argvs!r}:
    res = CliRunner().invoke(main.cli, argv)
    assert res.exit_code == 0, (argv, res.output)
    heavy = sorted(m for m in ("torch", "pandas", "transformers", "matplotlib") if m in sys.modules)
    print(" ".join(argv), "->", ",".join(heavy) or "-")
"""


def test_help_and_list_import_no_torch():
    argvs = [["--help"]] + [[name, "--help"] for name in COMMANDS] + [["list"]]
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(argvs=argvs)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert len(lines) == len(argvs) and all(line.endswith("-> -") for line in lines), "\n".join(lines)


def test_the_catalogue_is_what_the_registries_declare(tmp_path, monkeypatch):
    stored = json.loads(catalog.FILE.read_text())
    fresh = {"sources_sha256": catalog.sources_hash(), **catalog.from_registries()}
    assert stored == fresh, "harness/cli/catalog.json is stale: python -m harness.cli.catalog --regenerate"
    assert catalog.declared() == stored
    doctored = tmp_path / "catalog.json"
    doctored.write_text(json.dumps({**stored, "schemes": []}))
    monkeypatch.setattr(catalog, "FILE", doctored)
    assert catalog.declared()["schemes"] == []  # fresh (its hash is the sources'): read as it is
    monkeypatch.setenv("DDLBENCH_SCHEME_MODULES", "toy_scheme")  # a user's own schemes: the registries answer
    assert catalog.declared()["schemes"] == stored["schemes"]
    monkeypatch.delenv("DDLBENCH_SCHEME_MODULES")
    doctored.write_text(json.dumps({**stored, "sources_sha256": "0" * 64, "schemes": []}))
    assert catalog.declared()["schemes"] == stored["schemes"]  # stale: never read


REPORT_PROBE = """
import sys
from click.testing import CliRunner
import harness.cli.main as main
res = CliRunner().invoke(main.cli, ["report", {run!r}, "-o", {out!r}])
assert res.exit_code == 0, res.output
print(",".join(sorted(m for m in ("torch", "harness.schemes", "harness.predict.predictor") if m in sys.modules)) or "-")
"""


def test_a_report_of_a_measured_run_imports_no_torch(tmp_path):
    """`ddlbench report RUN` (the main job's second half) reads tables and draws: neither torch nor the schemes nor
    the predictor are imported for it (seconds of a two-core machine's time)."""
    run = ROOT / "results" / "baselines" / "cpu-tiny"
    probe = REPORT_PROBE.format(run=str(run), out=str(tmp_path / "report"))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "-", out.stdout
    assert (tmp_path / "report" / "report.html").exists()
