"""The command line (docs/ARCHITECTURE.md, "Commands"): the `ddlbench` group (main.py), the console script (entry.py),
options shared by commands (options.py), one module per subcommand (commands/)."""
