"""Warm ranks (docs/ARCHITECTURE.md, "Warm ranks"): a pre-imported fork server (`zygote`) and its client
(`client.WarmPool`), so a launcher starts each cell's ranks as fresh forked processes without paying the
imports again."""
