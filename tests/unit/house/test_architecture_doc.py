"""docs/ARCHITECTURE.md is the document code comments cite: every section a comment names exists, and no
comment cites a document outside the repository."""

from __future__ import annotations

import re

from helpers import ROOT

DOC = ROOT / "docs" / "ARCHITECTURE.md"
SOURCES = [
    p
    for d in ("harness", "workloads", "scripts", "experiments", "slurm")
    for p in (ROOT / d).rglob("*")
    if p.suffix in (".py", ".sh") and p.is_file()
]


def test_every_cited_section_exists():
    sections = set(re.findall(r"^#{2,3} (.+)$", DOC.read_text(), re.MULTILINE))
    cited = {}
    for path in SOURCES:
        text = " ".join(path.read_text(errors="replace").split())  # citations may wrap over lines
        for name in re.findall(r'ARCHITECTURE\.md[,;:]? "([^"]+)"', text):
            cited.setdefault(name, path.relative_to(ROOT))
    missing = {name: str(where) for name, where in cited.items() if name not in sections}
    assert cited and not missing, f"sections cited but not in docs/ARCHITECTURE.md: {missing}"


def test_no_comment_cites_a_document_outside_the_repository():
    outside = [
        str(p.relative_to(ROOT)) for p in SOURCES if re.search(r"DESIGN(\.md)? section", p.read_text(errors="replace"))
    ]
    assert not outside, outside
