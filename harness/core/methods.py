"""The study's seven lossless methods by name (docs/ARCHITECTURE.md, "Predictor"): a constant with no imports, so
that the reports read it without loading the predictor, its schemes and torch."""

SEVEN_METHODS = ("bsp-a2a", "wfbp-a2a", "mgwfbp", "bytescheduler-a2a", "bsp-ps", "wfbp-ps", "bytescheduler-ps")
"""The study's seven lossless methods, in its order: the one list that the predictor (`--schemes study`), the
study's wing, the reports and advise's validation read."""
