"""The testbed launcher: every rank in its host's network namespace of the emulated testbed (launcher.py); the recipe
backends give it: harness/contracts/recipes/testbed.py."""
