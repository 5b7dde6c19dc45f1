"""The registries' declarations as `ddlbench list` shows them, kept in catalog.json beside this module, so that
listing them imports no torch (docs/ARCHITECTURE.md, "Commands"):

    python -m harness.cli.catalog --regenerate   # after adding or changing a scheme, workload or backend

Every workload (name, description, batch, sequence length, unit), scheme (name, description, the backends it
runs on, each knob's default and doc) and backend (name, description, library), as the registries declare
them. The file carries a hash of the sources it was made from (SOURCES): `declared()` uses it only while they
are unchanged and no scheme is loaded from outside (DDLBENCH_SCHEME_MODULES); else it asks the registries
themselves (seconds: they import torch), so a stale file makes `list` slower, never wrong.
tests/unit/cli/test_startup.py keeps the committed file fresh.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILE = Path(__file__).with_name("catalog.json")
SOURCES = ("harness/backends", "harness/contracts", "harness/schemes", "workloads")
"""The folders whose modules declare what the catalogue holds (the registries and their contracts)."""


def sources_hash(root: Path = ROOT) -> str:
    """sha256 over the SOURCES' Python files, path and content, in order."""
    h = hashlib.sha256()
    for folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def from_registries() -> dict:
    """The declarations, read from the registries (imports them all, torch with them)."""
    from harness import backends  # lazy: the registries import torch; only a stale catalogue needs them
    from harness.schemes import SCHEMES
    from workloads import WORKLOADS

    registered = backends.load()  # first: a scheme's backends are those providing what it needs ("Plugins")
    return {
        "workloads": [
            {
                "name": n,
                "description": w.description,
                "batch": w.batch,
                "seq_len": w.seq_len,
                "sample_unit": w.sample_unit,
            }
            for n, w in WORKLOADS.items()
        ],
        "schemes": [
            {
                "name": n,
                "description": s.description,
                "backends": list(s.backends),
                "knobs": [{"name": k, "default": repr(knob.default), "doc": knob.doc} for k, knob in s.knobs.items()],
            }
            for n, s in SCHEMES.items()
        ],
        "backends": [{"name": n, "description": b.description, "library": b.library} for n, b in registered.items()],
    }


def declared() -> dict:
    """The committed catalogue while it is fresh, else the registries' own declarations."""
    if FILE.exists() and not os.environ.get("DDLBENCH_SCHEME_MODULES"):
        stored = json.loads(FILE.read_text())
        if stored.get("sources_sha256") == sources_hash():
            return stored
    return from_registries()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regenerate", action="store_true", help=f"write {FILE.name} from the registries")
    args = ap.parse_args(argv)
    fresh = {"sources_sha256": sources_hash(), **from_registries()}
    if args.regenerate:
        FILE.write_text(json.dumps(fresh, indent=1) + "\n")
        print(f"wrote {FILE.relative_to(ROOT)}")
        return 0
    stale = not FILE.exists() or json.loads(FILE.read_text()) != fresh
    print(f"{FILE.relative_to(ROOT)} is {'stale: run with --regenerate' if stale else 'fresh'}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
