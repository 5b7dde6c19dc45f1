"""Contracts (docs/ARCHITECTURE.md, "Packages"): what the layers above agree on, with no implementation behind it: the
cell spec, the transport interface, the launcher and recipe registries, the device rule, the one training recipe, the
shared schedules."""
