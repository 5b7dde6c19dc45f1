"""DeAR and FSDP on the emulated testbed, measured and predicted (README.md here)."""
