"""`python -m harness.commbench --cell C.json --out DIR`: one rank of a commbench cell."""

from harness.commbench.rank import main
from harness.training import exit_now

exit_now(main())
