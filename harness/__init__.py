"""ddlbench: measure communication methods for data-parallel deep learning.

ddlbench list                       # workloads, schemes, backends and their knobs
ddlbench run --workload bert-base-tiny --scheme wfbp-a2a --workers 2
ddlbench sweep sweeps/quick.yaml    # a matrix of cells, resumable, with a progress bar
ddlbench show results/<run-id>
"""

__version__ = "0.1.0"
