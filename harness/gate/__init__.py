"""The regression gate (docs/ARCHITECTURE.md, "Regression gate"): which cells of two runs are the same cell, the
statistics that decide a verdict, environments that may be compared, stored baselines, the Markdown summary."""
