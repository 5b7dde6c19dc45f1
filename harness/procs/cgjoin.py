"""An argv prefix that puts a process into control groups before it execs (the testbed's CPU share per
emulated host, harness/testbed/cgroups.py).

    prefix = join_prefix(["/sys/fs/cgroup/cpu/ddlbench-ddlb/h0/cgroup.procs"])
    subprocess.Popen([*nsenter, *prefix, "python", ...])    # the shell writes its pid, then execs python
    split_prefix(prefix)                                      # -> (files, rest of the argv after the prefix)

A shell rather than a preexec_fn (unsafe in a threaded driver, as procs/trampoline.py says) or a Python
wrapper (tens of ms per rank): `sh -c` writes its own pid into each `cgroup.procs` and execs the command, so
the command and everything it starts are in the groups from their first instruction. A write that fails
(the group was removed) ends the start with exit status JOIN_FAILED and one line on stderr. The warm
spawner reads the files back with `split_prefix` and its forked rank joins them itself (harness/warm/child.py).
"""

from __future__ import annotations

JOIN_TAG = "ddlbench-cgroup"
"""The shell's $0: marks the prefix, so `split_prefix` recognises it."""
JOIN_FAILED = 125
"""Exit status when a group could not be joined."""
_SCRIPT = (
    'while [ "$1" != -- ]; do echo $$ > "$1" || { echo "cannot join control group $1" >&2; exit 125; }; '
    'shift; done; shift; exec "$@"'
)


def join_prefix(procs_files: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`sh -c SCRIPT ddlbench-cgroup FILE... --`: what follows runs inside every group whose `cgroup.procs`
    (or v1 `tasks`) file is listed; () when none is. Pure."""
    if not procs_files:
        return ()
    return ("sh", "-c", _SCRIPT, JOIN_TAG, *procs_files, "--")


def split_prefix(argv: tuple | list) -> tuple[tuple[str, ...], tuple]:
    """(the files a leading `join_prefix` names, the argv after it); ((), argv) when it has none. Pure."""
    argv = tuple(argv)
    if len(argv) < 5 or argv[:4] != ("sh", "-c", _SCRIPT, JOIN_TAG) or "--" not in argv[4:]:
        return (), argv
    end = argv.index("--", 4)
    return argv[4:end], argv[end + 1 :]
