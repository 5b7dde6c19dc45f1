"""Committed tables carry no machine paths: harness/results/scrub.py replaces them in every text column,
whatever dtype pandas gives text (object, or pandas 3's str read back from Parquet)."""

import pandas as pd

from harness.results.scrub import machine_paths, scrubbed_copy


def test_a_parquet_tables_text_columns_lose_the_machines_paths(tmp_path):
    checkout, results = tmp_path / "co", tmp_path / "res"
    src = tmp_path / "env.parquet"
    pd.DataFrame({"command": [f"x.py --results {results}/a --out {checkout}/rep"], "n": [3]}).to_parquet(src)
    dst = tmp_path / "out" / "env.parquet"
    scrubbed_copy(src, dst, machine_paths(checkout, RESULTS=results))
    back = pd.read_parquet(dst)
    assert back["command"].iloc[0] == "x.py --results RESULTS/a --out rep" and back["n"].iloc[0] == 3
