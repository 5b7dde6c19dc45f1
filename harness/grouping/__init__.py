"""How gradients are grouped for communication (docs/ARCHITECTURE.md, "Packages"): pure algorithms, no I/O,
no torch, no other harness module, shared by the real schemes (harness/schemes/), the simulations
(harness/sim/) and the predictor, so that a simulation plans exactly as the scheme it models.

- `cost.py`: the all-reduce cost model t(m) = alpha + beta * m, its least-squares fit and probe sizes, MB: what
  MG-WFBP plans with, and what commbench and the predictor fit from timed sizes.
- `rules.py`: the grouping rules, one function each: MG-WFBP's merge plan of consecutive gradients (Shi, Chu, Li,
  INFOCOM 2019), ByteScheduler's tensor partitions (Peng et al., SOSP 2019), parameter-server key placement
  balancing bytes.
"""
