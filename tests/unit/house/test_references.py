"""Every module path the house names in words exists: in docstrings, comments, help texts and messages of
harness/, workloads/, scripts/ and experiments/, and in docs/ARCHITECTURE.md and the README. A file or folder path
(`harness/x/y.py`, `harness/x/`, `scripts/...`, `tests/...`, a short form from a layer's folder such as
`procs/argv.py`) or a module's name (`procs/argv.python_argv`, `harness.x.y`, `harness.x.y.name`) must name
what is there, so a move that forgets a reference fails here (issue 40 found seven after the last move). A
bare file name (`identity.py`, `test.sh`, with no folder) must be some file of the checkout, and in a row of
ARCHITECTURE's "Packages" table a file of that row's folder (issue 46: the table named `distenv.py` long after
it was renamed)."""

from __future__ import annotations

import glob
import io
import re
import tokenize
from pathlib import Path

from helpers import ROOT

FULL = ("harness", "workloads", "scripts", "experiments", "tests", "slurm")
"""Top folders whose paths are named in full (`harness/procs/argv.py`, `scripts/test.sh`)."""
SOURCES = ("harness", "workloads", "scripts", "experiments")
"""Where the Python files whose words are checked live."""
LAYERS = tuple(sorted(p.name for p in (ROOT / "harness").iterdir() if (p / "__init__.py").exists()))
"""Short forms start at a layer's folder (`procs/argv.py`, `experiment/dispatch.run_sweep`)."""
FILES = (
    ".py",
    ".sh",
    ".md",
    ".yaml",
    ".yml",
    ".json",
    ".sbatch",
    ".txt",
    ".toml",
    ".parquet",
    ".csv",
    ".png",
    ".html",
    ".log",
)
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(FULL + LAYERS) + r")/[\w./<>*-]*[\w>*/])")
DOTTED = re.compile(r"(?<![\w./-])(harness(?:\.\w+){2,})")
ELSEWHERE = {
    "harness/entry.py": "where a checkout from before issue 33 keeps its entry point (doctor/timing/checkout_pairs.py)",
    "tests/x.py": "an example of a command line (results/machine_load.py)",
    "harness/study/": "the study's wing (issue 46), whose layer the contract holds before the folder lands",
}
"""Paths named on purpose although this checkout has no such file, and why."""
BARE = re.compile(r"(?<![\w./<>*-])([A-Za-z_][\w-]*\.(?:py|sh))\b")
"""A file name with no folder: a Python module or a shell script."""
OTHERS = {
    "horovod_mpi_cj.sh": "the study's launch script (ddl-benchmarks), cited for its settings",
    "horovod_task.py": "ByteScheduler's Horovod plug-in, cited for the work it does per partition",
    "dopt_rsag.py": "DeAR's reference optimizer (dear_pytorch), cited for what its all-gather gathers",
    "byteps_distributed_optimizer.py": "the study's BytePS optimizer, cited for its tensors' declared order",
    "pytorch_synthetic_benchmark.py": "Horovod's synthetic benchmark, cited for its default batch",
}
"""File names of other projects that the house cites on purpose, and why."""
HOUSE_FILES = frozenset(
    p.name
    for top in (*FULL, "examples", "docs", ".ci")
    for p in (ROOT / top).rglob("*")
    if p.is_file() and "__pycache__" not in p.parts
)
"""Every file name of the checkout's own folders."""


def _texts(path: Path):
    """(first line, text) of every string and comment of a Python file; the whole of a Markdown file."""
    source = path.read_text()
    if path.suffix == ".md":
        yield 1, source
        return
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            yield tok.start[0], tok.string


def _module(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    return next((p for p in (base.with_name(base.name + ".py"), base / "__init__.py") if p.exists()), None)


def _has(source: Path, names: list[str]) -> str | None:
    if not names or re.search(rf"\b{re.escape(names[0])}\b", source.read_text()):
        return None
    return f"{source.relative_to(ROOT)} has no {names[0]}"


def path_problem(ref: str) -> str | None:
    """Why `ref` names nothing here, else None. A short form is checked only where it can be nothing but a
    module (`x/y.py`, `x/y.name`): `results/quick` is a run directory, not harness/results/quick."""
    full = ref.split("/")[0] in FULL
    rel = ref if full else f"harness/{ref}"
    if ref in ELSEWHERE or (ROOT / rel).exists():
        return None
    suffix = Path(rel).suffix
    if not full and ("<" in rel or "*" in rel or rel.endswith("/") or (suffix in FILES and suffix != ".py")):
        return None
    if "<" in rel or "*" in rel:
        return None if glob.glob(str(ROOT / re.sub(r"<[^>]*>", "*", rel))) else "matches no file"
    if rel.endswith("/"):
        return "no such folder"
    if suffix in FILES:
        return "no such file"
    head, _, last = rel.rpartition("/")
    name, *rest = last.split(".")
    source = _module([*head.split("/"), name])
    if source is not None:
        return _has(source, rest)
    return "no such module" if rest else None  # `harness/bare`: a ratio, not a path


def module_problem(name: str) -> str | None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        source = _module(parts[:i])
        if source is not None:
            missing = _has(source, parts[i:])
            return "no such module" if missing and source.name == "__init__.py" else missing
    return "no such module"


def bare_problem(name: str) -> str | None:
    """Why a bare file name names no file of the checkout (nor one cited from another project), else None."""
    return None if name in HOUSE_FILES or name in OTHERS else "no file of that name in the checkout"


def package_rows(path: Path) -> list[str]:
    """ARCHITECTURE's "Packages" rows naming a file (`cell.py`, `timing/summary.py`) that is not in the row's
    folder (a bare name: in it or a folder below it): `line: name: why`."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        row = re.match(r"\| \d+ \| `([\w/]+/)` \|", line)
        for m in re.finditer(r"`([\w/]+\.(?:py|sh))`", line) if row else ():
            folder, name = ROOT / row.group(1), m.group(1)
            if not ((folder / name).exists() if "/" in name else any(folder.rglob(name))):
                out.append(f"{number}: {name}: not in {row.group(1)}")
    return out


def stale(paths) -> list[str]:
    out = []
    for path in paths:
        for line, text in _texts(path):
            for pattern, problem in ((PATH, path_problem), (DOTTED, module_problem), (BARE, bare_problem)):
                for m in pattern.finditer(text):
                    why = problem(m.group(1))
                    if why:
                        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                        out.append(f"{where}:{line + text[: m.start()].count(chr(10))}: {m.group(1)}: {why}")
    return out


def test_every_module_path_named_exists():
    sources = [p for top in SOURCES for p in sorted((ROOT / top).rglob("*.py"))]
    found = stale([*sources, ROOT / "docs" / "ARCHITECTURE.md", ROOT / "README.md"])
    assert not found, "references to paths or modules that do not exist:\n" + "\n".join(found)


def test_the_packages_table_names_files_of_each_rows_folder():
    found = package_rows(ROOT / "docs" / "ARCHITECTURE.md")
    assert not found, 'docs/ARCHITECTURE.md, "Packages": file names not in the row\'s folder:\n' + "\n".join(found)


def test_a_stale_reference_is_found(tmp_path):
    planted = tmp_path / "x.py"
    planted.write_text(
        '"""See harness/commands/<name>.py and harness/procs/processes.py."""\n'
        "# harness.contracts.planning.merge_plan, procs/supervisor.watch, harness/launch/watch.Shutdown\n"
        'HELP = "runs harness/rank/worker.py; results/quick is a run directory"\n'
        "# who a rank is (distenv.py), its launcher (launcher.py), run.sh and dopt_rsag.py\n"
    )
    found = [line.split(": ", 1)[1] for line in stale([planted])]
    assert found == [
        "harness/commands/<name>.py: matches no file",
        "harness/procs/processes.py: no such file",
        "harness/launch/watch.Shutdown: no such module",
        "harness.contracts.planning.merge_plan: no such module",
        "distenv.py: no file of that name in the checkout",
        "run.sh: no file of that name in the checkout",
    ], found


def test_a_packages_row_naming_a_file_of_another_folder_is_found(tmp_path):
    planted = tmp_path / "ARCHITECTURE.md"
    planted.write_text(
        "| # | folder | its one job |\n|---|---|---|\n"
        "| 5 | `harness/contracts/` | the cell spec (`cell.py`), who a rank is (`distenv.py`) |\n"
        "| 6 | `harness/measure/` | the one timing loop (`loop.py`), the cell spec (`cell.py`) |\n"
        "| 24 | `harness/doctor/` | its runner (`timing/gpu_report.py`), its summary (`summary.py`), "
        "`timing/smoke.py` |\n"
    )
    assert package_rows(planted) == [
        "3: distenv.py: not in harness/contracts/",
        "4: cell.py: not in harness/measure/",
        "5: timing/smoke.py: not in harness/doctor/",
    ]
