"""Runs backend jobs in a child process with a timeout, so a crash or hang costs one cell, not the run."""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field, fields
from multiprocessing.connection import Connection

import numpy as np

from fpdiff.core.errors import MESSAGE_CHARS, exit_text, oom_kills
from fpdiff.core.status import Status
from fpdiff.core.support import Support
from fpdiff.runtime import protocol, rundir
from fpdiff.runtime.task import Job

DEFAULT_TIMEOUT = 300.0  # seconds per cell: a cold inductor or IREE compile of a mid-size model fits in it

OK, UNSUPPORTED, ERROR, CRASH, TIMEOUT = Status.OK, Status.UNSUPPORTED, Status.ERROR, Status.CRASH, Status.TIMEOUT
INTERNAL = "internal error in fpdiff"  # the component named when fpdiff's own code raised


@dataclass
class JobResult:
    status: Status  # OK | UNSUPPORTED (declared refusal) | ERROR (a component or fpdiff failed) | CRASH | TIMEOUT
    outputs: list[np.ndarray] = field(default_factory=list)  # as float64 (or the integer/bool dtype)
    output_dtypes: list[str] = field(default_factory=list)  # what the backend returned, before conversion
    computed_dtype: str | None = None
    notes: list = field(default_factory=list)
    info: dict = field(default_factory=dict)
    message: str = ""
    op: str | None = None
    dtype: str | None = None
    prepare_s: float = 0.0
    run_s: float = 0.0
    log_tail: str = ""
    stage: str | None = None  # where it failed: torch.export, onnx export, opset conversion, import, compile, run
    component: str | None = None  # who failed there (torch.onnx, iree-compile, onnxruntime, ...) or INTERNAL
    traceback: str | None = None  # for internal errors: fpdiff's own bug, kept whole for the report
    repeats: list = field(default_factory=list)  # outputs of further runs (--repeat), compared bitwise by check
    output_names: list[str] = field(default_factory=list)  # a `marked` job's: the ONNX tensor of each output
    # the backend's record of what it ran (backends.base.Prepared): its float ops by dtype, the same count on the
    # graph it was handed, and how to get the requested dtype from it; check's dtype rules read these
    op_dtypes: dict[str, int] | None = None
    planned_op_dtypes: dict[str, int] | None = None
    dtype_remedy: str | None = None
    export_departure: float | None = None  # the exported graph's own departure from the torch program (float64)
    run_times: list[float] = field(default_factory=list)  # seconds of each run (plan's speed figure)
    support: Support | None = None  # the runtime's own word on each op at the dtype asked (core/support.py)
    quantized: dict | None = None  # a quantized cell's record (backends.base.Prepared.quantized)
    read_back: dict = field(default_factory=dict)  # its quantized tensors by name (Prepared.read_back), as arrays


# Messages by which torch, ONNX Runtime and compilers say "this op has no kernel for this dtype".
_UNSUPPORTED_PATTERNS = [
    re.compile(r'"(?P<op>[\w.:]+)" not implemented for \'(?P<dtype>\w+)\''),
    re.compile(r"Could not find an implementation for (?P<op>\w+)\(\d+\) node with name '(?P<node>[^']*)'"),
    re.compile(r"running (?P<op>\w+) node\. Name:'(?P<node>[^']*)' Status Message: .*?(?P<dtype>\w+) data type is "
               r"not supported"),
    re.compile(r"Type '[^']*' of input parameter \([^)]*\) of operator \((?P<op>\w+)\) in node "
               r"\((?P<node>[^)]*)\) is invalid"),
    re.compile(r"(?P<op>[\w.:]+) (?:is )?not (?:yet )?(?:implemented|supported) for (?:dtype )?(?P<dtype>[\w.]+)"),
    # torch's own refusals of a dtype in an op's kernel (fft at fp16/bf16, linalg's LAPACK paths below float32)
    re.compile(r"(?P<op>[\w.]+): Low precision dtypes not supported\. Got (?P<dtype>\w+)"),
    re.compile(r"^(?:.*: )?Unsupported dtype (?P<dtype>Half|BFloat16|Float8\w*)$"),
    re.compile(r"This function doesn't handle types other than float and double"),
]


def classify_exception(exc: BaseException) -> tuple[str, str | None, str | None]:
    """(status, op, dtype): a missing kernel is `unsupported`, anything else raised while running is `error`."""
    from fpdiff.core.errors import QUANTIZE, Crashed, Unsupported
    if isinstance(exc, Unsupported):
        return UNSUPPORTED, exc.op, exc.dtype
    if isinstance(exc, Crashed):
        return CRASH, exc.op, None
    if getattr(exc, "stage", None) == QUANTIZE:  # a quantizer that ran a kernel on a tensor it should have left
        return ERROR, None, None  # alone (an observer on an integer tensor) failed itself: nothing was refused
    text = str(exc)  # a StageError keeps the component's message, so its missing-kernel refusals are still seen
    for pat in _UNSUPPORTED_PATTERNS:
        m = pat.search(text)
        if m:
            g = m.groupdict()
            op = g.get("op")
            if g.get("node"):
                op = f"{op} (node {g['node']})"
            return UNSUPPORTED, op, g.get("dtype")
    return ERROR, None, None


def failure(exc: BaseException, stage: str, component: str, **kw) -> JobResult:
    """A JobResult for an exception: refusal or error, charged to the stage and component that raised it."""
    from fpdiff.core.errors import FpdiffError, plain, raised_by_fpdiff
    status, op, dt = classify_exception(exc)
    tb = traceback.format_exc()
    stage = getattr(exc, "stage", None) or stage
    component = getattr(exc, "component", None) or component
    # an FpdiffError says whose it is (a UsageError: the model's own code raising as it loads), never fpdiff's bug
    internal = status == ERROR and not hasattr(exc, "stage") and not isinstance(exc, FpdiffError) \
        and raised_by_fpdiff(exc)
    if internal:
        component = INTERNAL
    info = {**getattr(exc, "facts", {}), **kw.pop("info", {})}  # a failure's facts travel as the job's info
    return JobResult(status, message=plain(_one_line(exc)), op=op, dtype=dt, stage=stage, component=component,
                     traceback=tb if internal else None, log_tail=plain(traceback.format_exc(-3)), info=info, **kw)


def _to_numpy(outputs) -> tuple[list[np.ndarray], list[str]]:
    import torch
    from torch.utils._pytree import tree_flatten
    leaves, _ = tree_flatten(outputs)
    arrays, dtypes = [], []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            dtypes.append(str(leaf.dtype).removeprefix("torch."))
            t = leaf.detach().cpu()
            arrays.append((t.double() if t.is_floating_point() else t).numpy())
        elif isinstance(leaf, np.ndarray) or hasattr(leaf, "to_host"):  # numpy, or an IREE DeviceArray
            a = np.asarray(leaf.to_host() if hasattr(leaf, "to_host") else leaf)
            dtypes.append(str(a.dtype))
            arrays.append(a.astype(np.float64) if _is_float(a.dtype) else a)
        else:
            from fpdiff.core.errors import RUN, StageError
            raise StageError(RUN, "backend", f"returned {type(leaf).__name__}, expected tensors or arrays")
    return arrays, dtypes


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"  # ml_dtypes' bfloat16 is not kind "f"


def result_frame(result: JobResult) -> tuple[dict, dict[str, bytes]]:
    """A JobResult as a frame of the job protocol, the one encoding of a result, whether it comes from a worker on
    another host or from the local child: its fields as JSON, each output array (and repeated runs') a blob of its
    raw bytes."""
    from fpdiff.runtime import protocol
    d = {f.name: getattr(result, f.name) for f in fields(result) if f.name not in ("outputs", "repeats", "read_back")}
    d["read_back"] = list(result.read_back)
    d["notes"] = [n.as_dict() if hasattr(n, "as_dict") else n for n in result.notes]
    d["support"] = result.support.as_dict() if result.support is not None else None
    arrays = {f"out{i}": a for i, a in enumerate(result.outputs)}
    for r, outs in enumerate(result.repeats):
        arrays.update({f"rep{r}:{i}": a for i, a in enumerate(outs)})
    arrays.update({f"back{i}": a for i, a in enumerate(result.read_back.values())})
    meta, blobs = protocol.array_blobs(arrays)
    return {"type": "result", "result": d, "repeats": len(result.repeats), "arrays": meta}, blobs


def read_result(header: dict, blobs: dict[str, bytes]) -> JobResult:
    from fpdiff.core.compare import Finding
    from fpdiff.runtime import protocol
    d = dict(protocol.expect(header, "result")["result"])
    arrays = protocol.read_arrays(header.get("arrays", {}), blobs)
    outs = [arrays[f"out{i}"] for i in range(sum(k.startswith("out") for k in arrays))]
    repeats = [[arrays[f"rep{r}:{i}"] for i in range(len(outs))] for r in range(header.get("repeats", 0))]
    d["notes"] = [Finding(**n) if isinstance(n, dict) else n for n in d.get("notes", [])]
    d["status"] = Status(d["status"])
    d["support"] = Support.from_dict(d["support"]) if isinstance(d.get("support"), dict) else None
    d["read_back"] = {name: arrays[f"back{i}"] for i, name in enumerate(d.get("read_back") or [])}
    known = {f.name for f in fields(JobResult)}
    return JobResult(**{k: v for k, v in d.items() if k in known}, outputs=outs, repeats=repeats)


def encoded(result: JobResult) -> list[bytes]:
    """The result's frame, encoded (protocol.encode); a result fpdiff cannot encode (a field of a type no frame
    carries) is fpdiff's own bug, and the cell says so instead of the worker dying."""
    from fpdiff.runtime import protocol
    try:
        return protocol.encode(*result_frame(result))
    except Exception as e:
        return protocol.encode(*result_frame(failure(e, "run", INTERNAL)))


# Loaded sources a worker keeps: a check sends one model's jobs in a row, the op sweep thousands of one-op models
# through one worker; the oldest beyond this many are dropped, so a long sweep does not grow the worker without end.
KEPT_SOURCES = 8


class State:
    """Per-worker memo: loaded sources and backend instances survive across jobs."""

    def __init__(self) -> None:
        self.sources: dict = {}
        self.registries: dict = {}

    def run(self, job: Job) -> JobResult:
        import torch

        from fpdiff.backends import registry
        from fpdiff.runtime.cache import Cache
        from fpdiff.runtime.task import LoadedSource, Task

        p = job.precision
        reg = self.registries.get(job.plugins) or self.registries.setdefault(job.plugins,
                                                                           registry(job.plugins, routed=False))
        backend = reg.create(job.backend)
        why = backend.available()
        if why:
            return JobResult(UNSUPPORTED, message=f"{job.backend} is not available: {why}")
        if job.device.startswith("cuda") and not torch.cuda.is_available():
            return JobResult(UNSUPPORTED, message="no CUDA device on this machine")
        if p.cuda_only and not job.device.startswith("cuda"):
            return JobResult(UNSUPPORTED,
                             message=f"{p.name} is a CUDA tensor-core mode; it does not exist on {job.device}")
        key = (job.source, job.data_path, job.seed)
        if key not in self.sources:
            while len(self.sources) >= KEPT_SOURCES:
                self.sources.pop(next(iter(self.sources)))
            self.sources[key] = LoadedSource(job.source, job.data_path, job.seed)
        task = Task(self.sources[key], p, job.device, job.variant, Cache(job.cache_dir), job.flags)
        if p.is_quantized:
            from fpdiff.runtime.artifacts import quantized_preparer
            prepare = quantized_preparer(backend, job.artifact)
        else:
            prepare = _preparer(backend, job.mode, job.artifact)
        t0 = time.perf_counter()
        try:
            prepared = prepare(task)  # plugins in the minimal form come through an adapter
        except Exception as e:
            r = failure(e, "prepare", job.backend, prepare_s=time.perf_counter() - t0)
            r.dtype = r.dtype or p.name
            if not task.can_fall_back():
                return r
            task, prepared, r = _converted(prepare, backend.name, task, r)
            if prepared is None:
                return r
        try:
            return self._run_prepared(job, p, task, prepared, t0)
        finally:
            with contextlib.suppress(Exception):  # a failing release must not hide the cell's answer
                prepared.close()

    @staticmethod
    def _run_prepared(job: Job, p, task, prepared, t0: float) -> JobResult:
        import torch

        from fpdiff.core import errors
        t1 = time.perf_counter()
        inputs = prepared.feeds if prepared.feeds is not None else task.inputs()
        kept = _kept(inputs)
        runs, times = [], []
        try:
            for _ in range(max(1, job.repeat)):
                t_run = time.perf_counter()
                with errors.stage(errors.RUN, job.backend):
                    outs = prepared.run(*inputs)
                    if job.device.startswith("cuda"):
                        torch.cuda.synchronize()
                times.append(time.perf_counter() - t_run)
                runs.append(outs)
                if len(runs) == 1:
                    t_first = time.perf_counter() - t1
            with errors.stage(errors.RUN, job.backend):
                arrays, dtypes = _to_numpy(runs[0])
                repeats = [_to_numpy(o)[0] for o in runs[1:]]
        except Exception as e:
            r = failure(e, errors.RUN, job.backend, notes=list(prepared.notes), info=_info(task, prepared),
                        prepare_s=t1 - t0, run_s=time.perf_counter() - t1, **_ran(prepared))
            r.dtype = r.dtype or (p.name if r.op else None)
            return r
        return JobResult(OK, arrays, dtypes, prepared.computed_dtype, list(prepared.notes) + _overwritten(inputs, kept),
                         _info(task, prepared),
                         prepare_s=t1 - t0, run_s=t_first, repeats=repeats, run_times=times,
                         output_names=list(getattr(prepared, "output_names", None) or []), **_ran(prepared))


def _kept(inputs) -> list:
    """A copy of each input a run is handed, to see afterwards whether the backend wrote into it."""
    import torch
    return [t.detach().clone() if isinstance(t, torch.Tensor) else np.array(t, copy=True)
            if isinstance(t, np.ndarray) else None for t in inputs]


def _overwritten(inputs, kept: list) -> list:
    """A finding when a backend wrote into the inputs it was handed: the caller's tensors changed by the call, so
    the same call on the same tensors computes something else the next time (and later runs here saw other inputs)."""
    from fpdiff.core.compare import Finding
    changed = []
    for i, (now, was) in enumerate(zip(inputs, kept)):
        a, b = _plain(now), _plain(was)
        if b is None or a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            continue
        by = f"by up to {float(np.max(np.abs(a - b))):.3g}" if a.shape == b.shape else "its shape"
        changed.append(f"input {i} ({by})")
    if not changed:
        return []
    return [Finding("inputs-overwritten", f"the backend wrote into the inputs it was handed: {', '.join(changed)} "
                    "changed during the run, so the same call on the same tensors computes something else the next "
                    "time", remedy="pass the backend a copy of the inputs, and report the in-place write upstream")]


def _plain(t) -> np.ndarray | None:
    """An input as float64 numpy (None: not an array), so two of them compare whatever their dtype."""
    import torch
    if isinstance(t, torch.Tensor) and not t.is_complex():
        t = t.detach().cpu()
        t = t.double() if t.is_floating_point() or t.dtype == torch.bool else t.long()
        return t.numpy().astype(np.float64)
    return np.asarray(t, dtype=np.float64) if isinstance(t, np.ndarray) and t.dtype.kind in "biuf" else None


def _info(task, prepared) -> dict:
    """The cell's info: what fpdiff did making its graph (task.made: a bf16 graph kept at its own opset, and why),
    then the backend's own record."""
    return {**getattr(task, "made", {}), **prepared.info}


def _ran(prepared) -> dict:
    """The typed record of what a prepared cell ran, as JobResult fields."""
    return {"op_dtypes": prepared.op_dtypes, "planned_op_dtypes": prepared.planned_op_dtypes,
            "dtype_remedy": prepared.dtype_remedy, "export_departure": prepared.export_departure,
            "support": getattr(prepared, "support", None), "quantized": getattr(prepared, "quantized", None),
            "read_back": {k: np.asarray(v) for k, v in (getattr(prepared, "read_back", None) or {}).items()}}


def _preparer(backend, mode: str, artifact: str | None = None):
    """The backend's lifecycle method for the job's mode: a cell's outputs, or every intermediate (`marked`); a
    cell of the user's converted file runs that file (runtime/artifacts.py)."""
    if mode == "cell" and artifact:
        from fpdiff.runtime.artifacts import preparer
        return preparer(backend, artifact)
    if mode == "cell":
        return backend.prepare_task
    if mode == "marked":
        return backend.prepare_marked
    raise ValueError(f"a job of mode {mode!r}: a worker knows 'cell' and 'marked'")


def _converted(prepare, name: str, task, own: JobResult):
    """(task, prepared, failure) on the model's opset conversion, after its own graph failed to prepare: the cell then
    runs the conversion and says so in info; when that fails too, the own graph's failure stands (what the user
    deploys fails there) with the conversion's beside it, unless the own graph could not hold the precision at all
    (bfloat16 before opset 13): then the conversion's failure is the answer."""
    import dataclasses

    from fpdiff.core.errors import CAST
    said = f"{own.status} at {own.stage} ({own.component}): {own.message}"
    conv = dataclasses.replace(task, converted=True, _memo={})
    try:
        prepared = prepare(conv)
    except Exception as e:
        r = failure(e, "prepare", name)
        if own.stage == CAST:
            r.dtype = r.dtype or own.dtype
            r.info["onnx_graph"] = f"the opset conversion, not the model's own graph ({said})"
            return task, None, r
        own.info["opset_conversion_failure"] = f"{r.status} at {r.stage} ({r.component}): {r.message}"
        return task, None, own
    prepared.info["onnx_graph"] = ("the opset conversion (source.conversion), not the model's own graph, "
                                   f"which failed here: {said}")
    return conv, prepared, own


def _one_line(e: BaseException) -> str:
    """The exception in one line, named by its type, except fpdiff's StageError: its message is the component's."""
    from fpdiff.core.errors import StageError
    text = " ".join(str(e).split())
    if text and type(e) is StageError:
        return text[:MESSAGE_CHARS]
    return f"{type(e).__name__}: {text[:MESSAGE_CHARS]}" if text else type(e).__name__


def _serve(conn) -> None:
    """Child main loop. Its stdout/stderr are the log file, truncated per job, so backend chatter never mixes
    into the report and a crash leaves its last words for the cell."""
    state = State()
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        for fd in (1, 2):
            try:
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
            except OSError:
                pass
        try:
            result = state.run(job)
        except Exception as e:  # loading the source or the registry failed: still an answer, not a dead worker
            result = failure(e, "load model", "fpdiff worker")
        conn.send_bytes(b"".join(encoded(result)))


class WorkerPool:
    """One child process at a time, reused across jobs, replaced after a crash or a timeout. The child is a
    fresh interpreter (`python -m fpdiff.runtime.worker`), so callers need no `if __name__ == "__main__"` guard."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._log = rundir.mkdtemp(prefix="fpdiff-worker-") / "worker.log"
        self._env = env or {}

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen([sys.executable, "-m", "fpdiff.runtime.worker", str(theirs.fileno())],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                          pass_fds=(theirs.fileno(),), env={**os.environ, **self._env})
        theirs.close()
        self._conn = Connection(ours.detach())

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def run(self, job: Job, timeout: float) -> JobResult:
        if not self._alive():
            self._start()
        t0, oom_before = time.perf_counter(), oom_kills()
        try:
            self._conn.send(job)
            if self._conn.poll(timeout):
                return read_result(*protocol.unpack(self._conn.recv_bytes()))
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            try:
                code = self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                code = self._proc.wait()
            self._proc = None
            return JobResult(CRASH, message=f"backend process died ({exit_text(code, oom_before)})",
                             log_tail=self._tail(), run_s=time.perf_counter() - t0)
        self.close(kill=True)
        return JobResult(TIMEOUT, message=f"no answer within {timeout:g} s; the process was killed",
                         log_tail=self._tail(), run_s=time.perf_counter() - t0)

    def _tail(self) -> str:
        return log_tail(self._log)

    def close(self, kill: bool = False) -> None:
        if self._proc is None:
            return
        if kill:
            self._proc.kill()
        else:
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        reap(self._proc)
        self._conn.close()
        self._proc = None

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def reap(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Wait for a worker process to end; kill it when it does not within `grace` seconds."""
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def log_tail(path, n: int = 2000) -> str:
    """The last words of a worker's log, for the cell it failed."""
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


if __name__ == "__main__":  # run as a module: serve through the importable twin, so results pickle by name
    from fpdiff.runtime.worker import _serve as serve
    serve(Connection(int(sys.argv[1])))
