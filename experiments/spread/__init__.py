"""The harness's share of a 2-worker CPU cell's run-to-run spread, against a bare gloo loop (README.md here)."""
