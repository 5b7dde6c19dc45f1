"""Simulation models (docs/ARCHITECTURE.md, "Predictor"): the discrete-event core, links and clusters (links.py), and
one model per scheme, registered beside it; the predictor (harness/predict/) runs them."""
