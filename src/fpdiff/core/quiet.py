"""A component's chatter kept out of what the user reads: its logger raised to ERROR and, where it prints, its
stdout or stderr swallowed, for the span of one call (its failures still raise and say what matters)."""
from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def quieted(logger: str = "", stdout: bool = False, stderr: bool = False) -> Iterator[None]:
    """`logger` ("" for the root logger) at ERROR, and the streams named swallowed, until the block ends."""
    log = logging.getLogger(logger or None)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with contextlib.ExitStack() as streams:
            if stdout:
                streams.enter_context(contextlib.redirect_stdout(io.StringIO()))
            if stderr:
                streams.enter_context(contextlib.redirect_stderr(io.StringIO()))
            yield
    finally:
        log.setLevel(level)
