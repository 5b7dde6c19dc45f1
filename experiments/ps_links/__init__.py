"""Bytes per host link of parameter-server cells on the testbed (README.md here)."""
