"""Copies of run tables and reports to commit, with this machine's paths replaced by what they stand for
(docs/ARCHITECTURE.md, "Results"): an absolute path of a checkout or a results folder says nothing
about the numbers, and no machine path is committed.

    prefixes = machine_paths(ROOT, RESULTS="/abs/results")   # {"/abs/checkout/": "", ..., "/abs/results/": "RESULTS/"}
    scrubbed_copy(src, dst, prefixes)                        # .parquet and .csv cell by cell, any other file as text
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd


def machine_paths(checkout: str | Path, **named: str | Path) -> dict[str, str]:
    """Prefix -> replacement: the checkout's path made relative, each named folder as its NAME, the
    temporary folder as TMP; longest first, so that a folder inside another is replaced by its own name."""
    out = {str(Path(checkout).resolve()) + "/": "", str(Path(checkout).resolve()): "."}
    for name, path in named.items():
        out[str(Path(path).resolve()) + "/"] = f"{name}/"
        out[str(Path(path).resolve())] = name
    out[tempfile.gettempdir().rstrip("/") + "/"] = "TMP/"
    return dict(sorted(out.items(), key=lambda kv: -len(kv[0])))


def scrub_text(text: str, prefixes: dict[str, str]) -> str:
    for old, new in prefixes.items():
        text = text.replace(old, new)
    return text


def scrub_frame(df: pd.DataFrame, prefixes: dict[str, str]) -> pd.DataFrame:
    df = df.copy()
    for c in df.columns:
        if df[c].dtype == object or pd.api.types.is_string_dtype(df[c].dtype):  # pandas 3 reads text as str
            df[c] = df[c].map(lambda v: scrub_text(v, prefixes) if isinstance(v, str) else v)
    return df


def scrubbed_copy(src: str | Path, dst: str | Path, prefixes: dict[str, str]) -> None:
    """Copy `src` to `dst` with `prefixes` replaced: a Parquet or CSV table cell by cell, a text file as
    text, anything else (a picture) as it is."""
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.suffix == ".parquet":
        scrub_frame(pd.read_parquet(src), prefixes).to_parquet(dst, index=False)
    elif src.suffix == ".csv":
        scrub_frame(pd.read_csv(src), prefixes).to_csv(dst, index=False)
    elif src.suffix in (".md", ".json", ".yaml", ".txt", ".html"):
        dst.write_text(scrub_text(src.read_text(), prefixes))
    else:
        shutil.copyfile(src, dst)
