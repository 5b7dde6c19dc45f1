"""The one error type users see: caught once in the CLI, printed as one line, exit status 2."""


class UserError(Exception):
    """A mistake the user can fix. The message says what, why, and how to fix it."""

    exit_code = 2


class CellFailed(Exception):
    """A benchmark cell did not complete (a rank crashed, hung, or raised). Recorded, never fatal to a sweep."""

    def __init__(self, reason: str, log_tail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail
