"""Schemes: how gradients are synchronised. One file per scheme, registered by name."""

from harness.schemes.base import SCHEMES, Scheme, SchemeContext, SchemeEntry, register  # noqa: F401
from harness.schemes.knobs import Knob, Knobs, Range  # noqa: F401
from harness.schemes import (  # noqa: F401,E402  (registration side effects)
    local, ddp, bsp_a2a, wfbp_a2a, mgwfbp, bytescheduler_a2a, bsp_ps, wfbp_ps, bytescheduler_ps,
    horovod_native, byteps_native, zero,
)
