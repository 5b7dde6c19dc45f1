"""docs/ARCHITECTURE.md, "Glossary": one word, one meaning. Every module the glossary names exists, and the
modules and folders under harness/ named after a glossary word are exactly those its row lists, so a new
`run.py` or `env.py` with another meaning fails here until the glossary says otherwise."""

from __future__ import annotations

import re

from helpers import ROOT

DOC = ROOT / "docs" / "ARCHITECTURE.md"


def _rows() -> dict[str, set[str]]:
    text = DOC.read_text()
    section = text.split("## Glossary\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("word", "---"):
            continue
        rows[cells[0]] = set(re.findall(r"`(harness/[^`]+)`", cells[2]))
    return rows


def _named_after(word: str, root=ROOT) -> set[str]:
    found = set()
    for p in (root / "harness").rglob("*"):
        if "__pycache__" in p.parts:
            continue
        if (p.is_file() and p.name == f"{word}.py") or (p.is_dir() and p.name == word):
            found.add(str(p.relative_to(root)) + ("/" if p.is_dir() else ""))
    return found


def _wrong(rows: dict[str, set[str]], root=ROOT) -> dict:
    wrong = {}
    for word, listed in rows.items():
        named = _named_after(word, root)
        listed_named = {m for m in listed if m.rstrip("/").rsplit("/", 1)[-1].removesuffix(".py") == word}
        if named != listed_named:
            wrong[word] = {
                "not in the glossary": sorted(named - listed_named),
                "listed but not there": sorted(listed_named - named),
            }
    return wrong


def test_the_glossary_has_its_words():
    rows = _rows()
    assert {"run", "env", "launcher", "plan", "store", "testbed", "measure"} <= set(rows), sorted(rows)


def test_every_module_the_glossary_names_exists():
    missing = [f"{w}: {m}" for w, mods in _rows().items() for m in mods if not (ROOT / m).exists()]
    assert not missing, missing


def test_modules_named_after_a_word_are_the_ones_its_row_lists():
    wrong = _wrong(_rows())
    assert not wrong, wrong


def test_a_planted_module_with_a_glossary_word_for_a_name_fails(tmp_path):
    """Not vacuous: a second `run.py` (another meaning of "run") in a copy of the tree is found."""
    for listed in _rows().values():
        for m in listed:
            target = tmp_path / m
            if m.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("")
    assert _wrong(_rows(), tmp_path) == {}
    (tmp_path / "harness" / "experiment").mkdir(parents=True, exist_ok=True)
    (tmp_path / "harness" / "experiment" / "run.py").write_text("")
    assert _wrong(_rows(), tmp_path) == {
        "run": {"not in the glossary": ["harness/experiment/run.py"], "listed but not there": []}
    }
