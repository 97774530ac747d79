"""Backends in another interpreter and on another host, over the job protocol: the cell is a cell like any other
(a worker that cannot be used makes it unsupported with the reason; a crash, a hang or a drop costs that cell)."""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import fpdiff
from conftest import PLUGINS
from fpdiff.backends import routes
from fpdiff.core import precision as prec
from fpdiff.core.status import Status
from fpdiff.runtime import protocol

pytestmark = pytest.mark.slow  # real workers: make test, not make test-fast
TOKEN = "correct horse battery staple"


@pytest.fixture(autouse=True)
def no_routes_left():
    yield
    routes.configure()


def cells(r):
    return {(c.backend, c.precision): c for c in r.cells}


def test_a_backend_in_another_interpreter_is_a_cell_like_any_other():
    routes.configure(python={"torch@other": sys.executable})
    r = fpdiff.check("example:tinycnn", backends=["torch", "torch@other"], precisions=["fp32", "fp16"])
    c = cells(r)
    for p in ("fp32", "fp16"):
        assert c[("torch@other", p)].status == Status.PASS, c[("torch@other", p)].reason
        # the same torch on both sides: the same numbers, bit for bit
        assert c[("torch@other", p)].metrics["rel_l2"] == c[("torch", p)].metrics["rel_l2"]


def test_a_quantized_cell_in_another_interpreter_is_calibrated_on_the_same_inputs():
    """The calibration inputs travel with the job: the routed cell quantizes the model as the local one does."""
    routes.configure(python={"ort@other": sys.executable})
    r = fpdiff.quant("example:tinycnn", schemes=["int8"], backends=["ort", "ort@other"])
    c = {x.backend: x for x in r.cells}
    assert c["ort@other"].status == c["ort"].status == Status.PASS, c["ort@other"].reason
    assert c["ort@other"].metrics["quantization_loss"] == c["ort"].metrics["quantization_loss"]
    assert c["ort@other"].info["read_back"] is True  # its kernels read back in the worker, judged here


def test_a_bare_interpreter_name_is_found_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    routes.configure(python={"torch@other": Path(sys.executable).name})
    r = fpdiff.check("example:tinycnn", backends=["torch@other"], precisions=["fp32"])
    assert r.cells[0].status == Status.PASS, r.cells[0].reason


@pytest.mark.parametrize("python, words", [
    ("/no/such/python", "no such Python interpreter: /no/such/python"),
    ("python-of-nowhere", "no such Python interpreter: python-of-nowhere (not on PATH)"),
    ("BARE", "is not an fpdiff worker"),
    ("FOREIGN", "speaks fpdiff job protocol 999"),
])
def test_an_unusable_interpreter_makes_its_cells_unsupported_and_the_run_goes_on(tmp_path, python, words):
    if python == "BARE":  # a Python without fpdiff
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
        python = str(tmp_path / "bare" / "bin" / "python")
    elif python == "FOREIGN":  # a worker of another protocol version
        python = str(tmp_path / "foreign")
        Path(python).write_text(f"#!{sys.executable}\n" + FOREIGN_WORKER)
        os.chmod(python, 0o755)
    routes.configure(python={"ort@x": python})
    r = fpdiff.check("example:tinycnn", backends=["torch", "ort@x"], precisions=["fp32", "fp16"])
    c = cells(r)
    assert c[("torch", "fp32")].status == Status.PASS
    for p in ("fp32", "fp16"):
        assert c[("ort@x", p)].status == Status.UNSUPPORTED and words in c[("ort@x", p)].reason, c[("ort@x", p)].reason


FOREIGN_WORKER = '''import struct, sys
sys.stdin.buffer.read(32)  # the token fpdiff hands it
sys.stdout.buffer.write(b"fpdiff job protocol\\n" + struct.pack("!H", 999) + bytes(32))
sys.stdout.buffer.flush()
sys.stdin.buffer.read()
'''


@pytest.fixture
def worker(tmp_path):
    """`fpdiff worker --listen 127.0.0.1:0` as a separate process; yields (address, process)."""
    token = tmp_path / "token"
    token.write_text(TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "fpdiff", "worker", "--listen", "127.0.0.1:0",
                             "--token-file", str(token)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, MARKER_ENV: str(tmp_path / "ran")})
    line = proc.stderr.readline()
    m = re.search(r"listening on ([\d.]+:\d+)", line)
    assert m, line
    proc.said = []  # what it logs (a refused connection, a refused frame)
    threading.Thread(target=lambda: proc.said.extend(proc.stderr), daemon=True).start()  # keep its pipe drained
    yield m.group(1), proc
    proc.kill()
    proc.wait()


def test_a_remote_worker_runs_the_cells(worker, tmp_path):
    addr, _ = worker
    token = tmp_path / "token"
    routes.configure(host={"torch@remote": addr}, token_file=str(token))
    r = fpdiff.check("example:tinycnn", backends=["torch", "torch@remote"], precisions=["fp32", "bf16"])
    c = cells(r)
    for p in ("fp32", "bf16"):
        assert c[("torch@remote", p)].status == Status.PASS, c[("torch@remote", p)].reason
        assert c[("torch@remote", p)].metrics["rel_l2"] == c[("torch", p)].metrics["rel_l2"]


def test_a_wrong_token_is_refused_before_anything_is_read(worker, tmp_path):
    addr, proc = worker
    wrong = tmp_path / "wrong"
    wrong.write_text("not the token")
    routes.configure(host={"torch@remote": addr}, token_file=str(wrong))
    r = fpdiff.check("example:tinycnn", backends=["torch@remote"], precisions=["fp32"])
    c = cells(r)[("torch@remote", "fp32")]
    assert c.status == Status.UNSUPPORTED and "authentication failed" in c.reason, c.reason
    assert proc.poll() is None  # the worker is still serving


def test_a_slow_remote_cell_times_out_and_the_next_one_runs(worker, tmp_path):
    addr, _ = worker
    routes.configure(host={"slow": addr, "torch@remote": addr}, token_file=str(tmp_path / "token"))
    r = fpdiff.check("example:tinycnn", backends=["slow", "torch@remote"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "slow.py")], timeout=10)
    c = cells(r)
    assert c[("slow", "fp32")].status == Status.TIMEOUT, c[("slow", "fp32")].reason
    assert c[("torch@remote", "fp32")].status == Status.PASS


MARKER_ENV = "FPDIFF_TEST_MARKER"  # set for the worker only: its plugins leave their marks beside it
SLEEP = "Path(MARKER).with_name('started').touch(); time.sleep(20)"


def plugin(folder: Path, name: str, run: str = "pass") -> str:
    """A plugin backend `name` whose file, once loaded in the worker, leaves a marker (`ran`); its run does `run`
    first (Python; MARKER is the marker's path)."""
    path = folder / f"{name}.py"
    path.write_text(f'''import os
import time
from pathlib import Path

MARKER = os.environ.get({MARKER_ENV!r})
if MARKER:  # any code of this file that runs in the worker leaves this
    Path(MARKER).write_text("ran")


class Backend:
    name = {name!r}

    def available(self):
        return None

    def prepare(self, program, precision, device):
        module = program.module()

        def run(*inputs):
            {run}
            return module(*inputs)
        return run
''')
    return str(path)


def when(path: Path, action, limit: float = 300.0) -> None:
    """Do `action` once `path` exists (a job started in the worker), from a thread."""
    def wait():
        end = time.monotonic() + limit
        while not path.exists() and time.monotonic() < end:
            time.sleep(0.05)
        action()
    threading.Thread(target=wait, daemon=True).start()


def test_a_worker_killed_mid_job_costs_that_cell(worker, tmp_path):
    addr, proc = worker
    routes.configure(host={"sleeper": addr}, token_file=str(tmp_path / "token"))
    when(tmp_path / "started", lambda: proc.send_signal(signal.SIGKILL))
    t = time.monotonic()
    r = fpdiff.check("example:tinycnn", backends=["torch", "sleeper"], precisions=["fp32", "fp16"],
                     plugins=[plugin(tmp_path, "sleeper", SLEEP)], timeout=60)
    c = cells(r)
    assert time.monotonic() - t < 50  # no cell waited for its timeout
    assert c[("sleeper", "fp32")].status == Status.CRASH and "connection lost" in c[("sleeper", "fp32")].reason
    assert c[("sleeper", "fp16")].status == Status.UNSUPPORTED and "cannot reach" in c[("sleeper", "fp16")].reason
    assert c[("torch", "fp16")].status == Status.PASS


def test_a_connection_dropped_mid_job_costs_that_cell(worker, tmp_path):
    """Through a loopback relay that cuts its first connection once the job runs; the next cell connects again."""
    addr, proc = worker
    relay = Relay(addr)
    when(tmp_path / "started", relay.cut)
    routes.configure(host={"sleeper": relay.addr, "torch@remote": relay.addr}, token_file=str(tmp_path / "token"))
    r = fpdiff.check("example:tinycnn", backends=["sleeper", "torch@remote"], precisions=["fp32"],
                     plugins=[plugin(tmp_path, "sleeper", SLEEP)], timeout=60)
    c = cells(r)
    assert c[("sleeper", "fp32")].status == Status.CRASH and "connection lost" in c[("sleeper", "fp32")].reason
    assert c[("torch@remote", "fp32")].status == Status.PASS and proc.poll() is None
    relay.close()


def forged_frames(folder: Path) -> bytes:
    """A `files` and a `job` frame as fpdiff would send them, carrying a plugin that leaves the marker, numbered as
    the next frames, under a key that is not the connection's (whoever forges them does not hold the token)."""
    from fpdiff.model.graph import STATIC
    from fpdiff.runtime import jobdata
    from fpdiff.runtime.task import Job
    from fpdiff.sources import SourceRef
    evil = plugin(folder, "evil")
    data = jobdata.write(folder / "evil.pt", inputs=[], input_names=[], fingerprint="evil")
    job = Job(SourceRef("torch", evil, "evil"), data, "evil", prec.FP32, "cpu", STATIC, (evil,))
    tape = _Tape()
    channel = protocol.Channel(tape, os.urandom(32), "client")
    channel.sent = 1  # after the client's hello
    for header, blobs in protocol.job_frames(job, 60.0, "evil", {}):
        channel.send(header, blobs)
    return tape.data


class _Tape:
    def __init__(self):
        self.data = b""

    def write(self, b):
        self.data += b

    def flush(self):
        pass


# (side whose frame, action, frame number, words of the failed cell's reason). Client frames: 0 hello, 1 files (the
# model, data and plugin), 2 job; worker frames: 0 hello, 1 result.
TAMPERING = [
    ("client", "alter", 0, "authentication failed: the client's frame 0 carries no valid MAC"),  # the hello
    ("client", "alter", 1, "authentication failed: the client's frame 1 carries no valid MAC"),  # the plugin's bytes
    ("client", "drop", 1, "the client's frame 2 came where frame 1 was due (frame 1 was dropped"),
    ("client", "replay", 1, "the client's frame 1 came where frame 2 was due (replayed)"),
    ("client", "reorder", 1, "the client's frame 2 came where frame 1 was due (frame 1 was dropped or the frames "
                             "were reordered"),
    ("client", "inject", 1, "authentication failed: the client's frame 1 carries no valid MAC"),
    ("worker", "alter", 1, "authentication failed: the worker's frame 1 carries no valid MAC"),  # the result
    ("worker", "replay", 0, "the worker's frame 0 came where frame 1 was due (replayed)"),
]


@pytest.mark.parametrize("side, action, at, words", TAMPERING, ids=[f"{t[1]}-{t[0]}" for t in TAMPERING])
def test_a_frame_tampered_with_on_the_way_fails_its_cell_and_the_worker_runs_nothing_unauthenticated(
        worker, tmp_path, side, action, at, words):
    addr, proc = worker
    relay = Relay(addr, side, action, at, where=-33, forged=forged_frames(tmp_path) if action == "inject" else b"")
    routes.configure(host={"marker": relay.addr}, token_file=str(tmp_path / "token"))
    r = fpdiff.check("example:tinycnn", backends=["torch", "marker"], precisions=["fp32"],
                     plugins=[plugin(tmp_path, "marker")], timeout=120)
    c = cells(r)
    relay.close()
    assert c[("torch", "fp32")].status == Status.PASS
    cell = c[("marker", "fp32")]
    assert cell.status == Status.ERROR and words in cell.reason, cell.reason
    if side == "client":  # the worker refused the frame: it loaded no plugin, and says why in its log
        assert not (tmp_path / "ran").exists()
        assert "the worker closed the connection" in cell.reason
        end = time.monotonic() + 10
        while not any(words in line for line in proc.said) and time.monotonic() < end:
            time.sleep(0.1)
        assert any(words in line for line in proc.said), proc.said
    assert proc.poll() is None  # the worker is still serving


def test_the_same_relay_passing_every_frame_runs_the_plugin_and_the_cell(worker, tmp_path):
    """The control: untouched frames through the relay run the job, and the marker appears."""
    addr, _ = worker
    relay = Relay(addr)
    routes.configure(host={"marker": relay.addr}, token_file=str(tmp_path / "token"))
    r = fpdiff.check("example:tinycnn", backends=["torch", "marker"], precisions=["fp32"],
                     plugins=[plugin(tmp_path, "marker")])
    relay.close()
    assert cells(r)[("marker", "fp32")].status == Status.PASS and (tmp_path / "ran").exists()


def test_an_interpreter_worker_holds_fpdiffs_token_too(tmp_path):
    """The stdio route takes the same handshake: a peer without the token fpdiff wrote first gets nothing."""
    proc = subprocess.Popen([sys.executable, "-m", "fpdiff.runtime.serve", "--stdio"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    class Pipe:
        def read(self, n):
            return proc.stdout.read1(n)

        def write(self, b):
            proc.stdin.write(b)

        def flush(self):
            proc.stdin.flush()
    Pipe().write(b"t" * protocol.TOKEN)
    Pipe().flush()
    with pytest.raises(protocol.ProtocolError, match="authentication failed"):
        protocol.authenticate_as_client(Pipe(), b"x" * protocol.TOKEN)
    assert proc.wait(60) == 1 and proc.stderr.read().decode().strip().splitlines()[-1] == "fpdiff worker: " \
        "authentication failed: wrong token"


class Relay:
    """A loopback TCP proxy between fpdiff and a real worker. It passes the handshake, then reads whole frames; on
    its first connection it does one thing to frame `at` from `side`: `alter` flips its byte at `where` (from the
    frame's end; -33 is the last byte before the MAC: a plugin's, a result's arrays), `drop` leaves it out, `replay`
    sends it twice, `reorder` sends the frame after it first, `inject` sends `forged` before it. `cut()` ends the
    first connection (a network drop)."""

    def __init__(self, target: str, side: str = "", action: str = "", at: int = 0, where: int = -33,
                 forged: bytes = b"") -> None:
        host, port = target.split(":")
        self.target = (host, int(port))
        self.side, self.action, self.at, self.where, self.forged = side, action, at, where, forged
        self.server = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        first = True
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.open += [client, upstream]
            for a, b, side in ((client, upstream, "client"), (upstream, client, "worker")):
                threading.Thread(target=self._pipe, args=(a, b, side, first), daemon=True).start()
            first = False

    def _pipe(self, src: socket.socket, dst: socket.socket, side: str, first: bool) -> None:
        try:
            for n in ((2 * protocol.NONCE,) if side == "client" else (len(protocol.GREETING) + protocol.NONCE,
                                                                       protocol.MAC)):
                dst.sendall(_exact(src, n))
            held, i = None, 0
            while (frame := _frame(src)) is not None:
                act = self.action if first and side == self.side and i == self.at else ""
                i += 1
                if act == "alter":
                    k = len(frame) + self.where
                    frame = frame[:k] + bytes([frame[k] ^ 0x20]) + frame[k + 1:]
                elif act == "inject":
                    dst.sendall(self.forged)
                elif act in ("drop", "reorder"):
                    held = frame if act == "reorder" else None
                    continue
                dst.sendall(frame * (2 if act == "replay" else 1))
                if held is not None:
                    dst.sendall(held)
                    held = None
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def cut(self) -> None:
        for s in self.open[:2]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.server.close()
        for s in self.open:
            s.close()


def _exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise OSError("closed")
        out += chunk
    return out


def _frame(sock: socket.socket) -> bytes | None:
    """One whole frame's bytes (protocol.py's layout), or None when the peer hung up between frames."""
    try:
        head = _exact(sock, 20)
    except OSError:
        return None
    n, count = struct.unpack("!QI", head[8:])
    sizes_raw = _exact(sock, 8 * count)
    body = sum(struct.unpack(f"!{count}Q", sizes_raw)) + n + protocol.MAC
    return head + sizes_raw + _exact(sock, body)


OLD_ORT = "onnxruntime==1.20.1"


@pytest.fixture(scope="module")
def old_ort_python():
    """An interpreter with an older ONNX Runtime and this fpdiff: its own site-packages first (ORT 1.20), then this
    environment's (torch, onnx, fpdiff) -- the README's version-against-version recipe. Cached across runs;
    skipped with the reason when the registry cannot serve the wheel."""
    import site

    # kept across runs (the test cache is per run): FPDIFF_TEST_ENVS moves it
    envs = Path(os.environ.get("FPDIFF_TEST_ENVS") or Path.home() / ".cache" / "fpdiff-test-envs")
    env = envs / OLD_ORT.replace("==", "-")
    python = env / "bin" / "python"
    if not (env / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(env)], check=True)
        p = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", OLD_ORT],
                           capture_output=True, text=True)
        if p.returncode:
            pytest.skip(f"cannot install {OLD_ORT}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
        ours = site.getsitepackages()[0]
        Path(own, "fpdiff-base.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
        (env / ".ready").touch()
    return str(python)


def test_version_against_version_shows_which_onnxruntime_ran(old_ort_python):
    routes.configure(python={"ort@1.20": old_ort_python})
    r = fpdiff.check("example:tinyformer", backends=["ort", "ort@1.20"], precisions=["fp32", "fp16"])
    c = cells(r)
    for p in ("fp32", "fp16"):
        old, new = c[("ort@1.20", p)], c[("ort", p)]
        assert old.status in (Status.PASS, Status.PRECISION_LOSS) and old.status == new.status, (old.reason, new.reason)
        assert old.info["worker"]["versions"]["onnxruntime"] == "1.20.1"
    assert r.versions["onnxruntime"] != "1.20.1"


def test_a_marked_job_names_every_output_the_same_from_a_local_child_and_another_interpreter(tmp_path):
    """`mode="marked"` runs the backend's prepare_marked; its output names travel in the one result encoding."""
    from dataclasses import replace

    from fpdiff.backends.routes import Route
    from fpdiff.model.graph import STATIC
    from fpdiff.runtime import jobdata, rundir
    from fpdiff.runtime.external import ExternalPool
    from fpdiff.runtime.task import Job
    from fpdiff.runtime.worker import WorkerPool
    from fpdiff.sources import load
    src = load("example:tinycnn")
    data = jobdata.write(tmp_path / "data.pt", inputs=src.inputs, input_names=src.input_names,
                         fingerprint=src.fingerprint, state=src.module.state_dict())
    job = Job(src.ref, data, "ort", prec.FP32, "cpu", STATIC, mode="marked")
    with rundir.run_directory():
        with WorkerPool() as pool:
            local, cell, refused = (pool.run(j, 300) for j in (job, replace(job, mode="cell"),
                                                                replace(job, backend="torch")))
        other = ExternalPool(Route("ort@other", "ort", python=sys.executable))
        try:
            remote = other.run(job, 300)
        finally:
            other.close()
    assert local.status is Status.OK and remote.status is Status.OK, (local.message, remote.message)
    assert len(local.output_names) == len(local.outputs) > len(cell.outputs) == 1 and cell.output_names == []
    assert remote.output_names == local.output_names
    assert all(a.tobytes() == b.tobytes() for a, b in zip(local.outputs, remote.outputs))
    assert refused.status is Status.UNSUPPORTED and "cannot mark every intermediate" in refused.message


def test_the_files_beside_a_model_and_the_users_file_travel_with_the_job(tmp_path):
    """An ONNX model with external data (model.onnx.data beside it) and a user's own converted file reach a worker
    in another interpreter: the cells there run what they run here, bit for bit."""
    import torch
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).eval()
    x = (torch.randn(2, 8),)
    torch.onnx.export(m, x, str(tmp_path / "model.onnx"), dynamo=True, external_data=True)
    torch.onnx.export(m, x, str(tmp_path / "user.onnx"), dynamo=True, external_data=True)
    assert (tmp_path / "model.onnx.data").exists() and (tmp_path / "user.onnx.data").exists()
    routes.configure(python={"ort@other": sys.executable})
    r = fpdiff.check(str(tmp_path / "model.onnx"), backends=["ort", "ort@other"], precisions=["fp32"], repeat=1,
                     shape_variants=["static"], artifacts=[f"ort@other={tmp_path / 'user.onnx'}"])
    c = cells(r)
    mine = c[("ort", "fp32")]
    theirs = c[("ort@other", "fp32")]
    assert mine.status == theirs.status == Status.PASS, (mine.reason, theirs.reason)
    assert theirs.info["artifact"].endswith("user.onnx") and theirs.info["worker"]["where"].startswith("python")
    assert theirs.metrics["rel_l2"] == mine.metrics["rel_l2"]


def test_an_op_case_spec_loads_its_sample_in_another_interpreter():
    """The op sweep's case spec reads its sample from the .pt beside it: that file travels too."""
    routes.configure(python={"torch@other": sys.executable})
    r = fpdiff.ops(catalogs=["torch"], patterns=["sin"], variants=["sample"], backends=["torch@other"],
                   precisions=["fp32"], samples=1)
    assert [c.status for c in r.cells] == [Status.PASS], [c.reason for c in r.cells]


def test_a_worker_in_another_interpreter_uses_the_runs_cache_folder(tmp_path):
    """--cache-dir reaches a worker on the same machine: its compiled artifacts land there, not in its default."""
    routes.configure(python={"ort@other": sys.executable})
    cache = tmp_path / "cache"
    r = fpdiff.check("example:tinycnn", backends=["ort@other"], precisions=["fp32"], repeat=1,
                     shape_variants=["static"], cache_dir=str(cache))
    assert r.cells[0].status == Status.PASS, r.cells[0].reason
    assert any(p.suffix == ".onnx" for p in cache.iterdir())
