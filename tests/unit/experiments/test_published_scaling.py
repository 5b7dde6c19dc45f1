"""The outside check of the scaling (experiments/study_prediction/published.py): the published numbers carry their
source and how each was read, every predicted row states its setup, and the check predicts.

    pytest -q tests/unit/experiments/test_published_scaling.py
"""

from __future__ import annotations

import math

from experiments.study_prediction.published import (
    fitted_values,
    published_check,
    published_table_md,
    read_published,
    read_setups,
    unpredicted,
)


def test_every_published_number_names_its_source_and_how_it_was_read():
    pub = read_published()
    assert pub["id"].is_unique
    assert {"BytePS", "ByteScheduler"} <= set(pub["system"])
    for col in ("source", "where", "read", "metric"):
        assert pub[col].notna().all() and (pub[col].str.strip() != "").all(), col
    assert pub["read"].str.startswith(("stated in text", "read off the figure")).all()
    assert pub["value"].map(math.isfinite).all()


def test_every_predicted_row_states_its_setup():
    pub, setups = read_published().set_index("id"), read_setups()
    assert setups["id"].isin(pub.index).all()
    for s in setups.itertuples():
        assert str(pub.loc[s.id, "gpus"]).isdigit(), s.id  # a stated GPU count
        assert s.per_gpu_samples_s > 0 and s.per_gpu_source.strip() and s.substitutions.strip(), s.id
    # what is not predicted says why
    assert unpredicted()["why_not"].str.len().gt(0).all()


def test_the_check_predicts_finite_efficiencies():
    df = published_check(ids=["bs-resnet50-bytescheduler-16"])
    assert len(df) == 1
    r = df.iloc[0]
    assert 0 < r.predicted <= 1.0 + 1e-9 and 0 < r.published <= 1.0
    assert math.isfinite(r.error) and r.setup and r.substitutions
    assert 0 < r.predicted_compute_half <= 1.0 + 1e-9 and 0 < r.predicted_compute_double <= 1.0 + 1e-9
    if fitted_values():  # the report's two-node fit is in the repository
        assert 0 < r.predicted_fitted <= 1.0 + 1e-9
    table = published_table_md(df)
    assert "ByteScheduler" in table and "ResNet-50" in table
