"""The fpdiff end of the job protocol: a pool that sends one backend's jobs to a worker in another interpreter or on
another host, and the router that gives every job its pool. A worker that cannot be started, reached or understood
makes its cells `unsupported` with the reason; a crash, a hang or a dropped connection costs one cell."""
from __future__ import annotations

import contextlib
import contextvars
import os
import select
import shutil
import socket
import subprocess
import time

from fpdiff.backends.routes import Route
from fpdiff.core.errors import UsageError, exit_text, oom_kills
from fpdiff.core.status import Status
from fpdiff.runtime import protocol, rundir
from fpdiff.runtime.protocol import PROTOCOL, AuthenticationError, ConnectionClosed, PeerError, ProtocolError
from fpdiff.runtime.worker import JobResult, WorkerPool, log_tail, read_result, reap

NETWORK_GRACE = 30.0  # seconds a remote answer may take beyond the cell's timeout (the worker enforces the timeout)
CONNECT_TIMEOUT = 10.0


class _Unreachable(Exception):
    """The worker could not be started, reached, authenticated or understood: every cell of it is unsupported."""


class _Stream:
    """One duplex byte stream (a socket, or a child's stdin/stdout) with a deadline on reads."""

    def __init__(self, rfd, wfile, sock: socket.socket | None = None) -> None:
        self.rfd, self.wfile, self.sock = rfd, wfile, sock
        self.deadline: float | None = None

    def read(self, n: int) -> bytes:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.rfd], [], [], left)[0]:
                raise TimeoutError
        return self.sock.recv(n) if self.sock else os.read(self.rfd, n)

    def write(self, b: bytes) -> None:
        if self.sock:
            self.sock.sendall(b)
            return
        view = memoryview(b)
        while view:  # a pipe takes what fits; the rest goes in the next write
            view = view[os.write(self.wfile.fileno(), view):]

    def flush(self) -> None:
        pass


class ExternalPool:
    """Jobs of one routed backend, in order, over one connection; reconnects after a crash or a timeout."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.hello: dict | None = None
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._stream: _Stream | None = None
        self._channel: protocol.Channel | None = None
        self._sent: dict = {}  # what this connection already carried (protocol.job_frames)
        self._refused: str | None = None  # why the worker cannot be used at all: said once per cell, not retried
        self._log = rundir.mkdtemp(prefix="fpdiff-external-") / "worker.log"

    def run(self, job, timeout: float) -> JobResult:
        if self._refused:
            return self._unsupported(self._refused)
        t0, oom_before = time.perf_counter(), oom_kills()
        try:
            if self._channel is None:
                self._connect(plugins=bool(job.plugins))
            result = read_result(*self._exchange(job, timeout))
            result.info["worker"] = {"where": self.route.where, "python": self.hello.get("python"),
                                     "fpdiff": self.hello.get("fpdiff"), "versions": self.hello.get("versions", {})}
            return result
        except _Unreachable as e:
            self._refused = str(e)
            self.close()
            return self._unsupported(self._refused)
        except TimeoutError:
            self.close(kill=True)
            return JobResult(Status.TIMEOUT, message=f"no answer from {self.route.where} within {timeout:g} s; the "
                             "worker was dropped", run_s=time.perf_counter() - t0, log_tail=self._tail())
        except (AuthenticationError, PeerError) as e:  # a frame failed authentication, on either side
            self.close(kill=True)
            return JobResult(Status.ERROR, message=f"{self.route.where}: {e}", run_s=time.perf_counter() - t0,
                             log_tail=self._tail(), stage="run", component=f"the connection to {self.route.where}")
        except (ProtocolError, OSError) as e:
            code = self._exit_code()
            self.close(kill=True)
            died = (f"the worker process died ({exit_text(code, oom_before)})" if code is not None
                    else f"connection lost ({e})")
            return JobResult(Status.CRASH, message=f"{self.route.where}: {died}", run_s=time.perf_counter() - t0,
                             log_tail=self._tail(), stage="run", component=self.route.where)

    def _exchange(self, job, timeout: float) -> tuple[dict, dict[str, bytes]]:
        """Send the job's frames and read the answer. When the worker closed the connection under a send (it
        refused a frame), its last frame says why: that is read before the send's error counts."""
        self._stream.deadline = None
        try:
            for header, blobs in protocol.job_frames(job, timeout, self.route.base, self._sent,
                                                            same_machine=self.route.python is not None):
                self._channel.send(header, blobs)
        except OSError as e:
            self._stream.deadline = time.monotonic() + 5.0
            try:
                return self._channel.receive()
            except (ProtocolError, OSError, TimeoutError):
                raise e from None
        self._stream.deadline = time.monotonic() + timeout + (NETWORK_GRACE if self.route.host else 0.0)
        return self._channel.receive()

    def _unsupported(self, why: str) -> JobResult:
        return JobResult(Status.UNSUPPORTED, message=why, stage="load", component=self.route.where)

    def _connect(self, plugins: bool) -> None:
        token = self._spawn() if self.route.python else self._dial()
        try:  # the handshake, then hello: the worker imports torch and its backends first
            self._stream.deadline = time.monotonic() + (120.0 if self.route.python else CONNECT_TIMEOUT)
            self._channel = protocol.authenticate_as_client(self._stream, token)
            self._channel.send({"type": "hello", "protocol": PROTOCOL})
            self._stream.deadline = time.monotonic() + 120.0
            hello = protocol.expect(self._channel.receive()[0], "hello")
        except AuthenticationError:
            raise  # a frame of this connection was tampered with: this cell fails, the next one connects again
        except ProtocolError as e:
            if not isinstance(e, ConnectionClosed):  # it spoke, and said or did something else
                raise _Unreachable(f"{self.route.where}: {e}") from None
            raise _Unreachable(f"{self.route.where} is not an fpdiff worker: {self._why(e)}") from None
        except TimeoutError:
            raise _Unreachable(f"{self.route.where} is not an fpdiff worker: no answer to the handshake") from None
        except OSError as e:  # it accepted and went away (a worker shutting down)
            raise _Unreachable(f"cannot reach {self.route.where}: {e.strerror or e}") from None
        if hello.get("protocol") != PROTOCOL:
            raise _Unreachable(f"{self.route.where} speaks fpdiff job protocol {hello.get('protocol')!r}, this "
                               f"fpdiff {PROTOCOL}: install the same fpdiff there")
        base = (hello.get("backends") or {}).get(self.route.base)
        if base is None and plugins:  # a --plugin backend: the worker loads the plugin file with the job
            base = {}
        if base is None:
            raise _Unreachable(f"{self.route.where} has no backend {self.route.base!r} (it has "
                               f"{', '.join(hello.get('backends') or {}) or 'none'})")
        if base.get("available"):
            raise _Unreachable(f"{self.route.base} is not available in {self.route.where}: {base['available']}")
        self.hello = hello

    def _why(self, e: Exception) -> str:
        """A spawned worker's last words (a missing module, a traceback's last line), else the error."""
        detail = self._tail().strip().splitlines() if self.route.python else []
        return detail[-1] if detail else str(e) or type(e).__name__

    def _spawn(self) -> bytes:
        """Start the interpreter's worker on a pipe and hand it a fresh token: the same handshake and MACs as TCP."""
        exe = self.route.python
        if os.sep not in exe:  # a bare name (python3.11) is looked up on PATH, as a shell would
            exe = shutil.which(exe) or exe
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise _Unreachable(f"no such Python interpreter: {exe}" + (" (not on PATH)" if os.sep not in exe else ""))
        with open(self._log, "wb") as log:
            try:
                self._proc = subprocess.Popen([exe, "-m", "fpdiff.runtime.serve", "--stdio"], stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=log, bufsize=0)
            except OSError as e:
                raise _Unreachable(f"cannot start {exe}: {e.strerror or e}") from None
        self._stream = _Stream(self._proc.stdout.fileno(), self._proc.stdin)
        token = os.urandom(protocol.TOKEN)
        try:
            self._stream.write(token)
        except OSError as e:
            raise _Unreachable(f"{self.route.where} is not an fpdiff worker: {self._why(e)}") from None
        return token

    def _dial(self) -> bytes:
        host, _, port = self.route.host.rpartition(":")
        try:
            token = self.route.token()
        except UsageError as e:
            raise _Unreachable(str(e)) from None
        try:
            sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT)
        except OSError as e:
            raise _Unreachable(f"cannot reach {self.route.where}: {e.strerror or e}") from None
        sock.settimeout(None)
        self._sock = sock
        self._stream = _Stream(sock.fileno(), None, sock)
        return token

    def _exit_code(self) -> int | None:
        if self._proc is None:
            return None
        try:
            return self._proc.wait(5)
        except subprocess.TimeoutExpired:
            return None

    def _tail(self) -> str:
        return log_tail(self._log)

    def close(self, kill: bool = False) -> None:
        if self._channel is not None and not kill:
            try:
                self._stream.deadline = None
                self._channel.send({"type": "bye"})
            except OSError:
                pass
        if self._sock is not None:
            self._sock.close()
        if self._proc is not None:
            if kill:
                self._proc.kill()
            for f in (self._proc.stdin, self._proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            reap(self._proc)
        self._proc, self._sock, self._stream, self._channel = None, None, None, None
        self._sent = {}  # a new connection carries everything again


class Router:
    """The pool face the analyses use: a job of a routed backend goes to its worker, every other to a local child."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        from fpdiff.backends.routes import active
        self.routes = active()
        self.local = WorkerPool(env)
        self.external: dict[str, ExternalPool] = {}

    def run(self, job, timeout: float) -> JobResult:
        route = self.routes.get(job.backend)
        if route is None:
            return self.local.run(job, timeout)
        if route.name not in self.external:
            self.external[route.name] = ExternalPool(route)
        return self.external[route.name].run(job, timeout)

    def close(self) -> None:
        self.local.close()
        for pool in self.external.values():
            pool.close()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Borrowed:
    """The shared router lent to one analysis step: its `with` ends the step, not the workers."""

    def __init__(self, router: Router) -> None:
        self.router = router

    def run(self, job, timeout: float) -> JobResult:
        return self.router.run(job, timeout)

    def close(self) -> None:
        pass

    def __enter__(self) -> _Borrowed:
        return self

    def __exit__(self, *exc) -> None:
        pass


_SHARED: contextvars.ContextVar[Router | None] = contextvars.ContextVar("fpdiff_shared_router", default=None)


@contextlib.contextmanager
def shared(env: dict[str, str] | None = None):
    """One router for every step run inside it: the op sweep runs thousands of one-op checks, and a worker started
    per check (a fresh interpreter importing torch) would cost more than the cells it runs. Inside another shared()
    it is that one: a campaign that keeps its workers across batches opens it once around them."""
    if _SHARED.get() is not None:
        yield _SHARED.get()
        return
    router = Router(env)
    token = _SHARED.set(router)
    try:
        yield router
    finally:
        _SHARED.reset(token)
        router.close()


def pool(env: dict[str, str] | None = None) -> Router | _Borrowed:
    """The router a step runs its jobs in: the shared one when a caller opened it (shared()), else a new one."""
    active = _SHARED.get()
    return _Borrowed(active) if active is not None else Router(env)
