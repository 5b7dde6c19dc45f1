"""Examples a user copies (run ddlbench from the repository root so that `examples` is importable)."""
