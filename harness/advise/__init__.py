"""`ddlbench advise` (harness/cli/commands/advise.py): candidates over each scheme's declared knob grid, their
predicted ranking, the measuring policy, the statistics it decides with, and its report. Everything but
inputs.py (profile and commbench measured here) and shortlist.py (cells, through a runner the
command passes) is pure."""
