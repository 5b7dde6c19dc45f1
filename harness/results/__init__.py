"""Results: tidy tables on disk (Parquet), written atomically, rebuilt from per-cell parts."""
