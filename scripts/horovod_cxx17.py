"""Raise Horovod's C++ standard from 14 to 17 so it compiles against current torch headers.

    python scripts/horovod_cxx17.py /path/to/unpacked/horovod-0.28.1

Why: Horovod 0.28.1 (newest release) asks CMake for C++14 in two places, while torch >= 2.1 headers
stop with `#error C++17 or later compatible compiler is required`. Gloo inside Horovod is already
built as C++17 (the top-level CMakeLists rewrites it), so only Horovod's own targets need the change.
Idempotent: a tree already patched is left as it is. Exits 1, naming the file, if a file does not
look the way this patch expects (another Horovod version), instead of building something half-patched.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# Files (relative to the sdist root) whose `set(CMAKE_CXX_STANDARD 14)` must become 17.
FILES = ("CMakeLists.txt", "horovod/torch/CMakeLists.txt")
_OLD = re.compile(r"set\(\s*CMAKE_CXX_STANDARD\s+1[14]\s*\)")
_NEW = "set(CMAKE_CXX_STANDARD 17)"


def patch_text(text: str) -> tuple[str, int]:
    """Return (patched text, number of replacements); C++17 already present counts as done."""
    return _OLD.subn(_NEW, text)


def patch_tree(root: Path) -> list[str]:
    """Patch every file in FILES under root; return one human-readable line per file."""
    report = []
    for rel in FILES:
        path = root / rel
        if not path.is_file():
            raise SystemExit(f"horovod_cxx17: {path} not found; is {root} an unpacked Horovod sdist?")
        text = path.read_text()
        new, n = patch_text(text)
        if n:
            path.write_text(new)
            report.append(f"{rel}: C++ standard set to 17 ({n} place(s))")
        elif _NEW in text:
            report.append(f"{rel}: already C++17")
        else:
            raise SystemExit(
                f"horovod_cxx17: no `set(CMAKE_CXX_STANDARD ..)` in {path}; this Horovod version "
                "is not the one the patch was written for (0.28.1): check its CMake by hand"
            )
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
