"""Patch an unpacked Horovod 0.28.1 sdist before building it:

    python scripts/horovod_patches.py /path/to/unpacked/horovod-0.28.1

1. C++17: Horovod asks CMake for C++14 in two places, while torch >= 2.1 headers stop with `#error C++17
   or later compatible compiler is required`. Gloo inside Horovod is already built as C++17 (the
   top-level CMakeLists rewrites it), so only Horovod's own targets need the change.
2. The gloo interface of process sets: `GlooContext::InitializeForProcessSet` (horovod/common/gloo/
   gloo_context.cc) creates its device from its own, never-set interface name instead of the global
   context's HOROVOD_GLOO_IFACE, so gloo falls back to the address the hostname resolves to. Every job
   has the global process set, so on hosts whose hostname maps to 127.0.1.1 (Debian's default) every
   multi-node gloo job fails with "connect [127.0.1.1]: Connection refused" (seen on the local Slurm
   of slurm/local/up-netns.sh; docs/ARCHITECTURE.md, "Networks"). The patch takes the global
   context's interface there.

PATCH_LEVEL names this set of patches; the installer keys its wheel cache and its "already present"
check by it, so a wheel built with fewer patches is never reused. Idempotent: a tree already patched is
left as it is. Exits 1, naming the file, if a file does not look the way a patch expects (another
Horovod version), instead of building something half-patched.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PATCH_LEVEL = 2
"""1: C++17; 2: + the process-set gloo interface."""
CMAKE_FILES = ("CMakeLists.txt", "horovod/torch/CMakeLists.txt")
"""Files (relative to the sdist root) whose `set(CMAKE_CXX_STANDARD 14)` must become 17."""
FILES = CMAKE_FILES
_OLD = re.compile(r"set\(\s*CMAKE_CXX_STANDARD\s+1[14]\s*\)")
_NEW = "set(CMAKE_CXX_STANDARD 17)"
GLOO_FILE = "horovod/common/gloo/gloo_context.cc"
_FN = "void GlooContext::InitializeForProcessSet("
_IFACE_OLD = "  device_attr.iface = gloo_iface_;\n"
_IFACE_NEW = (
    "  gloo_iface_ = global_context.gloo_iface_;  // ddlbench: HOROVOD_GLOO_IFACE, not the hostname\n"
    "  device_attr.iface = gloo_iface_;\n"
)


def patch_text(text: str) -> tuple[str, int]:
    """CMake text with C++17: (patched text, number of replacements); C++17 already there counts as done."""
    return _OLD.subn(_NEW, text)


def patch_gloo_text(text: str) -> tuple[str, str]:
    """gloo_context.cc with the process-set interface fix: (text, "patched" | "already patched")."""
    start = text.find(_FN)
    if start < 0:
        raise ValueError(f"no {_FN.strip('(')} in it")
    if _IFACE_NEW in text[start:]:
        return text, "already patched"
    at = text.find(_IFACE_OLD, start)
    if at < 0:
        raise ValueError("InitializeForProcessSet does not create its device from gloo_iface_")
    return text[:at] + _IFACE_NEW + text[at + len(_IFACE_OLD) :], "patched"


def _cmake(root: Path) -> list[str]:
    report = []
    for rel in CMAKE_FILES:
        path = root / rel
        if not path.is_file():
            raise SystemExit(f"horovod_patches: {path} not found; is {root} an unpacked Horovod sdist?")
        text = path.read_text()
        new, n = patch_text(text)
        if n:
            path.write_text(new)
            report.append(f"{rel}: C++ standard set to 17 ({n} place(s))")
        elif _NEW in text:
            report.append(f"{rel}: already C++17")
        else:
            raise SystemExit(
                f"horovod_patches: no `set(CMAKE_CXX_STANDARD ..)` in {path}; this Horovod version "
                "is not the one the patch was written for (0.28.1): check its CMake by hand"
            )
    return report


def patch_tree(root: Path, gloo: bool = True) -> list[str]:
    """Apply every patch under root; return one human-readable line per file."""
    report = _cmake(root)
    path = root / GLOO_FILE
    if gloo and path.is_file():
        try:
            new, what = patch_gloo_text(path.read_text())
        except ValueError as e:
            raise SystemExit(
                f"horovod_patches: {path}: {e}; this Horovod version is not the one the patch was written for (0.28.1)"
            ) from None
        path.write_text(new)
        report.append(f"{GLOO_FILE}: process-set gloo interface {what}")
    elif gloo:
        raise SystemExit(f"horovod_patches: {path} not found; is {root} an unpacked Horovod 0.28.1 sdist?")
    return report


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for line in patch_tree(Path(argv[0])):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
