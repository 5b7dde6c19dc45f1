"""Simulation models (docs/ARCHITECTURE.md, "Predictor"): the discrete-event core, network links, and one model per scheme, registered beside it; the predictor (harness/predict/) runs them."""
