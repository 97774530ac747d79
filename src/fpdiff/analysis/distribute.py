"""Batches of work run here one after another, or spread over a Ray cluster (`--ray ADDRESS`): a batch that runs past
its timeout or whose worker dies is recorded as that batch's failure, never retried, and the other batches go on.

Ray is an extra (`pip install 'fpdiff[ray]'`): it is imported only when an address is given."""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fpdiff.core.errors import UsageError

T = TypeVar("T")
R = TypeVar("R")

TIMEOUT, CRASH = "timeout", "crash"
LOCAL, AUTO = "local", "auto"
CLIENT_SCHEME = "ray://"
INSTALL_HINT = "pip install 'fpdiff[ray]'"
# A head that is up accepts a TCP connection at once; an address nobody listens on is refused at once, and an
# unroutable one is given up after this many seconds, before Ray's own connect loop (which retries for minutes).
PROBE_S = 5.0
# Something that accepts TCP but is no Ray head (a proxy, another service) passes the probe: Ray then tries its GCS
# handshake once a second for 20 s by default; a head that is up answers the first try, so five tries are plenty.
GCS_TRIES_VAR, GCS_TRIES = "RAY_gcs_server_port_wait_time_s", "5"
AUTH_MODE_VAR, AUTH_REFUSED = "RAY_AUTH_MODE", "InvalidAuthToken"
# A failure message is one line of a cell's reason: Ray's crash texts run to a dozen lines of advice.
MESSAGE_CHARS = 300


@dataclass(frozen=True)
class BatchFailure:
    """What became of a batch that returned no results: `timeout` (cancelled past its time) or `crash` (its worker
    died or raised), so its cells carry that status and the sweep goes on."""
    kind: str
    message: str
    batch: int


def check_address(address: str | None) -> None:
    """Refuse a malformed address or a missing Ray before any work starts (one line, exit 2)."""
    if address is None:
        return
    if not isinstance(address, str) or not address.strip():
        raise UsageError(f"--ray needs an address: {LOCAL}, {AUTO} or HOST:PORT of a Ray head (got {address!r})")
    if address not in (LOCAL, AUTO):
        _host_port(address)
    if importlib.util.find_spec("ray") is None:
        raise UsageError(f"--ray {address}: Ray is not installed; {INSTALL_HINT}")


def run_batches(batches: Sequence[list[T]], work: Callable[[list[T]], list[R]], *, address: str | None,
                timeout: float, on_result: Callable[[int, list[R] | BatchFailure], None] | None = None
                ) -> list[list[R] | BatchFailure]:
    """Each batch's results (or its failure) in batch order; `on_result` hears of each as it arrives."""
    check_address(address)
    if not timeout > 0:
        raise UsageError(f"a batch timeout must be a positive number of seconds (got {timeout!r})")
    if address is None:
        return _run_here(batches, work, on_result)
    import ray

    owned = _connect(ray, address)
    try:
        return _run_on_ray(ray, batches, work, timeout, on_result)
    finally:
        if owned:
            ray.shutdown()


def _run_here(batches: Sequence[list[T]], work: Callable[[list[T]], list[R]],
              on_result: Callable[[int, list[R] | BatchFailure], None] | None) -> list[list[R] | BatchFailure]:
    """In this process, batch by batch: `work` keeps its own per-cell timeouts, and an exception it lets out is
    fpdiff's bug, raised here with its traceback."""
    results: list[list[R] | BatchFailure] = []
    for i, batch in enumerate(batches):
        results.append(work(batch))
        if on_result is not None:
            on_result(i, results[-1])
    return results


def _connect(ray: Any, address: str) -> bool:
    """Start a local instance or join a cluster; True when this call owns the connection (and ends it after)."""
    if ray.is_initialized():
        return False  # the caller's own connection: its cluster is used as it is, and left open
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address == LOCAL:
        try:
            ray.init(address=LOCAL, num_cpus=os.cpu_count(), include_dashboard=False, **quiet)
        except Exception as e:  # Ray's start-up failures have no common class; one line is what the user needs
            raise UsageError(f"--ray {LOCAL}: a local Ray instance did not start: {_one_line(e)}") from e
        return True
    if address != AUTO:
        _probe(address)
    try:
        with _env(GCS_TRIES_VAR, GCS_TRIES), _stderr_muted():
            ray.init(address=address, **quiet)
    except Exception as e:  # ConnectionError, RuntimeError, AuthenticationError, ValueError (ray:// without client)
        raise UsageError(f"no Ray cluster answers at {address}: {_connect_error(e)}") from e
    return True


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """`name` set to `value` for the duration, unless the user set it (theirs wins); restored after."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


@contextlib.contextmanager
def _stderr_muted() -> Iterator[None]:
    """Ray's C++ core writes a warning per failed handshake to the process's stderr: a refused address must read
    as one line, so those lines are dropped while connecting (what failed is in the error raised)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _connect_error(e: BaseException) -> str:
    """Ray's connect failure in one line: its summary, and the innermost cause's last line (a version mismatch, an
    HTTP service where the head should be) when there is one; a refused token says how to send one."""
    text = _one_line(e)
    cause = e.__cause__
    lines = [ln.strip() for ln in str(cause).splitlines() if ln.strip()] if cause is not None else []
    if any(AUTH_REFUSED in ln for ln in lines):
        # `ray start` (2.60) turns token authentication on; a driver that names the address sends a token only
        # when told to, and a token is not sent to an address the user typed without their word
        return (f"{text} (the cluster wants a token: set {AUTH_MODE_VAR}=token, with the cluster's token in "
                "~/.ray/auth_token or RAY_AUTH_TOKEN)")
    if lines and lines[-1] not in text:
        text = f"{text} ({lines[-1]})"
    return text[:MESSAGE_CHARS]


def _host_port(address: str) -> tuple[str, int]:
    """HOST and PORT of `[ray://]HOST:PORT`, or the line saying what an address looks like."""
    rest = address[len(CLIENT_SCHEME):] if address.startswith(CLIENT_SCHEME) else address
    host, _, port = rest.rpartition(":")
    # a URL (http://head:8265 is the dashboard, for job submission) is not where a driver connects
    if not host or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--ray {address}: expected {LOCAL}, {AUTO} or HOST:PORT of a Ray head "
                         "(its GCS port, 6379 unless `ray start --port` set another)")
    return host.strip("[]"), int(port)  # [::1]:6379 -> ::1


def _probe(address: str) -> None:
    """A quick TCP connect: an address that does not answer is one line within seconds, not Ray's long retry."""
    host, port = _host_port(address)
    try:
        socket.create_connection((host, port), timeout=PROBE_S).close()
    except OSError as e:
        raise UsageError(f"no Ray cluster answers at {address}: {e.strerror or type(e).__name__}") from e


def _call_batch(work: Callable[[list[T]], list[R]], batch: list[T]) -> list[R]:
    """The body of one Ray task (module level, so workers import it by name)."""
    return work(batch)


def _run_on_ray(ray: Any, batches: Sequence[list[T]], work: Callable[[list[T]], list[R]], timeout: float,
                on_result: Callable[[int, list[R] | BatchFailure], None] | None) -> list[list[R] | BatchFailure]:
    """Keep one task per cluster CPU in flight, so a batch's clock starts when it is submitted and it starts at once;
    a task past its deadline is force-cancelled (its worker killed) and recorded, never retried."""
    # max_retries=0, retry_exceptions=False: a batch that crashed a worker would crash the next one the same way;
    # the crash is the finding. num_cpus=1: one batch per core, the backends in it single-threaded by Ray's default.
    task = ray.remote(num_cpus=1, max_retries=0, retry_exceptions=False)(_call_batch)
    work_ref = ray.put(work)  # shipped once, not once per batch
    slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
    results: dict[int, list[R] | BatchFailure] = {}
    running: dict[Any, tuple[int, float]] = {}
    pending = list(range(len(batches)))[::-1]
    try:
        while pending or running:
            while pending and len(running) < slots:
                i = pending.pop()
                running[task.remote(work_ref, batches[i])] = (i, time.monotonic() + timeout)
            nearest = min(deadline for _, deadline in running.values())
            ready, _ = ray.wait(list(running), num_returns=1, timeout=max(0.0, nearest - time.monotonic()))
            for ref in ready:
                i = running.pop(ref)[0]
                _record(results, i, _fetch(ray, ref, i), on_result)
            _cancel_late(ray, running, timeout, results, on_result)
    finally:
        for ref in running:  # interrupted: nothing of this run keeps a cluster core busy
            ray.cancel(ref, force=True)
    return [results[i] for i in range(len(batches))]


def _cancel_late(ray: Any, running: dict[Any, tuple[int, float]], timeout: float, results: dict,
                 on_result: Callable | None) -> None:
    """Force-cancel (kill the worker of) every task past its deadline and record its batch as timed out."""
    for ref, (i, deadline) in list(running.items()):
        if time.monotonic() >= deadline:
            ray.cancel(ref, force=True)
            del running[ref]
            message = f"batch ran past its {timeout:g} s timeout; its Ray task was cancelled"
            _record(results, i, BatchFailure(TIMEOUT, message, i), on_result)


def _fetch(ray: Any, ref: Any, batch: int) -> Any:
    """A finished task's results, or a crash for a worker that died or raised (the task's own error text)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as e:
        cause = getattr(e, "cause", None)
        detail = f"{type(cause).__name__}: {cause}" if isinstance(cause, BaseException) else _one_line(e)
        return BatchFailure(CRASH, _one_line(detail), batch)


def _record(results: dict, i: int, outcome: Any, on_result: Callable | None) -> None:
    """Keep a batch's outcome under its index and tell the listener."""
    results[i] = outcome
    if on_result is not None:
        on_result(i, outcome)


def _one_line(e: BaseException | str) -> str:
    """The first non-empty line of an error, cut to what a cell's reason carries."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else (type(e).__name__ if isinstance(e, BaseException) else "no message")
    return text[:MESSAGE_CHARS]
