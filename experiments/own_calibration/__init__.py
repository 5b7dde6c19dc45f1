"""ddlbench's own stacks calibrated on the testbed and checked on a host count held back (README.md here)."""
