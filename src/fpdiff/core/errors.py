"""Errors that end a run with one clear line, and the stage/component a backend failure is charged to."""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

# Stages a cell goes through; a failure is charged to the one that failed, never to the next in line.
TORCH_EXPORT, ONNX_EXPORT = "torch.export", "onnx export"
CAST = "cast graph"  # fpdiff's own ONNX graph at the cell's precision (onnxtools/mixed.py)
IMPORT, COMPILE, LOAD, RUN = "import", "compile", "load", "run"

# A failure message is cut to what one terminal line and a JSON cell carry: compilers and exporters name the op,
# node and dtype in their first few hundred characters; the full text stays in the cell's log tail.
MESSAGE_CHARS = 600

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def plain(text: str) -> str:
    """Text without terminal color codes (exporters and compilers color their messages)."""
    return _ANSI.sub("", text)


class UsageError(Exception):
    """Bad command line or bad input (file, spec, npz, names): exit code 2."""


class Unsupported(Exception):
    """A declared refusal: no kernel for an op in a dtype, a precision or device that does not exist there, an op a
    compiler says it cannot lower. Anything else that goes wrong is a StageError."""

    def __init__(self, message: str, op: str | None = None, dtype: str | None = None,
                 stage: str | None = None, component: str | None = None):
        super().__init__(plain(message))
        self.op = op
        self.dtype = dtype
        self.stage = stage
        self.component = component


class StageError(Exception):
    """A component failed at a stage without declaring a refusal (an exporter assertion, a compiler crash)."""

    def __init__(self, stage: str, component: str, message: str, op: str | None = None):
        super().__init__(plain(message))
        self.stage = stage
        self.component = component
        self.op = op


class Crashed(StageError):
    """A component's own process died by a signal (said by its exit code): a crash, never a refusal or a plain
    failure; a SIGKILL is most often the kernel ending it for memory."""


# Signals a compiler or runtime dies by on its own (SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGKILL, SIGSEGV): an exit code
# that reports one of them is a death, not a failure the tool chose to report.
CRASH_SIGNALS = (4, 6, 7, 8, 9, 11)


def died_by(returncode: int) -> int | None:
    """The signal a tool's exit code reports: negative (Python's subprocess), 128+N (a shell), or 256-N (a Python
    wrapper passing on its child's negative code: sys.exit(-9) exits 247); None for an ordinary exit code."""
    return next((n for n in (-returncode, returncode - 128, 256 - returncode) if n in CRASH_SIGNALS), None)


@contextlib.contextmanager
def stage(name: str, component: str) -> Iterator[None]:
    """Charge what fails inside to (stage, component): a refusal keeps its kind, anything else becomes a StageError.
    An exception raised by fpdiff's own code inside is left as it is, so it is reported as an internal error."""
    try:
        yield
    except Unsupported as e:
        e.stage = e.stage or name
        e.component = e.component or component
        raise
    except StageError as e:
        if e.component == "backend":  # raised by fpdiff about what a backend handed back: name the backend
            e.component = component
        raise
    except UsageError:
        raise
    except Exception as e:
        if raised_by_fpdiff(e):
            raise
        text = " ".join(plain(str(e)).split())
        why = f"{type(e).__name__}: {text[:MESSAGE_CHARS]}" if text else type(e).__name__
        raise StageError(name, component, why) from e


def raised_by_fpdiff(exc: BaseException) -> bool:
    """True when the innermost frame of the traceback is fpdiff's own code (a bug of ours, not a component's).
    A plain RuntimeError is the exception: native extensions (OpenVINO's, IREE's pybind methods) raise it with no
    Python frame of their own, so it surfaces at the fpdiff line that called them; fpdiff itself never raises it."""
    tb = exc.__traceback__
    if tb is None or type(exc) is RuntimeError:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    root = str(Path(__file__).resolve().parents[1])  # the fpdiff package folder (this file is in core/)
    return str(Path(tb.tb_frame.f_code.co_filename).resolve()).startswith(root)
