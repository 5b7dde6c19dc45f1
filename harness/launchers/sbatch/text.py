"""Words of a batch script that every launch style writes the same way (pure; no backend, no spec type:
a spec is anything with `command` and `cpus_per_task`). Backends build their launch blocks from these
(docs/ARCHITECTURE.md, "Launching")."""

from __future__ import annotations

import re
import shlex

_VAR_WORD = re.compile(r"(?:[\w./:=@%+,-]|\$\{[A-Za-z_]\w*\})*\$\{[A-Za-z_]\w*\}(?:[\w./:=@%+,-]|\$\{[A-Za-z_]\w*\})*")


def word(arg: str) -> str:
    """One command word: quoted as is, except that ${NAME} references to the script's variables stay
    live (in double quotes)."""
    return f'"{arg}"' if _VAR_WORD.fullmatch(arg) else shlex.quote(arg)


def argv_words(spec) -> str:
    """The spec's command as shell words."""
    return " ".join(word(a) for a in spec.command)


def step_cpus(spec) -> str:
    # "The number of cpus per task specified for salloc or sbatch is not automatically inherited by
    # srun" (man srun, Slurm 22.05, --cpus-per-task): without it a step gives each worker one core.
    # Saying it again is right for every version.
    return f"--cpus-per-task={spec.cpus_per_task}"
