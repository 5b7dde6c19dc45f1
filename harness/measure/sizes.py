"""Message sizes for the collective timer (pure): `4K`-style sizes, ranges, push-pull keys."""

from __future__ import annotations

import math

from harness.core.errors import UserError

UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30}
PART = 4 << 20  # push-pull partitions, as the PS schemes cut them (4 MiB, BytePS-style)
COLLECTIVES = ("allreduce", "pushpull", "p2p")
"""What the timer times: a ring all-reduce, a push-pull through the parameter servers, and a ping-pong
between ranks 0 and 1 (one way = half the round trip)."""


def parse_size(text: str | int) -> int:
    if isinstance(text, int):
        return text
    t = str(text).strip().upper()
    num = t.rstrip("KMGB")
    unit = t[len(num) :]
    try:
        value = float(num) * UNITS[unit]
    except (ValueError, KeyError):
        raise UserError(f"size {text!r} is not a size: write e.g. 4K, 1M, 256M") from None
    if value < 4:
        raise UserError(f"size {text!r} is below one float32 (4 bytes)")
    return int(value)


def sizes_between(lo: int, hi: int, factor: int = 2) -> list[int]:
    if hi < lo:
        raise UserError(f"--max-size {hi} is below --min-size {lo}: swap them")
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def push_pull_keys(sizes: list[int]) -> list[tuple[str, int]]:
    """Push-pull keys (name, elements): one per size below a partition, else the partitions of the
    largest size."""
    keys = [(f"s{s}", s // 4) for s in sizes if s < PART]
    big = max(sizes)
    if big >= PART:
        keys += [(f"p{j}", PART // 4) for j in range(math.ceil(big / PART))]
    return keys
