"""Errors that end a run with one clear line: usage and input errors exit 2, never a traceback."""


class UsageError(Exception):
    """Bad command line or bad input (file, spec, npz, names): exit code 2."""


class Unsupported(Exception):
    """A backend refuses a job (op not implemented for a dtype, failed compile, missing device)."""

    def __init__(self, message: str, op: str | None = None, dtype: str | None = None):
        super().__init__(message)
        self.op = op
        self.dtype = dtype
