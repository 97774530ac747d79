"""The worker end of the job protocol: `python -m fpdiff.runtime.serve --stdio` in another interpreter (spawned by
fpdiff, one job at a time in-process), or `fpdiff worker --listen HOST:PORT` on another machine (authenticated
connections, each job in a child process so a crash or a hang costs that cell only)."""
from __future__ import annotations

import contextlib
import os
import platform
import socket
import socketserver
import sys
import threading
from pathlib import Path

import numpy as np

from fpdiff.runtime import jobdata, protocol
from fpdiff.runtime.protocol import PROTOCOL, AuthenticationError, ProtocolError


def hello() -> dict:
    """Who this worker is: protocol, versions, and its backends with their declarations."""
    import torch

    from fpdiff.backends import registry
    reg = registry(routed=False)
    backends = {}
    for name in reg.names():
        cls = reg.cls(name)
        try:
            why = reg.create(name).available()
        except Exception as e:  # a backend that cannot even say: not available, with its words
            why = f"{type(e).__name__}: {e}"
        backends[name] = {"kinds": sorted(cls.kinds), "shape_variants": cls.shape_variants,
                          "takes_flags": cls.takes_flags, "available": why}
    from fpdiff.core.versions import TOOLS, fpdiff_version, versions
    return {"type": "hello", "protocol": PROTOCOL, "fpdiff": fpdiff_version(), "python": platform.python_version(),
            "torch": torch.__version__, "executable": sys.executable, "host": socket.gethostname(),
            "versions": {k: v for k, v in versions((*TOOLS, "openvino", "intel-extension-for-pytorch")).items() if v},
            "backends": backends}


class Materializer:
    """Jobs from the wire as local Jobs: the model file and the data written once per content, the data as a
    torch file of this interpreter's own torch (no pickle crossed the wire). It sees only authenticated frames."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.carried: dict[str, tuple[Path, Path, tuple[str, ...], Path | None] | Exception] = {}  # digest: files

    def files(self, header: dict, blobs: dict[str, bytes]) -> None:
        """Write a `files` frame's model, data and plugins; a failure is kept for the job that names them."""
        from fpdiff.sources.base import digest
        files = str(header["files"])
        try:
            if digest(*blobs.values()) != files:
                raise ProtocolError("the job's files do not match their digest")
            self.carried[files] = self._write(self.root / files, header, blobs)
        except Exception as e:  # answered with the job that names these files
            self.carried[files] = e

    @staticmethod
    def _write(folder: Path, header: dict, blobs: dict[str, bytes]) -> tuple[Path, Path, tuple[str, ...], Path | None]:
        data = header["data"]
        model_path = folder / _file_name(header["model"])
        data_path = folder / "data.pt"
        plugins = tuple(str(folder / "plugins" / _file_name(n)) for n in header["plugins"])
        named = header.get("artifact")
        artifact = folder / "artifact" / _file_name(named) if named else None
        if not data_path.exists():
            (folder / "plugins").mkdir(parents=True, exist_ok=True)
            model_path.write_bytes(blobs["model"])
            for i, name in enumerate(header.get("companions") or []):
                (folder / _file_name(name)).write_bytes(blobs[f"companion{i}"])
            if artifact is not None:
                _unpack(blobs["artifact"], artifact, bool(header.get("artifact_folder")))
                for i, name in enumerate(header.get("artifact_companions") or []):
                    (artifact.parent / _file_name(name)).write_bytes(blobs[f"artifact_companion{i}"])
            for i, p in enumerate(plugins):
                Path(p).write_bytes(blobs[f"plugin{i}"])
            arrays = protocol.read_arrays(header["arrays"], blobs)
            state = ({k.removeprefix("state:"): _torch(v) for k, v in arrays.items() if k.startswith("state:")}
                     if data["state"] else None)
            calibration = [tuple(_torch(arrays[f"calibration{i}:{j}"]) for j in range(n))
                           for i, n in enumerate(data.get("calibration") or [])]
            jobdata.write(data_path, inputs=[_torch(arrays[f"input{i}"]) for i in range(data["inputs"])],
                          input_names=data["input_names"], fingerprint=data["fingerprint"], state=state,
                          calibration=calibration)
        return model_path, data_path, plugins, artifact

    def job(self, header: dict):
        from fpdiff.core import precision as prec
        from fpdiff.core.paths import cache_root
        from fpdiff.model.graph import ShapeVariant
        from fpdiff.runtime.task import Job
        from fpdiff.sources.base import SourceRef
        src, j, files = header["source"], header["job"], str(header["files"])
        carried = self.carried.get(files)
        if carried is None:
            raise ProtocolError(f"the job names files {files} this connection never carried")
        if isinstance(carried, Exception):
            raise carried
        model_path, data_path, plugins, artifact = carried
        variant = j["variant"]
        return Job(SourceRef(src["kind"], str(model_path), src["label"]), str(data_path), header["backend"],
                   prec.named(j["precision"]), j["device"],
                   ShapeVariant(variant["name"], None if variant["static"] is None else frozenset(variant["static"])),
                   plugins, tuple(j["flags"]), (j.get("cache_dir") or str(cache_root())) if j["cached"] else None,
                   j["seed"], j["repeat"],
                   j["mode"], artifact=str(artifact) if j.get("artifact") and artifact else None)


def _unpack(blob: bytes, path: Path, folder: bool) -> None:
    """A carried converted file where the job will read it: a folder (an .mlpackage, carried as a zip) unpacked
    under its name, a file written as it is."""
    import io
    import zipfile
    path.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        with zipfile.ZipFile(io.BytesIO(blob)) as z:
            for name in z.namelist():
                target = (path / name).resolve()
                if not str(target).startswith(str(path.resolve())):
                    raise ProtocolError(f"the carried file names {name!r}, outside its folder")
            z.extractall(path)
        return
    path.write_bytes(blob)


def _file_name(name: str) -> str:
    """A file name the peer sent, as a plain name in the job's folder: never a path out of it."""
    name = Path(str(name)).name
    if name in ("", ".", ".."):
        raise ProtocolError(f"the job names a file {name!r}")
    return name


def _torch(a: np.ndarray):
    import torch
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _converse(channel: protocol.Channel, run_job, root: Path) -> None:
    """hello, then jobs until the client hangs up. A client of another protocol gets one `error` frame; a frame that
    fails authentication gets one too, and ends the connection (AuthenticationError, raised on)."""
    header, _ = _receive(channel)
    if header.get("type") != "hello" or header.get("protocol") != PROTOCOL:
        channel.send({"type": "error", "message": f"this worker speaks fpdiff job protocol {PROTOCOL}, the "
                      f"client {header.get('protocol')!r}: install the same fpdiff on both sides"})
        return
    channel.send(hello())
    from fpdiff.runtime.worker import encoded, failure
    materialize = Materializer(root)
    while True:
        try:
            header, blobs = _receive(channel)
        except AuthenticationError:
            raise
        except ProtocolError:
            return  # the client hung up
        kind = header.get("type")
        if kind == "bye":
            return
        if kind == "files":
            materialize.files(header, blobs)
            continue
        try:
            job = materialize.job(header)
        except Exception as e:  # a frame that does not make a job: answer it, keep serving
            result = failure(e, "load model", "fpdiff worker")
        else:
            try:
                result = run_job(job, float(header.get("timeout") or 300.0))
            except Exception as e:  # loading the source failed in this interpreter: an answer, not a dead worker
                result = failure(e, "load model", "fpdiff worker")
        channel.send_encoded(encoded(result))


def _receive(channel: protocol.Channel) -> tuple[dict, dict[str, bytes]]:
    """The next frame; one that fails authentication is answered with why before the connection ends."""
    try:
        return channel.receive()
    except AuthenticationError as e:
        with contextlib.suppress(OSError):
            channel.send({"type": "error", "cause": "authentication",
                          "message": f"the worker closed the connection: {e}"})
        raise


class _Duplex:
    """One stream of a reading and a writing file (a socket's two files, or stdin and stdout)."""

    def __init__(self, rfile, wfile) -> None:
        self.rfile, self.wfile = rfile, wfile

    def read(self, n: int) -> bytes:
        return self.rfile.read(n)

    def write(self, b: bytes) -> None:
        self.wfile.write(b)

    def flush(self) -> None:
        self.wfile.flush()


def serve_stdio() -> None:
    """Spawned by fpdiff: the protocol on stdin/stdout, which are taken away from the backends (their chatter goes
    to stderr, fpdiff's log of this worker). fpdiff writes a fresh token first; then it is the TCP conversation."""
    from fpdiff.runtime import rundir
    from fpdiff.runtime.worker import State
    rfile = os.fdopen(os.dup(0), "rb", buffering=0)
    wfile = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    state = State()
    stream = _Duplex(rfile, wfile)
    try:
        channel = protocol.authenticate_as_worker(stream, protocol.read_exact(stream, protocol.TOKEN))
        with rundir.run_directory():
            _converse(channel, lambda job, timeout: state.run(job), rundir.mkdtemp(prefix="fpdiff-serve-"))
    except ProtocolError as e:
        sys.exit(f"fpdiff worker: {e}")


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        from fpdiff.runtime import rundir
        from fpdiff.runtime.worker import WorkerPool
        self.request.settimeout(None)
        try:
            channel = protocol.authenticate_as_worker(_Duplex(self.rfile, self.wfile), self.server.token)
        except ProtocolError as e:
            print(f"fpdiff worker: {self.client_address[0]}: {e}", file=sys.stderr, flush=True)
            return
        with rundir.run_directory(), WorkerPool() as pool:
            try:
                _converse(channel, pool.run, rundir.mkdtemp(prefix="fpdiff-serve-"))
            except (ProtocolError, OSError) as e:
                print(f"fpdiff worker: {self.client_address[0]}: {e}", file=sys.stderr, flush=True)
                if isinstance(e, AuthenticationError):
                    self._drain()

    def _drain(self, grace: float = 5.0) -> None:
        """After refusing a frame: the error frame sent, read what the client still sends until it hangs up, so
        closing does not reset the connection and discard that frame before the client reads it."""
        with contextlib.suppress(OSError):
            self.request.shutdown(socket.SHUT_WR)
            self.request.settimeout(grace)
            while self.request.recv(1 << 16):
                pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def listen(host: str, port: int, token: bytes, ready: threading.Event | None = None) -> None:
    """Serve until interrupted; every connection authenticates first and gets its own child process for jobs."""
    with _Server((host, port), _Handler) as server:
        server.token = token
        bound = server.server_address
        print(f"fpdiff worker listening on {bound[0]}:{bound[1]} (protocol {PROTOCOL})", file=sys.stderr, flush=True)
        if ready is not None:
            ready.set()
        server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1:] != ["--stdio"]:
        sys.exit("usage: python -m fpdiff.runtime.serve --stdio  (fpdiff spawns this; see `fpdiff worker --listen`)")
    serve_stdio()
