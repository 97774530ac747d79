"""One test every backend passes, however it is attached (built-in, plugin adapter, another interpreter, a remote
worker): fp32 of every built-in example passes, a precision it cannot run is unsupported with a reason, the
computed dtype is reported, and a crash costs one cell."""
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import fpdiff
from conftest import PLUGINS, builtin_backends
from fpdiff.backends import registry, routes
from fpdiff.core.status import Status

pytestmark = pytest.mark.slow  # real backends and workers: make test, not make test-fast
IPEX_PYTHON = Path(__file__).resolve().parents[2] / ".venv-ipex" / "bin" / "python"
LITERT_PYTHON = Path(__file__).resolve().parents[2] / ".venv-litert" / "bin" / "python"
# Built-ins attached apart: IPEX in its own interpreter (below, when .venv-ipex exists), LiteRT whose converter needs
# its own interpreter (below, when .venv-litert exists), Core ML predicting only on a Mac (its own test below). Every
# other built-in, from its entry point, runs the grid here.
APART = {"ipex", "coreml", "litert"}
LOCAL = [*sorted(builtin_backends() - APART), "eager-plugin"]
TOKEN = "conformance"


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    token = tmp_path_factory.mktemp("token") / "token"
    token.write_text(TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "fpdiff", "worker", "--listen", "127.0.0.1:0", "--token-file",
                             str(token)], stderr=subprocess.PIPE, text=True)
    addr = re.search(r"listening on ([\d.]+:\d+)", proc.stderr.readline()).group(1)
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    yield addr, str(token)
    proc.kill()
    proc.wait()


@pytest.fixture
def attached(remote):
    """Every way a backend can be attached, by the names the grid shows."""
    addr, token = remote
    python = {"torch@interpreter": sys.executable, "eager-plugin@interpreter": sys.executable}
    names = [*LOCAL, "torch@interpreter", "torch@remote", "eager-plugin@interpreter"]
    if IPEX_PYTHON.exists():
        python["ipex"] = str(IPEX_PYTHON)
        names.append("ipex")
    if LITERT_PYTHON.exists():
        python["litert"] = str(LITERT_PYTHON)
        names.append("litert")
    routes.configure(python=python, host={"torch@remote": addr}, token_file=token)
    yield names
    routes.configure()


def test_ipex_env_is_there_or_its_absence_is_said():
    if not IPEX_PYTHON.exists():
        pytest.skip("no .venv-ipex: `make ipex-env` builds it (torch 2.8 + IPEX 2.8, about 7 GB)")


def test_litert_env_is_there_or_its_absence_is_said():
    if not LITERT_PYTHON.exists():
        pytest.skip("no .venv-litert: `make litert-env` builds it (litert-torch 0.10 + torch 2.13, about 2.2 GB)")


@pytest.mark.parametrize("example", ["tinycnn", "tinyformer", "rmsnorm", "router"])
def test_fp32_passes_everywhere_and_a_missing_precision_is_a_declared_refusal(attached, example):
    r = fpdiff.check(f"example:{example}", backends=attached, precisions=["fp32", "tf32"], repeat=1,
                     shape_variants=["static"], plugins=[str(PLUGINS / "eager.py")])
    seen = set()
    for c in r.cells:
        seen.add(c.backend)
        where = f"{c.backend}/{c.precision}"
        if c.precision == "fp32":
            assert c.status == Status.PASS, f"{where}: {c.reason}"
            assert c.computed_dtype and "float32" in c.computed_dtype, f"{where}: {c.computed_dtype}"
        else:  # tf32 is a CUDA tensor-core mode: no CPU backend has it
            assert c.status == Status.UNSUPPORTED and c.reason, where
    assert seen == set(attached)


@pytest.mark.parametrize("attach", ["local", "interpreter", "remote"])
def test_a_crash_costs_one_cell(remote, attach):
    addr, token = remote
    name = {"local": "dies", "interpreter": "dies@interpreter", "remote": "dies@remote"}[attach]
    if attach == "interpreter":
        routes.configure(python={name: sys.executable})
    elif attach == "remote":
        routes.configure(host={name: addr}, token_file=token)
    try:
        r = fpdiff.check("example:tinycnn", backends=[name, "torch"], precisions=["fp32", "fp16"], repeat=1,
                         plugins=[str(PLUGINS / "misbehave.py")])
    finally:
        routes.configure()
    c = {(x.backend, x.precision): x for x in r.cells}
    assert c[(name, "fp32")].status == Status.CRASH and c[(name, "fp16")].status == Status.CRASH
    assert c[("torch", "fp32")].status == Status.PASS and c[("torch", "fp16")].status == Status.PASS


def test_every_registered_backend_is_under_conformance():
    """Every backend registered here (a third party's entry point too) runs the grid, or is attached apart."""
    covered = set(LOCAL) | APART
    assert set(registry().names()) - {"eager-plugin"} <= covered


def test_coreml_converts_here_and_refuses_prediction_with_the_way_to_a_mac():
    r = fpdiff.check("example:tinycnn", backends=["coreml"], precisions=["fp32"], repeat=1)
    c = r.cells[0]
    if sys.platform == "darwin":
        assert c.status == Status.PASS
    else:
        assert c.status == Status.UNSUPPORTED and "fpdiff worker --listen" in c.reason
        assert c.op_dtypes == {"float32": sum(c.op_dtypes.values())}
