"""A reader of a live run (a resume, `ddlbench show`, a test polling for finished cells) and a cell finishing at the
same moment: the part written between the reader's two looks at it is the cell's, not a foreign table."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.core.errors import UserError
from harness.results import store


def test_a_part_written_between_the_two_reads_is_the_cells_own(tmp_path):
    d = tmp_path / "cells" / "w.bsp-a2a.torch.w2.abc"
    d.mkdir(parents=True)
    # cell_parts found no part yet (None); the cell writes it before _part looks again
    pd.DataFrame({"cell_id": [d.name], "status": ["ok"], "reason": [""]}).to_parquet(d / "summary.parquet")
    got = store._part(tmp_path, d, None)
    assert got is not None and list(got["cell_id"]) == [d.name]
    # another cell's table under this name is still refused, saying how to fix it
    pd.DataFrame({"cell_id": ["other"], "status": ["ok"], "reason": [""]}).to_parquet(d / "summary.parquet")
    with pytest.raises(UserError, match="is not the summary of cell"):
        store._part(tmp_path, d, None)


def test_finished_cells_counts_a_cell_whose_part_appeared_between_the_two_reads(tmp_path, monkeypatch):
    d = tmp_path / "cells" / "w.bsp-a2a.torch.w2.abc"
    d.mkdir(parents=True)
    pd.DataFrame({"cell_id": [d.name], "status": ["ok"], "reason": [""]}).to_parquet(d / "summary.parquet")
    monkeypatch.setattr(store, "cell_parts", lambda run_dir, known=(): ({d: None}, []))  # the first look found none
    assert store.finished_cells(tmp_path) == {d.name}
