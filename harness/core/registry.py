"""Name -> entry registries for workloads, schemes, backends and launchers.

Registering a name twice is an error; an unknown name is a UserError listing the known ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from harness.core.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, hint: str = "ddlbench list"):
        self.kind = kind
        self.hint = hint
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries))
            raise UserError(
                f"unknown {self.kind} {name!r}: known {self.kind}s are {known} (see `{self.hint}`)"
            ) from None

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def names(self) -> tuple[str, ...]:
        """The registered names in registration order (iteration and items() are in name order)."""
        return tuple(self._entries)

    def items(self):
        return sorted(self._entries.items())
