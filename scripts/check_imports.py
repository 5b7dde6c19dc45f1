"""The house rules of docs/ARCHITECTURE.md ("Rules") that import-linter cannot see, read from the source (nothing
of it is run): `python scripts/check_imports.py` exits 1 with a list when one is broken. Import statements are
import-linter's (pyproject.toml's contracts, `lint-imports`); this checker takes its graph (grimp's) and holds:
1. A load by name (`importlib.import_module(NAME)`, `__import__(NAME)`, NAME a literal, a literal table or an
   f-string of the module) is an edge of the graph, held to every contract as an import statement is
   (broken_by_loads()); a name no module has is refused, one known only at run time allowed only in
   RUN_TIME_LOADS. No import cycle through an import of a package that holds the importer (unseen_cycles()).
2. A function-local import only of an optional or heavy dependency (allowed_local()), outside LAZY.
4. Generic code (the contract `generic`'s modules) never branches on a backend's name (`x == "horovod"`).
5. No code outside a launcher's own folder (launcher_homes()) and its registry branches on the launcher's name.
"""

from __future__ import annotations

import ast
import copy
import re
import sys
from pathlib import Path

import grimp
import tomllib
from importlinter import configuration
from importlinter.contracts import acyclic_siblings, forbidden, independence, layers, protected  # noqa: F401
from importlinter.domain.contract import Contract

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "workloads")
HEAVY = ("matplotlib", "transformers", "torch.profiler", "torch.distributed.fsdp")
"""Dependencies every install has that take seconds to import: a function may import them where it needs them."""
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACT_TYPES = {c.type_name: c for c in Contract.__subclasses__()}  # those imported above, by their type's name
GENERIC = next(tuple(c["source_modules"]) for c in CONFIG["contracts"] if c["id"] == "generic")
"""Generic code (rule 4), as the contract `generic` lists it (it imports no backend's package either)."""
LAZY = ("harness.cli",)
"""The layer whose functions import what they run (rule 2; tests/unit/cli/test_startup.py: no torch imported)."""
RUN_TIME_LOADS = {
    "harness.warm.zygote": "the modules its command line names (--preload): its program, as `python -m` names one",
    "harness.warm.child": "the module a spawn request names, run as `python -m` runs it, and DDLBENCH_SCHEME_MODULES",
    "harness.rank.srun_task": "with --here, the module its command line names after -m: the task's program",
    "harness.schemes": "the modules DDLBENCH_SCHEME_MODULES names: a user's own schemes",
    "workloads.base": "a user's own model, named by its Python path",
}
"""The modules that load a module named only at run time, and why (a process's program or a user's own code)."""
LAUNCHER_REGISTRY = tuple(
    f"harness.{m}" for m in ("launchers", "launchers.choose", "contracts.launcher", "contracts.recipes")
)
"""Where every launcher may be named (rule 5): the registries."""
LAUNCHERS_PKG = ROOT / "harness" / "launchers"
BACKENDS_PKG = ROOT / "harness" / "backends"


def _under(mod: str, packages) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in packages)


def _registered_names(folder: Path, pattern: str) -> set[str]:
    """Names registered by the packages under `folder`, read from their source (no list of its own here)."""
    packages = [sub for sub in folder.iterdir() if (sub / "__init__.py").exists()]
    return {name for sub in packages for f in sub.rglob("*.py") for name in re.findall(pattern, f.read_text())}


def allowed_local() -> tuple[str, ...]:
    """Modules a function may import where it needs them: HEAVY, and every backend's `library`."""
    return HEAVY + tuple(sorted(_registered_names(BACKENDS_PKG, r'\blibrary="([\w.]+)"')))


def launcher_homes() -> dict[str, str]:
    """launcher name -> its own package (harness/launchers/<name>/): the only code that may name it."""
    return {p.name: f"harness.launchers.{p.name}" for p in LAUNCHERS_PKG.iterdir() if (p / "__init__.py").exists()}


def modules() -> dict[str, Path]:
    """module name -> its file, for every module of the packages."""
    paths = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p for p in paths}


def _walk(node: ast.AST, in_function: bool = False):
    """(node, whether inside a function) for each node in source order, `if TYPE_CHECKING:` blocks left out."""
    for child in ast.iter_child_nodes(node):
        test = child.test if isinstance(child, ast.If) else None
        if "TYPE_CHECKING" in (getattr(test, "id", None), getattr(test, "attr", None)):
            continue  # annotations only: never executed
        yield child, in_function
        yield from _walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def scan(known: dict[str, Path]):
    """(loads: (module, target) -> (line, how) of the first load by name making that edge; function-local
    imports to move, loads refused (named at run time outside RUN_TIME_LOADS, or no module): [(file, line, what)])."""
    loads: dict[tuple[str, str], tuple[int, str]] = {}
    local, unread, allowed = [], [], allowed_local()
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        table, others = constants(tree)
        for node, in_function in _walk(tree):
            if in_function and isinstance(node, (ast.Import, ast.ImportFrom)) and not _under(mod, LAZY):
                source = "." * getattr(node, "level", 0) + (getattr(node, "module", "") or "")
                what = [a.name for a in node.names] if isinstance(node, ast.Import) else [source]
                if not all(_under(w, allowed) and w.split(".")[0] not in ("", *PACKAGES) for w in what):
                    local.append((path, node.lineno, ", ".join(what)))
            how = _load_call(node)
            arg = node.args[0] if how and node.args else None
            names, at_run_time, missing = load_targets(arg, mod, known, table, others) if how else ([], False, [])
            for hit in names:
                loads.setdefault((mod, hit), (node.lineno, how))
            what = f"{how}({ast.unparse(arg) if arg else ''})"
            if at_run_time and mod not in RUN_TIME_LOADS:
                why = f"name it with a literal, a literal table or an f-string, or list {mod} in RUN_TIME_LOADS"
                unread.append((path, node.lineno, f"{what} loads a module named only at run time: {why} with why"))
            for name in missing:
                unread.append((path, node.lineno, f"{what} names {name}, which is no module"))
    return loads, local, unread


def _load_call(node: ast.AST) -> str:
    """ "importlib.import_module" or "__import__" when `node` is such a call, else ""."""
    f = node.func if isinstance(node, ast.Call) else None
    if isinstance(f, ast.Attribute) and f.attr == "import_module" and getattr(f.value, "id", "") == "importlib":
        return "importlib.import_module"
    return {"import_module": "importlib.import_module", "__import__": "__import__"}.get(getattr(f, "id", ""), "")


def _strings(node: ast.AST | None, table: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The strings a literal (a string, a name bound to one, a tuple/list/set of them, `*TABLE`) stands for."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.Name):
        return table.get(node.id)
    if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return None
    parts = [_strings(e.value if isinstance(e, ast.Starred) else e, table) for e in node.elts]
    return None if None in parts else tuple(s for part in parts for s in part)


def constants(tree: ast.Module) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """(name -> the strings it stands for, the names that also stand for others): the module's top-level literal
    strings and tables, and every loop variable (comprehensions' too) that takes the strings of such a table."""
    table: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        got = _strings(node.value, table) if isinstance(target, ast.Name) else None
        if got is not None:
            table[target.id] = got
    loops: dict[str, tuple[str, ...]] = {}
    others = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            parts = node.iter.elts if isinstance(node.iter, (ast.Tuple, ast.List)) else [node.iter]
            got = [_strings(p.value if isinstance(p, ast.Starred) else p, table) for p in parts]
            if any(got):
                loops[node.target.id] = loops.get(node.target.id, ()) + tuple(s for g in got for s in g or ())
                others |= {node.target.id} if None in got else set()
    return {**table, **loops}, others


def _pattern(node: ast.AST, here: str, table, others) -> tuple[list[str], bool]:
    """(regular expressions for the names `node` can stand for, whether it can also stand for a name known only
    at run time). An f-string's or a sum's run-time part is one name (`\\w+`) after a literal package prefix."""
    if isinstance(node, ast.Name) and node.id == "__name__":
        return [re.escape(here)], False
    got = _strings(node, table)
    if got is not None:
        return [re.escape(v) for v in got], isinstance(node, ast.Name) and node.id in others
    is_sum = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
    parts = node.values if isinstance(node, ast.JoinedStr) else [node.left, node.right] if is_sum else None
    if parts is None:
        return [], True
    regex = ""
    for part in parts:
        value = part.value if isinstance(part, ast.FormattedValue) else part
        alternatives, other = _pattern(value, here, table, others)
        if (other or not alternatives) and "." not in regex:
            return [], True  # no literal package before the run-time part: any module at all
        regex += r"\w+" if other or not alternatives else "(?:" + "|".join(alternatives) + ")"
    return [regex], False


def load_targets(node: ast.AST | None, here: str, known: dict[str, Path], table, others):
    """(the house's modules a load by name names, whether it may also load a module named only at run time, the
    literal names of the house's packages it names that are no module: a typo, a moved one)."""
    regexes, other = _pattern(node, here, table, others) if node is not None else ([], True)
    found = sorted(m for m in known if m != here and any(re.fullmatch(regex, m) for regex in regexes))
    missing = [n for n in _strings(node, table) or () if n.split(".")[0] in PACKAGES and n not in known]
    return found, other, missing


def broken_contracts(graph: grimp.ImportGraph) -> set[str]:
    """The names of pyproject.toml's import contracts that `graph` breaks, checked as `lint-imports` checks them."""
    configuration.configure()
    session = {key: value for key, value in CONFIG.items() if key != "contracts"}
    out = set()
    for c in CONFIG["contracts"]:
        options = {key: str(v).lower() if isinstance(v, bool) else v for key, v in c.items()}
        contract = CONTRACT_TYPES[c["type"]](name=c["name"], session_options=session, contract_options=options)
        if not contract.check(copy.deepcopy(graph), verbose=False).kept:
            out.add(c["name"])
    return out


def broken_by_loads(graph: grimp.ImportGraph, loads: dict, known: dict[str, Path]) -> list[str]:
    """Each load by name that breaks a contract the import statements keep (up the layers, to a peer, into a
    launcher's folder, a backend from generic code, a cycle), on one line: where, the load, the contract."""
    kept = broken_contracts(graph)
    if not broken_contracts(with_loads(graph, loads)) - kept:
        return []  # the usual case, at once; else each load alone, to name it
    out = []
    for (mod, dep), (line, how) in sorted(loads.items()):
        for name in sorted(broken_contracts(with_loads(graph, {(mod, dep): (line, how)})) - kept):
            out.append(f'{known[mod].relative_to(ROOT)}:{line}: {mod} loads {dep} by {how}, which breaks "{name}"')
    return out


def with_loads(graph: grimp.ImportGraph, loads: dict) -> grimp.ImportGraph:
    """A copy of `graph` with the loads by name as imports (their line, and how as the line's text)."""
    out = copy.deepcopy(graph)
    for (mod, dep), (line, how) in loads.items():
        out.add_import(importer=mod, imported=dep, line_number=line, line_contents=how)
    return out


def _compared(tree: ast.AST, names: frozenset, about: str = "") -> list[tuple[int, set]]:
    """(line, the names of `names` compared with there) for each comparison with one; with `about`, only those whose
    text has it (`row["launcher"] == "srun"`: "local" is also a scheme)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and about in re.sub("[\"']", "", ast.unparse(node)):
            sides = [node.left, *node.comparators]
            consts = sides + [e for c in sides if isinstance(c, (ast.Tuple, ast.List, ast.Set)) for e in c.elts]
            found = {c.value for c in consts if isinstance(c, ast.Constant) and c.value in names}
            if found:
                out.append((node.lineno, found))
    return out


def name_rules(known: dict[str, Path]) -> list[str]:
    """Comparisons with a backend's name in generic code (rule 4), with a launcher's outside its folder (rule 5)."""
    backends = frozenset(_registered_names(BACKENDS_PKG, r'BackendEntry\(\s*name="([\w-]+)"') | {"horovodrun"})
    out, homes = [], launcher_homes()
    for mod, path in sorted((m, p) for m, p in known.items() if m.startswith("harness.")):
        tree, where = ast.parse(path.read_text()), path.relative_to(ROOT)
        for line, names in _compared(tree, backends) if _under(mod, GENERIC) else ():
            out.append(f"{where}:{line}: generic code branches on backend name(s) {', '.join(sorted(names))}")
        for line, names in () if mod in LAUNCHER_REGISTRY else _compared(tree, frozenset(homes), "launcher"):
            foreign = ", ".join(sorted(n for n in names if not _under(mod, [homes[n]])))
            if foreign:
                out.append(f"{where}:{line}: branches on launcher name(s) {foreign} outside its module")
    return out


def unseen_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Import cycles through an import of a package that holds the importer, which acyclic_siblings does not count
    (an __init__ is no sibling of its modules), loads included: each once, from the module making that import."""
    out, seen = [], set()
    for mod in sorted(graph.modules):
        for dep in sorted(d for d in graph.find_modules_directly_imported_by(mod) if mod.startswith(d + ".")):
            back = graph.find_shortest_chain(importer=dep, imported=mod)
            if back and frozenset(back) not in seen:
                seen.add(frozenset(back))
                out.append([mod, *back[:-1]])
    return out


def main() -> int:
    known = modules()
    loads, local, unread = scan(known)
    sys.path.insert(0, str(ROOT))  # the graph of this checkout's packages, as `lint-imports` builds it
    graph = grimp.build_graph(*CONFIG["root_packages"], cache_dir=None, exclude_type_checking_imports=True)
    broken = broken_by_loads(graph, loads, known)
    graph = with_loads(graph, loads)
    names = name_rules(known) + [f"{path.relative_to(ROOT)}:{line}: {what}" for path, line, what in unread]
    found = unseen_cycles(graph)
    for line in names:
        print(f"layering: {line}")
    for line in broken:
        print(f"load breaks a contract: {line}")
    for cycle in found:
        print(f"import cycle ({len(cycle)} modules): {' -> '.join(cycle + cycle[:1])}")
        for m, dep in zip(cycle, cycle[1:] + cycle[:1]):
            (details, *_) = graph.get_import_details(importer=m, imported=dep)
            how = f"loads by {details['line_contents']}" if (m, dep) in loads else "imports"
            print(f"    {known[m].relative_to(ROOT)}:{details['line_number']}: {m} {how} {dep}")
    for path, line, what in local:
        where = f"{path.relative_to(ROOT)}:{line}: function-local import of {what}"
        print(f"{where} (move it to the top; only {', '.join(allowed_local())} may be imported where used)")
    print(
        f"check_imports: {len(known)} modules, {len(loads)} loads by name; {len(found)} cycle(s) through a "
        f"package's own import, {len(names)} name or load breach(es), {len(broken)} load(s) breaking a contract, "
        f"{len(local)} function-local import(s) to move"
    )
    return 1 if found or local or names or broken else 0


if __name__ == "__main__":
    sys.exit(main())
