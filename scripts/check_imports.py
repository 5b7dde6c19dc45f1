"""Check the house rules of docs/ARCHITECTURE.md ("Rules") on the package's own source, by reading it
(nothing is imported or run):

    python scripts/check_imports.py            # exit 1 and a list when a rule is broken
    python scripts/check_imports.py --graph    # also print every module's harness imports

1. No import cycle among the modules of `harness/` and `workloads/`, counting module-level and
   function-level imports alike, and the package `__init__` modules an import executes.
2. A function-local import only of an optional heavy dependency (ALLOWED_LOCAL), never of a harness
   module or of an ordinary dependency: those belong at the top of the module.
3. No file over MAX_FILE_LINES lines and no function over MAX_FUNCTION_LINES lines in `harness/`.
4. The layering of docs/ARCHITECTURE.md ("Packages"): FORBIDDEN lists what a package may not import,
   and generic code (GENERIC) never branches on a backend's name (`x == "horovod"`, `x in (...)`).
5. One launcher = one module: no code outside a launcher's own modules (LAUNCHER_HOMES) and the launcher
   registry branches on its name (`launcher == "srun"`); everything else asks the launcher or the recipe.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "workloads")
ALLOWED_LOCAL = ("horovod", "deepspeed", "byteps", "matplotlib", "transformers")
"""Optional or heavy dependencies a function may import where it needs them (with a comment why):
the frameworks are optional, matplotlib and transformers take seconds to import and most commands
never need them."""
FORBIDDEN = {
    # backends: a transport and its launch recipes; they never reach up into cells, schemes or runs
    "harness.backends": ("harness.cell", "harness.schemes", "harness.worker", "harness.execute", "harness.sweep",
                         "harness.commands", "harness.results", "harness.predict", "harness.report"),
    # launchers ask a backend's recipe (harness/launch/recipes.py), never a backend module
    "harness.launch": ("harness.backends",),
    "harness.testbed": ("harness.backends",),
    "harness.execute": ("harness.backends",),
    # the generic launch pieces backends build on
    "harness.launch.distenv": ("harness.backends", "harness.cell"),
    "harness.launch.slurm_env": ("harness.backends", "harness.cell"),
    "harness.launch.srun_plan": ("harness.backends", "harness.cell"),
    "harness.launch.sbatch_text": ("harness.backends", "harness.cell"),
    "harness.launch.supervise": ("harness.backends", "harness.cell"),
    "harness.launch.slurm_client": ("harness.backends", "harness.cell"),
    "harness.launch.watch": ("harness.backends", "harness.cell"),
    # warm ranks: the zygote pre-loads the worker by name (importlib), it never imports what is above it
    "harness.warm": ("harness.backends", "harness.cell", "harness.worker", "harness.schemes", "workloads",
                     "harness.launch.local", "harness.launch.base", "harness.launch.launchers", "harness.execute"),
    # schemes talk to a Transport object, never to a backend module
    "harness.schemes": ("harness.backends", "harness.commands", "harness.execute"),
    "workloads": ("harness.backends", "harness.schemes", "harness.cell"),
}
GENERIC = ("harness.launch", "harness.execute", "harness.sweep", "harness.cell", "harness.worker",
           "harness.results", "harness.measure", "harness.testbed", "harness.warm")
BACKEND_NAMES = frozenset({"torch", "horovod", "horovodrun", "deepspeed", "byteps"})
LAUNCHER_HOMES = {
    # each launcher's own modules (docs/ARCHITECTURE.md, "Launcher"): the only code that may name it
    "local": ("harness.launch.local",),
    "srun": ("harness.launch.srun", "harness.launch.srun_plan", "harness.launch.srun_task"),
    "nodes": ("harness.launch.nodes", "harness.launch.nodes_env", "harness.launch.nodes_ranks"),
    "testbed": ("harness.testbed",),
}
LAUNCHER_REGISTRY = ("harness.launch.base", "harness.launch.launchers", "harness.launch.recipes")
"""Where every launcher may be named: the registry, its recipe types."""
MAX_FILE_LINES = 300
MAX_FUNCTION_LINES = 60
LAYERS = (
    # docs/ARCHITECTURE.md ("Packages"), from the bottom up: a module may import its own layer and those
    # below; an import of a higher layer runs up the order. The longest matching prefix places a module.
    ("harness.errors", "harness.registry", "harness.atomic", "harness.schema"),
    ("harness.planning", "harness.training", "harness.netif", "harness.networks", "harness.devices"),
    ("harness.launch.distenv", "harness.launch.slurm_env", "harness.launch.srun_plan", "harness.launch.recipes",
     "harness.launch.sbatch_text", "harness.launch.supervise", "harness.launch.slurm_client",
     "harness.launch.watch", "harness.warm"),
    ("harness.backends",),
    ("workloads",),
    # what schemes build on: the one clock, the collective timer and fit, each scheme's simulation model
    ("harness.measure.timer", "harness.commbench.timer", "harness.commbench.sizes", "harness.commbench.fit",
     "harness.predict.model", "harness.predict.des", "harness.predict.network", "harness.predict.layer_hooks",
     "harness.predict.bucketed_sim", "harness.predict.ps_sim", "harness.predict.bytescheduler_sim",
     "harness.predict.dear_sim", "harness.predict.fsdp_sim", "harness.predict.horovod_sim"),
    ("harness.schemes",),
    ("harness.cell",),
    ("harness.measure", "harness.worker", "harness.launch.env"),
    ("harness.launch", "harness.testbed", "harness.commbench"),
    ("harness.results", "harness.execute", "harness.sweep", "harness.compare", "harness.compare_keys",
     "harness.compare_env", "harness.compare_stats", "harness.compare_markdown", "harness.baselines"),
    # whole sweeps on one kind of infrastructure (sbatch job plans, the testbed's sweeps)
    ("harness.launch.slurm_jobs", "harness.launch.sweep_jobs", "harness.testbed.sweep", "harness.testbed.measure"),
    ("harness.predict", "harness.report"),
    ("harness.advise",),  # `ddlbench advise`'s parts over the predictor; it measures through the command's runner
    ("harness.commands", "harness.cli", "harness.doctor", "harness"),
)
UPWARD_ALLOWED = {
    # the documented exceptions (docs/ARCHITECTURE.md, "Packages"), each with its reason
    ("harness.worker", "harness.results.gpu_env"): "a rank records its GPU with the environment table's reader",
    ("harness.commbench.fit", "harness.results"): "MG-WFBP reads alpha/beta from a stored commbench run",
    ("harness.commbench.fit", "harness.results.store"): "the same",
}


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
    it is no edge; naming it (`from harness.backends import BACKENDS` inside harness.backends.x) is."""
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
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def scan(known: dict[str, Path]):
    """(edges: module -> set of modules, local imports: [(file, line, what)], long functions)."""
    edges: dict[str, set[str]] = {m: set() for m in known}
    local, long_functions = [], []
    for mod, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_pkg = path.name == "__init__.py"

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child):
                    continue  # annotations only: never executed
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    hits = targets(child, mod, is_pkg, known)
                    edges[mod].update(hits)
                    if in_function:
                        what = ([a.name for a in child.names] if isinstance(child, ast.Import)
                                else [_resolve(child, mod, is_pkg)])
                        if hits or not all(w.split(".")[0] in ALLOWED_LOCAL for w in what):
                            local.append((path, child.lineno, ", ".join(what)))
                fn = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                if fn and mod.startswith("harness") and child.end_lineno - child.lineno + 1 > MAX_FUNCTION_LINES:
                    long_functions.append((path, child.lineno, child.name, child.end_lineno - child.lineno + 1))
                visit(child, in_function or fn or isinstance(child, ast.Lambda))

        visit(tree, False)
    return edges, local, long_functions


def layering(edges: dict[str, set[str]], known: dict[str, Path]) -> list[str]:
    """Imports FORBIDDEN by the layering, and comparisons with a backend's name in generic code."""
    out = []
    for mod, deps in sorted(edges.items()):
        for pkg, banned in FORBIDDEN.items():
            if mod == pkg or mod.startswith(pkg + "."):
                for dep in sorted(deps):
                    if any(dep == b or dep.startswith(b + ".") for b in banned):
                        out.append(f"{mod} imports {dep}: {pkg} may not import {', '.join(banned)}")
        if not any(mod == g or mod.startswith(g + ".") for g in GENERIC):
            continue
        for line, names in _compared(ast.parse(known[mod].read_text()), BACKEND_NAMES):
            out.append(f"{known[mod].relative_to(ROOT)}:{line}: generic code branches on backend "
                       f"name(s) {', '.join(sorted(names))}: ask the backend (BackendEntry) instead")
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
    for mod, path in sorted(known.items()):
        if not mod.startswith("harness") or any(mod == r for r in LAUNCHER_REGISTRY):
            continue
        for line, names in _compared(ast.parse(path.read_text()), frozenset(LAUNCHER_HOMES), "launcher"):
            foreign = sorted(n for n in names
                             if not any(mod == h or mod.startswith(h + ".") for h in LAUNCHER_HOMES[n]))
            if foreign:
                out.append(f"{path.relative_to(ROOT)}:{line}: branches on launcher name(s) {', '.join(foreign)} "
                           f"outside its module: ask the launcher or the backend's recipe instead")
    return out


def layer_of(mod: str) -> int:
    best, where = -1, len(LAYERS) - 1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, where = len(p), i
    return where


def upward(edges: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """(imports up the layer order not documented as exceptions, the documented ones found). Passing
    through a package whose __init__ imports nothing (harness, harness.launch) is no dependency."""
    bad, allowed = [], []
    for mod, deps in sorted(edges.items()):
        for dep in sorted(deps):
            if not edges[dep] and any(m.startswith(dep + ".") for m in edges):
                continue
            if layer_of(dep) > layer_of(mod):
                line = f"{mod} (layer {layer_of(mod)}) imports {dep} (layer {layer_of(dep)})"
                (allowed if (mod, dep) in UPWARD_ALLOWED else bad).append(line)
    return bad, allowed


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", action="store_true", help="print every module's harness imports")
    args = ap.parse_args(argv)
    known = modules()
    edges, local, long_functions = scan(known)
    long_files = [(p, n) for m, p in known.items() if m.startswith("harness")
                  for n in [len(p.read_text().splitlines())] if n > MAX_FILE_LINES]
    if args.graph:
        for m in sorted(edges):
            print(f"{m} -> {', '.join(sorted(edges[m])) or '-'}")
    found = cycles(edges)
    layers = layering(edges, known)
    up, up_allowed = upward(edges)
    for line in layers:
        print(f"layering: {line}")
    for line in up:
        print(f"upward import: {line}: move what it needs down, or document the exception")
    for comp in found:
        print(f"import cycle ({len(comp)} modules): {' <-> '.join(comp)}")
        for m in comp:
            print(f"    {m} imports {', '.join(sorted(edges[m] & set(comp)))}")
    for path, line, what in local:
        print(f"{path.relative_to(ROOT)}:{line}: function-local import of {what} (move it to the top; only "
              f"{', '.join(ALLOWED_LOCAL)} may be imported where used)")
    for path, n in long_files:
        print(f"{path.relative_to(ROOT)}: {n} lines, over {MAX_FILE_LINES}: split it into rooms")
    for path, line, name, n in long_functions:
        print(f"{path.relative_to(ROOT)}:{line}: function {name} has {n} lines, over {MAX_FUNCTION_LINES}")
    bad = len(found) + len(local) + len(long_files) + len(long_functions) + len(layers) + len(up)
    print(f"check_imports: {len(known)} modules, {sum(map(len, edges.values()))} harness imports; "
          f"{len(found)} cycle(s), {len(layers)} layering breach(es), {len(up)} upward import(s) "
          f"(+{len(up_allowed)} documented), {len(local)} function-local import(s) to move, {len(long_files)} file(s) "
          f"and {len(long_functions)} function(s) over size")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
