"""The predictor against the emulated testbed, cell by cell (README.md here)."""
