"""The ground floor (docs/ARCHITECTURE.md, "Packages"): errors, the registry, atomic writes, the tables' column
contracts. Imports nothing of the harness."""
