"""Errors that end a run with one clear line, and the stage/component a backend failure is charged to."""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

# Stages a cell goes through; a failure is charged to the one that failed, never to the next in line.
TORCH_EXPORT, ONNX_EXPORT = "torch.export", "onnx export"
CAST = "cast graph"  # fpdiff's own ONNX graph at the cell's precision (onnxtools/mixed.py)
IMPORT, COMPILE, LOAD, RUN = "import", "compile", "load", "run"
QUANTIZE = "quantize"  # a backend's own quantization tool making the quantized model (Backend.prepare_quantized)
EMULATE = "emulate"  # fpdiff's own exact float64 emulation of a quantized model, and what it reads the model from

# A failure message is cut to what one terminal line and a JSON cell carry: compilers and exporters name the op,
# node and dtype in their first few hundred characters; the full text stays in the cell's log tail.
MESSAGE_CHARS = 600

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def plain(text: str) -> str:
    """Text without terminal color codes (exporters and compilers color their messages)."""
    return _ANSI.sub("", text)


class FpdiffError(Exception):
    """What ends a run with one line and a non-zero exit, never a traceback: the subclass says whose it is (the
    user's input, the model's float64 run, a backend's limits) and `exit_code` what a script sees."""
    exit_code: ClassVar[int] = 2


class UsageError(FpdiffError):
    """Bad command line or bad input (file, spec, npz, names): what the user gave, nothing else. Exit code 2."""


class UnknownOption(UsageError, TypeError):
    """A keyword an API function does not take: the user's error (exit 2 on the command line), and a TypeError, as
    for any Python function called with a keyword it lacks."""


class ReferenceFailed(FpdiffError):
    """The model's float64 reference did not run (an op without a float64 kernel, the model failing in eager), so
    nothing can be judged: exit 3, the code of a run that judged nothing."""
    exit_code = 3


class NotAnalysable(FpdiffError):
    """An analysis cannot take this model (a graph node its float64 walk cannot step through, outputs with no
    direction to attribute): the model is not wrong, the analysis judged nothing. Exit 3."""
    exit_code = 3


class NoRepro(FpdiffError):
    """A backend writes no repro bundle for this model: the verdict stands; only the bundle is missing. Exit 1."""
    exit_code = 1


# what a quantized cell says when its quantizer left every layer float: the format is not on this model at all (the
# judge's word for a quantized graph with no quantizer, a PT2E backend's for a program with no quantize op; the
# fuzzer discards a graph every quantizer left so)
QUANTIZED_NONE = "quantized none of this model's layers"


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

    def __init__(self, stage: str, component: str, message: str, op: str | None = None, facts: dict | None = None):
        super().__init__(plain(message))
        self.stage = stage
        self.component = component
        self.op = op
        self.facts = dict(facts or {})  # what a rule decides by, as fields (the job's info), never read from text


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


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has ended since boot (None where it does not say)."""
    try:
        for line in open("/proc/vmstat"):
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def exit_text(code: int | None, oom_before: int | None = None) -> str:
    """How a process ended (a worker, a compiler); a SIGKILL while the kernel's out-of-memory count rose
    (`oom_before`: the count when the job was sent) is named as the memory it ran out of."""
    if code is None:
        return "no exit code"
    if code < 0:
        import signal
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        if name != "SIGKILL":
            return f"killed by {name}"
        now = oom_kills()
        if oom_before is not None and now is not None and now > oom_before:
            return ("killed by the kernel for memory (its out-of-memory killer ended a process during this cell): "
                    "the model at this precision needs more memory than was free")
        return "killed by SIGKILL (the likely cause is memory: the kernel's out-of-memory killer sends it)"
    return f"exit code {code}"


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
    except FpdiffError:  # fpdiff's own one-line errors pass through as they are
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
