"""The study's whole scaling curve, predicted, and its report (the logic: experiments/study_prediction/prediction.py).
Run from the repository's root:

    python -m experiments.study_prediction.run --profiles reports/study-prediction/profiles \
        --calibrate harness/study/one_node.csv --out DIR

`--help` lists the options; docs/ARCHITECTURE.md ("The study's wing") says what each output holds.
"""

from __future__ import annotations

import sys

from experiments.study_prediction.prediction import main

if __name__ == "__main__":
    sys.exit(main())
