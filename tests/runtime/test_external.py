"""Backends in another interpreter and on another host, over the job protocol: the cell is a cell like any other
(a worker that cannot be used makes it unsupported with the reason; a crash, a hang or a drop costs that cell)."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import fpdiff
from conftest import PLUGINS
from fpdiff.backends import routes

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
        assert c[("torch@other", p)].status == "pass", c[("torch@other", p)].reason
        # the same torch on both sides: the same numbers, bit for bit
        assert c[("torch@other", p)].metrics["rel_l2"] == c[("torch", p)].metrics["rel_l2"]


@pytest.mark.parametrize("python, words", [
    ("/no/such/python", "no such Python interpreter: /no/such/python"),
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
    assert c[("torch", "fp32")].status == "pass"
    for p in ("fp32", "fp16"):
        assert c[("ort@x", p)].status == "unsupported" and words in c[("ort@x", p)].reason, c[("ort@x", p)].reason


FOREIGN_WORKER = '''import json, struct, sys
n = struct.unpack("!Q", sys.stdin.buffer.read(8))[0]
sys.stdin.buffer.read(n)
out = json.dumps({"type": "hello", "protocol": 999, "blobs": []}).encode()
sys.stdout.buffer.write(struct.pack("!Q", len(out)) + out)
sys.stdout.buffer.flush()
sys.stdin.buffer.read()
'''


@pytest.fixture
def worker(tmp_path):
    """`fpdiff worker --listen 127.0.0.1:0` as a separate process; yields (address, process)."""
    token = tmp_path / "token"
    token.write_text(TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "fpdiff", "worker", "--listen", "127.0.0.1:0",
                             "--token-file", str(token)], stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"listening on ([\d.]+:\d+)", line)
    assert m, line
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its pipe drained
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
        assert c[("torch@remote", p)].status == "pass", c[("torch@remote", p)].reason
        assert c[("torch@remote", p)].metrics["rel_l2"] == c[("torch", p)].metrics["rel_l2"]


def test_a_wrong_token_is_refused_before_anything_is_read(worker, tmp_path):
    addr, proc = worker
    wrong = tmp_path / "wrong"
    wrong.write_text("not the token")
    routes.configure(host={"torch@remote": addr}, token_file=str(wrong))
    r = fpdiff.check("example:tinycnn", backends=["torch@remote"], precisions=["fp32"])
    c = cells(r)[("torch@remote", "fp32")]
    assert c.status == "unsupported" and "authentication failed" in c.reason, c.reason
    assert proc.poll() is None  # the worker is still serving


def test_a_slow_remote_cell_times_out_and_the_next_one_runs(worker, tmp_path):
    addr, _ = worker
    routes.configure(host={"slow": addr, "torch@remote": addr}, token_file=str(tmp_path / "token"))
    r = fpdiff.check("example:tinycnn", backends=["slow", "torch@remote"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "slow.py")], timeout=4)
    c = cells(r)
    assert c[("slow", "fp32")].status == "timeout", c[("slow", "fp32")].reason
    assert c[("torch@remote", "fp32")].status == "pass"


def test_a_worker_killed_mid_job_costs_that_cell(worker, tmp_path):
    addr, proc = worker
    routes.configure(host={"slow": addr}, token_file=str(tmp_path / "token"))
    threading.Timer(6.0, lambda: proc.send_signal(signal.SIGKILL)).start()
    t = time.monotonic()
    r = fpdiff.check("example:tinycnn", backends=["torch", "slow"], precisions=["fp32", "fp16"],
                     plugins=[str(PLUGINS / "slow.py")], timeout=60)
    c = cells(r)
    assert time.monotonic() - t < 40  # no cell waited for its timeout
    assert c[("slow", "fp32")].status == "crash" and "connection lost" in c[("slow", "fp32")].reason
    assert c[("slow", "fp16")].status == "unsupported" and "cannot reach" in c[("slow", "fp16")].reason
    assert c[("torch", "fp16")].status == "pass"


def test_a_connection_dropped_mid_job_costs_that_cell(worker, tmp_path):
    """Through a loopback relay that cuts its first connection after 6 s; the next cell connects again."""
    addr, proc = worker
    relay = _Relay(addr, cut_first_after=6.0)
    routes.configure(host={"slow": relay.addr, "torch@remote": relay.addr}, token_file=str(tmp_path / "token"))
    r = fpdiff.check("example:tinycnn", backends=["slow", "torch@remote"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "slow.py")], timeout=60)
    c = cells(r)
    assert c[("slow", "fp32")].status == "crash" and "connection lost" in c[("slow", "fp32")].reason
    assert c[("torch@remote", "fp32")].status == "pass" and proc.poll() is None
    relay.close()


class _Relay:
    """Forwards loopback connections to the worker; the first one is cut after a delay (a network drop)."""

    def __init__(self, target: str, cut_first_after: float) -> None:
        host, port = target.split(":")
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.cut = cut_first_after
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
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()
            if first:
                threading.Timer(self.cut, self._cut, args=(client, upstream)).start()
                first = False

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(1 << 16):
                b.sendall(data)
        except OSError:
            pass

    @staticmethod
    def _cut(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.server.close()
        self._cut(*self.open)


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
        assert old.status in ("pass", "precision-loss") and old.status == new.status, (old.reason, new.reason)
        assert old.info["worker"]["versions"]["onnxruntime"] == "1.20.1"
    assert r.versions["onnxruntime"] != "1.20.1"
