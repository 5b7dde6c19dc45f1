"""Check the house rules of docs/ARCHITECTURE.md ("Rules") that no library sees, by reading the package's own
source (nothing is imported or run):

    python scripts/check_imports.py            # exit 1 and a list when a rule is broken
    python scripts/check_imports.py --graph    # also print every module's harness imports
    python scripts/check_imports.py --layers   # the layers, bottom first, as pyproject.toml states them

Import statements are import-linter's (pyproject.toml, `[tool.importlinter]`, checked by `lint-imports`): the
layers (and every module of harness/ in one of them: `exhaustive`), no import cycle (`acyclic_siblings`), no
launcher's folder importing another's, no command importing another, the study's wing imported only by the
command line. This checker holds what that library cannot see, numbered as docs/ARCHITECTURE.md ("Rules") numbers them:

1. Loads by name (`importlib.import_module(NAME)`, `__import__(NAME)`) are imports: NAME a literal, a literal
   table or an f-string of this module (or a constant it imports) is followed like an import statement and held
   to the layers, which this checker reads from pyproject.toml (LAYERS): no load up them or to a peer. A name no
   module has is refused; a name known only at run time (a module a process is told to run, a user's own) is
   allowed only in the modules RUN_TIME_LOADS lists with why. No import cycle through an edge import-linter
   does not count: a load by name, or an import of a package that holds the importer (unseen_cycles()).
2. A function-local import only of an optional or heavy dependency (allowed_local(): the heavy ones, HEAVY,
   and every backend's library, read from its package), never of a harness module or of an ordinary
   dependency: those belong at the top of the module. One layer loads lazily (LAZY): the command line
   declares its commands with what declaring them needs, and a function imports what runs the command, so
   that `ddlbench --help`, `ddlbench COMMAND --help` and `ddlbench list` import no torch.
4. Generic code (GENERIC) never branches on a backend's name (`x == "horovod"`, `x in (...)`).
5. One launcher = one folder: no code outside a launcher's own folder (launcher_homes()) and the launcher
   registry branches on its name (`launcher == "srun"`); everything else asks the launcher or the recipe.
6. A launcher behind its contract: no module outside harness/launchers/ imports a launcher's folder (any
   package there, sbatch/ included), no exceptions; the others choose a launcher through
   harness/launchers/choose.py and ask it, read a launcher's variables through harness/launchers/identity.py,
   or import what every layer shares from below (a launcher's recipe type and the helpers a backend builds it
   with: harness/contracts/recipes/; rate labels: harness/networks/; Slurm's notations: harness/contracts/).
Rules 5 and 6 find the launchers' folders in the tree (launcher_homes(), launcher_folders()), so a new launcher
edits no list here. Rule 3 (sizes) has no line cap here: ruff's complexity rules judge a function.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import deque
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "workloads")
HEAVY = ("matplotlib", "transformers", "torch.profiler")
"""Dependencies every install has that a function may import where it needs them (with a comment why): they
take seconds to import and most commands never need them. The optional ones are the backends' libraries
(allowed_local)."""
PYPROJECT = ROOT / "pyproject.toml"


def contract_layers(pyproject: Path = PYPROJECT) -> tuple[tuple[str, ...], ...]:
    """The layers contract of pyproject.toml (`[tool.importlinter]`, its contract of type `layers`), bottom
    first: each layer the folders on its line (peers, independent of each other) as packages of its container
    (harness), optional ones unwrapped; and workloads/, a package of its own, on the line of the highest folder
    its contract "workloads-below" names (those that never import it: the layer below and its peers)."""
    config = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    (container,) = contract["containers"]
    layers = [
        tuple(f"{container}.{name.strip().strip('()')}" for name in line.split("|"))
        for line in reversed(contract["layers"])
    ]
    (below,) = [c["source_modules"] for c in config["contracts"] if c.get("id") == "workloads-below"]
    top = max(i for i, peers in enumerate(layers) if set(peers) & set(below))
    layers[top] += ("workloads",)
    return tuple(layers)


LAYERS = contract_layers()
"""docs/ARCHITECTURE.md ("Packages"), from the bottom up: each layer its folders (a package of harness/, or the
workloads package); a module may import its own folder and those of the layers below, not a peer's."""
LAZY = ("harness.cli",)
"""The layer whose functions import what they run (rule 2): a command is declared (its options, its help)
without importing the layers that run it (tests/unit/cli/test_startup.py holds that no torch is imported)."""
GROUND = ("harness",)
"""Package faces below every layer: the root package's __init__ only names the version."""
RUN_TIME_LOADS = {
    "harness.warm.zygote": "the modules its command line names (--preload): its program, as `python -m` names one",
    "harness.warm.child": "the module a spawn request names, run as `python -m` runs it, and DDLBENCH_SCHEME_MODULES",
    "harness.rank.srun_task": "with --here, the module its command line names after -m: the task's program",
    "harness.schemes": "the modules DDLBENCH_SCHEME_MODULES names: a user's own schemes",
    "workloads.base": "a user's own model, named by its Python path",
}
"""The modules that load a module named only at run time, and why: each is a process's program or a user's
own code. Every other load names its module in the source, so the layering and the cycle check see it."""
GENERIC = (
    "harness.launchers",
    "harness.spawner",
    "harness.experiment",
    "harness.rank",
    "harness.results",
    "harness.measure",
    "harness.testbed",
    "harness.warm",
    "harness.procs",
    "harness.contracts",
    "harness.core",
)
LAUNCHERS_PKG = ROOT / "harness" / "launchers"
BACKENDS_PKG = ROOT / "harness" / "backends"


def _packages(folder: Path) -> list[Path]:
    """The packages in `folder` (each backend's, each launcher's), by name."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def _registered_names(folder: Path, pattern: str) -> set[str]:
    """Names registered by the packages under `folder` (each subfolder's `pattern` argument), read from
    their source: the checker knows every backend and launcher without a list of its own."""
    out = set()
    for sub in _packages(folder):
        for f in sub.rglob("*.py"):
            out.update(re.findall(pattern, f.read_text()))
    return out


def backend_names() -> frozenset:
    """Every backend's registered name (BackendEntry(name="...")) and its framework launcher's words."""
    return frozenset(_registered_names(BACKENDS_PKG, r'BackendEntry\(\s*name="([\w-]+)"') | {"horovodrun"})


def allowed_local() -> tuple[str, ...]:
    """Modules a function may import where it needs them: HEAVY, and every backend's optional library (its
    BackendEntry's `library`, which is also the module its code and the schemes needing its engine import
    where they use it), read from the backends' source: a new backend adds nothing here."""
    return HEAVY + tuple(sorted(_registered_names(BACKENDS_PKG, r'\blibrary="([\w.]+)"')))


def launcher_homes() -> dict[str, tuple[str, ...]]:
    """launcher name -> its own package (harness/launchers/<name>/): the only code that may name it."""
    return {p.name: (f"harness.launchers.{p.name}",) for p in _packages(LAUNCHERS_PKG)}


LAUNCHER_REGISTRY = (
    "harness.contracts.launcher",
    "harness.contracts.recipes",
    "harness.launchers.choose",
    "harness.launchers",
)
"""Where every launcher may be named: the registries."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            out[module_name(path)] = path
    return out


def _resolve(node: ast.ImportFrom, here: str, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = here.split(".") if is_pkg else here.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def targets(node: ast.AST, here: str, is_pkg: bool, known: dict[str, Path]) -> list[str]:
    """Harness modules an import statement executes: the module, its parent packages' __init__, and
    for `from pkg import name` the submodule `pkg.name` when there is one. A package that contains the
    importing module is already initialised (or initialising) when the module runs, so passing through
    it is no edge; naming it (`from harness.backends import PLUGINS` inside a backend's package) is."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        mod = _resolve(node, here, is_pkg)
        subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known]
        # `from pkg import submodule` inside pkg needs only the submodule, not pkg's own names
        only_subs = len(subs) == len(node.names) and here.startswith(mod + ".")
        names = ([] if only_subs else [mod]) + subs
    out = []
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            ancestor = here.startswith(prefix + ".")
            if prefix in known and prefix != here and (i == len(parts) or not ancestor):
                out.append(prefix)
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def scan(known: dict[str, Path]):
    """(edges: module -> set of modules, local imports: [(file, line, what)], sites: (module, dep) -> (line,
    how) of the first statement or load that makes the edge, run-time loads outside RUN_TIME_LOADS and names
    that are no module: [(file, line, what)])."""
    edges: dict[str, set[str]] = {m: set() for m in known}
    sites: dict[tuple[str, str], tuple[int, str]] = {}
    local = []
    allowed = allowed_local()
    tables = constants(known)
    unread = []
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_pkg = path.name == "__init__.py"
        loops = loop_values(tree, tables[mod])

        def edge(dep: str, line: int, how: str) -> None:
            edges[mod].add(dep)
            sites.setdefault((mod, dep), (line, how))

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child):
                    continue  # annotations only: never executed
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    hits = targets(child, mod, is_pkg, known)
                    for hit in hits:
                        edge(hit, child.lineno, "imports")
                    if in_function and not any(mod == p or mod.startswith(p + ".") for p in LAZY):
                        what = (
                            [a.name for a in child.names]
                            if isinstance(child, ast.Import)
                            else [_resolve(child, mod, is_pkg)]
                        )
                        if hits or not all(any(w == a or w.startswith(a + ".") for a in allowed) for w in what):
                            local.append((path, child.lineno, ", ".join(what)))
                how = _load_call(child)
                if how:
                    names, at_run_time = load_targets(
                        child.args[0] if child.args else None, mod, is_pkg, known, tables[mod], loops
                    )
                    for hit in names:
                        edge(hit, child.lineno, how)
                    what = ast.unparse(child.args[0]) if child.args else ""
                    if at_run_time and mod not in RUN_TIME_LOADS:
                        unread.append(
                            (
                                path,
                                child.lineno,
                                f"{how}({what}) loads a module named only at run time: "
                                f"name it with a literal, a literal table or an "
                                f"f-string of this module, or list {mod} in "
                                f"RUN_TIME_LOADS with why",
                            )
                        )
                    for name in nowhere(child.args[0] if child.args else None, tables[mod], loops, known):
                        unread.append((path, child.lineno, f"{how}({what}) names {name}, which is no module"))
                fn = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                visit(child, in_function or fn or isinstance(child, ast.Lambda))

        visit(tree, False)
    return edges, local, sites, unread


# --- loads by name ------------------------------------------------------------------------------------


def _load_call(node: ast.AST) -> str:
    """ "importlib.import_module" or "__import__" when `node` is such a call, else ""."""
    if not isinstance(node, ast.Call):
        return ""
    f = node.func
    if (
        isinstance(f, ast.Attribute)
        and f.attr == "import_module"
        and isinstance(f.value, ast.Name)
        and f.value.id == "importlib"
    ):
        return "importlib.import_module"
    if isinstance(f, ast.Name) and f.id in ("import_module", "__import__"):
        return "importlib.import_module" if f.id == "import_module" else "__import__"
    return ""


def _strings(node: ast.AST | None, table: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The strings a literal (a string, a name bound to one, a tuple/list/set of them, `*TABLE`) stands
    for, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.Name):
        return table.get(node.id)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out: list[str] = []
        for elt in node.elts:
            got = _strings(elt.value if isinstance(elt, ast.Starred) else elt, table)
            if got is None:
                return None
            out += got
        return tuple(out)
    return None


def constants(known: dict[str, Path]) -> dict[str, dict[str, tuple[str, ...]]]:
    """module -> {name: the strings it stands for}: its module-level assignments of a literal string or
    table, and the names it imports from another module's such constants."""
    trees = {mod: ast.parse(path.read_text()) for mod, path in known.items()}
    tables: dict[str, dict[str, tuple[str, ...]]] = {mod: {} for mod in known}
    for _ in range(3):  # a constant built from an imported one: a few rounds reach every chain here
        for mod, tree in trees.items():
            for node in tree.body:
                if isinstance(node, ast.ImportFrom):
                    there = tables.get(_resolve(node, mod, known[mod].name == "__init__.py"), {})
                    for a in node.names:
                        if a.name in there:
                            tables[mod][a.asname or a.name] = there[a.name]
                target = (
                    node.targets[0]
                    if isinstance(node, ast.Assign) and len(node.targets) == 1
                    else node.target
                    if isinstance(node, ast.AnnAssign)
                    else None
                )
                if isinstance(target, ast.Name):
                    got = _strings(node.value, tables[mod])
                    if got is not None:
                        tables[mod][target.id] = got
    return tables


def loop_values(tree: ast.AST, table: dict[str, tuple[str, ...]]) -> dict[str, tuple[tuple[str, ...], bool]]:
    """Loop variable -> (the strings it takes from literal tables, whether it also takes others), for every
    `for NAME in ITERABLE` (and comprehension) of the module whose iterable names at least one table."""
    out: dict[str, tuple[tuple[str, ...], bool]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            parts = node.iter.elts if isinstance(node.iter, (ast.Tuple, ast.List)) else [node.iter]
            values, other = [], False
            for part in parts:
                got = _strings(part.value if isinstance(part, ast.Starred) else part, table)
                values += got or ()
                other = other or got is None
            if values:
                before = out.get(node.target.id, ((), False))
                out[node.target.id] = (before[0] + tuple(values), before[1] or other)
    return out


def _pattern(node: ast.AST, here: str, table, loops) -> tuple[list[str], bool]:
    """(regular expressions for the names `node` can stand for, whether it can also stand for a name known
    only at run time). An f-string's or a sum's run-time part stands for one name (`\\w+`) after a literal
    prefix naming a package (`f"harness.launchers.{name}.launcher"`, `f"{__name__}.{mod.name}"`)."""
    if isinstance(node, ast.Name) and node.id == "__name__":
        return [re.escape(here)], False
    if isinstance(node, ast.Name) and node.id in loops:
        values, other = loops[node.id]
        return [re.escape(v) for v in values], other
    got = _strings(node, table)
    if got is not None:
        return [re.escape(v) for v in got], False
    parts = (
        node.values
        if isinstance(node, ast.JoinedStr)
        else [node.left, node.right]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
        else None
    )
    if parts is None:
        return [], True
    regex = ""
    for part in parts:
        value = part.value if isinstance(part, ast.FormattedValue) else part
        alternatives, other = _pattern(value, here, table, loops)
        if other or not alternatives:
            if "." not in regex:
                return [], True  # no literal package before the run-time part: any module at all
            regex += r"\w+"
        else:
            regex += "(?:" + "|".join(alternatives) + ")"
    return [regex], False


def load_targets(
    node: ast.AST | None, here: str, is_pkg: bool, known: dict[str, Path], table, loops
) -> tuple[list[str], bool]:
    """(the house's modules a load by name executes, as `targets` gives an import's; whether it may also
    load a module named only at run time)."""
    if node is None:
        return [], True
    regexes, other = _pattern(node, here, table, loops)
    out = []
    for regex in regexes:
        for name in sorted(m for m in known if re.fullmatch(regex, m)):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in known and prefix != here and (i == len(parts) or not here.startswith(prefix + ".")):
                    out.append(prefix)
    return out, other


def nowhere(node: ast.AST | None, table, loops, known: dict[str, Path]) -> list[str]:
    """Literal names of the house's packages that a load names and that are no module (a typo, a moved one)."""
    names = loops[node.id][0] if isinstance(node, ast.Name) and node.id in loops else _strings(node, table) or ()
    return [n for n in names if n.split(".")[0] in PACKAGES and n not in known]


def layering(edges: dict[str, set[str]], known: dict[str, Path]) -> list[str]:
    """Comparisons with a backend's name in generic code, and with a launcher's outside its own modules."""
    out = []
    for mod in sorted(edges):
        if not any(mod == g or mod.startswith(g + ".") for g in GENERIC):
            continue
        for line, names in _compared(ast.parse(known[mod].read_text()), backend_names()):
            out.append(
                f"{known[mod].relative_to(ROOT)}:{line}: generic code branches on backend "
                f"name(s) {', '.join(sorted(names))}: ask the backend (BackendEntry) instead"
            )
    return out + launcher_names(known)


def _compared(tree: ast.AST, names: frozenset, about: str = "") -> list[tuple[int, set]]:
    """(line, the names among `names` compared with there) for each comparison with such a constant;
    with `about`, only comparisons of an expression whose text contains it (`row["launcher"] == "srun"`:
    "local" is also a scheme's name)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and about in ast.unparse(node).replace('"', "").replace("'", ""):
            sides = [node.left, *node.comparators]
            consts = sides + [e for c in sides if isinstance(c, (ast.Tuple, ast.List, ast.Set)) for e in c.elts]
            found = {c.value for c in consts if isinstance(c, ast.Constant) and c.value in names}
            if found:
                out.append((node.lineno, found))
    return out


def launcher_names(known: dict[str, Path]) -> list[str]:
    """Comparisons with a launcher's name outside its own modules and the registry (rule 5)."""
    out = []
    homes = launcher_homes()
    for mod, path in sorted(known.items()):
        if not mod.startswith("harness") or any(mod == r for r in LAUNCHER_REGISTRY):
            continue
        for line, names in _compared(ast.parse(path.read_text()), frozenset(homes), "launcher"):
            foreign = sorted(n for n in names if not any(mod == h or mod.startswith(h + ".") for h in homes[n]))
            if foreign:
                out.append(
                    f"{path.relative_to(ROOT)}:{line}: branches on launcher name(s) {', '.join(foreign)} "
                    f"outside its module: ask the launcher or the backend's recipe instead"
                )
    return out


def layer_of(mod: str) -> int:
    """The layer a module belongs to: the folder it lives in (GROUND: -1); ValueError for a module in
    no layer (a loose module of harness/, which lint-imports refuses: the layers contract is `exhaustive`)."""
    if mod in GROUND:
        return -1
    for i, peers in enumerate(LAYERS):
        if any(mod == pkg or mod.startswith(pkg + ".") for pkg in peers):
            return i
    raise ValueError(mod)


def folder_of(mod: str) -> str:
    """The folder (a layer's package) a module lives in; the module itself for GROUND."""
    return next((pkg for peers in LAYERS for pkg in peers if mod == pkg or mod.startswith(pkg + ".")), mod)


def launcher_folders() -> tuple[str, ...]:
    """Every launcher's folder as a package (harness/launchers/<name>/; sbatch/, which renders batch scripts,
    too): the folders rule 6 keeps behind the launcher contract."""
    return tuple(f"harness.launchers.{p.name}" for p in _packages(LAUNCHERS_PKG))


def launchers_behind_their_contract(
    edges: dict[str, set[str]], sites: dict | None = None, known: dict[str, Path] | None = None
) -> list[str]:
    """Imports of a launcher's folder from outside harness/launchers/ (rule 6), each on one line: where, the
    importer, the launcher's module, what to do instead. No exceptions: a backend builds a launcher's recipe
    from harness/contracts/recipes/, a rank's entry point reads a launcher's variables through
    harness/launchers/identity.py."""
    folders, out = launcher_folders(), []
    for mod, deps in sorted(edges.items()):
        if mod == "harness.launchers" or mod.startswith("harness.launchers."):
            continue
        hits: dict[str, str] = {}  # folder -> the deepest of its modules imported (one line per folder)
        for dep in sorted(deps):
            folder = next((f for f in folders if dep == f or dep.startswith(f + ".")), None)
            if folder is not None:
                hits[folder] = max(hits.get(folder, ""), dep, key=len)
        for dep in hits.values():
            line = (sites or {}).get((mod, dep), (0, ""))[0]
            where = f"{_relative(known[mod])}:{line}: " if known and mod in known and line else ""
            out.append(
                f"{where}{mod} imports {dep}: a launcher's folder is imported only inside harness/launchers/; "
                f"choose the launcher through harness/launchers/choose.py and ask it, or move what it "
                f"shares below (harness/testbed/, harness/networks/, harness/contracts/)"
            )
    return out


def upward(edges: dict[str, set[str]], sites: dict, known: dict[str, Path] | None = None) -> list[str]:
    """Loads by name up the layers or to a peer on the same line (no exceptions: move what is needed down),
    each on one line: where (file:line, when `known` says), the module and its folder, the load, its target
    and its folder. Import statements are import-linter's (pyproject.toml): an edge whose first site is an
    import statement is left to it."""
    bad = []
    for mod, deps in sorted(edges.items()):
        try:
            here = layer_of(mod)
        except ValueError:
            continue
        for dep in sorted(deps):
            line, how = sites.get((mod, dep), (0, "imports"))
            try:
                there = layer_of(dep)
            except ValueError:
                continue
            if how != "imports" and (there > here or (there == here and folder_of(dep) != folder_of(mod))):
                where = f"{_relative(known[mod])}:{line}: " if known and mod in known and line else ""
                bad.append(f"{where}{mod} ({folder_of(mod)}) loads {dep} ({folder_of(dep)}) by {how}")
    return bad


def _relative(path: Path) -> Path:
    try:
        return path.relative_to(ROOT)
    except ValueError:
        return path


def unseen_cycles(edges: dict[str, set[str]], sites: dict) -> list[list[str]]:
    """Import cycles through an edge import-linter's acyclic_siblings contract does not count (rule 1): a load by
    name, or an import of a package that holds the importer (a package's __init__ is no sibling of its modules).
    Each cycle once, in import order, from the module that makes such an edge; the others are lint-imports'."""
    out, seen = [], set()
    for (mod, dep), (_, how) in sorted(sites.items()):
        if how == "imports" and not mod.startswith(dep + "."):
            continue
        back = _chain(edges, dep, mod)
        if back and frozenset(back) not in seen:
            seen.add(frozenset(back))
            out.append([mod, *back[:-1]])
    return out


def _chain(edges: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A shortest chain of imports from `start` to `goal`, both included (breadth first); None when none."""
    chains = {start: [start]}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        if here == goal:
            return chains[here]
        for there in sorted(edges.get(here, ())):
            if there not in chains:
                chains[there] = chains[here] + [there]
                queue.append(there)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", action="store_true", help="print every module's harness imports")
    ap.add_argument("--layers", action="store_true", help="print the layer order (one folder each), bottom first")
    args = ap.parse_args(argv)
    known = modules()
    edges, local, sites, unread = scan(known)
    if args.graph:
        for m in sorted(edges):
            print(f"{m} -> {', '.join(sorted(edges[m])) or '-'}")
        for m, why in RUN_TIME_LOADS.items():
            print(f"{m} -> (a module named at run time: {why})")
    if args.layers:
        for i, peers in enumerate(LAYERS):
            for pkg in peers:
                here = (ROOT / pkg.replace(".", "/")).is_dir()  # an optional layer may not be here yet
                print(
                    f"{i + 1:2d}  {pkg if here else f'({pkg}: optional, not here)'}"
                    + (f"  (peers: {', '.join(p for p in peers if p != pkg)})" if len(peers) > 1 else "")
                )
        return 0
    found = unseen_cycles(edges, sites)
    layers = (
        layering(edges, known)
        + launchers_behind_their_contract(edges, sites, known)
        + [f"{_relative(path)}:{line}: {what}" for path, line, what in unread]
    )
    up = upward(edges, sites, known)
    for line in layers:
        print(f"layering: {line}")
    for line in up:
        print(f"upward load: {line}: move what it needs down")
    for cycle in found:
        print(f"import cycle ({len(cycle)} modules): {' -> '.join(cycle + cycle[:1])}")
        for m, dep in zip(cycle, cycle[1:] + cycle[:1]):
            line, how = sites[(m, dep)]
            print(f"    {_relative(known[m])}:{line}: {m} {how if how == 'imports' else f'loads by {how}'} {dep}")
    for path, line, what in local:
        print(
            f"{path.relative_to(ROOT)}:{line}: function-local import of {what} (move it to the top; only "
            f"{', '.join(allowed_local())} may be imported where used)"
        )
    bad = len(found) + len(local) + len(layers) + len(up)
    print(
        f"check_imports: {len(known)} modules, {sum(map(len, edges.values()))} harness imports; "
        f"{len(found)} cycle(s) through a load or a package's own import, {len(layers)} layering breach(es), "
        f"{len(up)} upward load(s), {len(local)} function-local import(s) to move"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
