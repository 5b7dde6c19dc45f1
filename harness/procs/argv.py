"""A rank's command line (docs/ARCHITECTURE.md, "Launching"): the interpreter every launcher starts, the rank
entry point it runs, and where the code it imports lives.

    [*python_argv(), *worker_argv(cell_dir)]   # python -P -m harness.rank.worker --cell D/cell.json --out D

and that command line written into a batch script (`argv_words`, `step_cpus`: the words every launch block of a
backend's `SbatchRecipe` writes the same way, harness/contracts/recipes/sbatch.py).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from harness.core.atomic import write_text_atomic

WORKER_MODULE = "harness.rank.worker"
"""The rank entry point every launcher starts."""
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""Where this driver's harness/ and workloads/ live: every rank, whoever starts it (our spawner, horovodrun,
the deepspeed launch program, the zygote), imports exactly this code (-P keeps the working directory off sys.path,
this goes first on PYTHONPATH), not whatever an install elsewhere points at; recorded as package_path."""


def python_argv() -> list[str]:
    """This interpreter, in safe-path mode (-P): a rank imports the installed harness, never a stray
    `harness/` folder in its working directory."""
    return [sys.executable, "-P"]


CELL_FILE = "cell.json"
"""The cell spec a rank reads (`--cell CELL_DIR/cell.json`), written by `write_cell` only."""


def write_cell(cell, cell_dir: Path) -> Path:
    """Write CELL_DIR/cell.json for the cell's ranks (creating CELL_DIR), atomically; returns its path. Every
    launcher writes it through here."""
    cell_dir.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(cell_dir / CELL_FILE, cell.to_json())


def worker_argv(cell_dir: Path, module: str = WORKER_MODULE) -> list[str]:
    """`-m harness.rank.worker --cell CELL_DIR/cell.json --out CELL_DIR` (without the interpreter)."""
    return ["-m", module, "--cell", str(cell_dir / CELL_FILE), "--out", str(cell_dir)]


def launcher_exe(name: str) -> str:
    """A framework's console script next to this interpreter (so it runs the same python), else on PATH."""
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else name


# ------------------------------------------------------------------------------- shell words

_VAR_WORD = re.compile(r"(?:[\w./:=@%+,-]|\$\{[A-Za-z_]\w*\})*\$\{[A-Za-z_]\w*\}(?:[\w./:=@%+,-]|\$\{[A-Za-z_]\w*\})*")


def word(arg: str) -> str:
    """One command word: quoted as is, except that ${NAME} references to the script's variables stay
    live (in double quotes)."""
    return f'"{arg}"' if _VAR_WORD.fullmatch(arg) else shlex.quote(arg)


def argv_words(argv) -> str:
    """A command (a batch script's `SbatchSpec.command`) as shell words."""
    return " ".join(word(a) for a in argv)


def step_cpus(cpus_per_task: int) -> str:
    # "The number of cpus per task specified for salloc or sbatch is not automatically inherited by
    # srun" (man srun, Slurm 22.05, --cpus-per-task): without it a step gives each worker one core.
    # Saying it again is right for every version.
    return f"--cpus-per-task={cpus_per_task}"
