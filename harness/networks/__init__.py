"""Networks (docs/ARCHITECTURE.md, "Networks"): named profiles (which interface and transport every library uses) and
the interfaces themselves (routes, counters)."""
