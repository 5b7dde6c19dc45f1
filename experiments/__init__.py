"""One-off studies, each in a folder of its own with its command (`run.py`, run from the repository's root as
`python -m experiments.<name>.run`), its code and a README.md saying what it measures and which report under
reports/ it writes (docs/ARCHITECTURE.md, "Experiments"). An experiment may import the harness; nothing in the
harness imports an experiment (import-linter's contract `experiments`, pyproject.toml). Not installed with the
package: a checkout runs them."""
