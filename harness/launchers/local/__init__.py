"""The local launcher: every rank on this box (launcher.py); the recipe backends give it:
harness/contracts/recipes/local.py."""
