"""Batches spread over a real Ray cluster started here: the same results as a run in this process, a batch past its
timeout cancelled and one that kills its worker recorded (never retried) while the others return, and addresses that
cannot work refused in one line."""
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from fpdiff.analysis.distribute import CRASH, TIMEOUT, BatchFailure, check_address, run_batches
from fpdiff.core.errors import UsageError

SRC = Path(__file__).resolve().parents[3] / "src"
BATCHES = [[0, 1, 2], [3, 4], [5], [6, 7, 8, 9]]


def seeded_sums(batch: list[int]) -> list[float]:
    """Deterministic numpy work: the same seeds give the same float64 sums in any process."""
    return [float(np.random.default_rng(seed).standard_normal(4096).astype(np.float32).sum(dtype=np.float64))
            for seed in batch]


def pids(batch: list[int]) -> list[int]:
    """Which process ran the batch."""
    return [os.getpid() for _ in batch]


def first_is_slow(batch: list[int]) -> list[int]:
    """Batch 0 finishes last, so completion order differs from batch order."""
    if 0 in batch:
        time.sleep(2)
    return batch


def nap(pids: str, batch: list[str]) -> list[str]:
    """A batch holding "sleep" hangs far past any timeout here (its pid is left in the folder `pids`)."""
    if "sleep" in batch:
        (Path(pids) / str(os.getpid())).touch()
        time.sleep(300)
    return [item.upper() for item in batch]


def fall(marker: str, batch: list[str]) -> list[str]:
    """A batch holding "die" kills its own process, one holding "raise" raises; each attempt is a line in `marker`."""
    with open(marker, "a") as f:
        f.write(f"{batch}\n")
    if "die" in batch:
        os.kill(os.getpid(), signal.SIGKILL)
    if "raise" in batch:
        raise ValueError("bad cell")
    return batch


@pytest.fixture(scope="module")
def cluster():
    """One Ray head with two CPUs for the whole module (its start is the slow part); this module's work functions
    travel by value, since Ray's workers do not have the tests folder on their path."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'fpdiff[ray]'")
    from ray.cluster_utils import Cluster

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    head = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 2, "include_dashboard": False})
    yield head.address
    head.shutdown()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_the_same_results_here_and_on_ray_in_batch_order(cluster):
    here = run_batches(BATCHES, seeded_sums, address=None, timeout=60)
    seen: list[int] = []
    there = run_batches(BATCHES, seeded_sums, address=cluster, timeout=60, on_result=lambda i, r: seen.append(i))
    assert there == here
    assert [len(r) for r in there] == [len(b) for b in BATCHES]
    assert sorted(seen) == list(range(len(BATCHES)))
    ran = run_batches(BATCHES, pids, address=cluster, timeout=60)
    assert os.getpid() not in {p for r in ran for p in r}, "the batches ran in this process, not on Ray"


@pytest.mark.slow
def test_results_come_back_in_batch_order_whatever_order_they_finish_in(cluster):
    seen: list[int] = []
    out = run_batches(BATCHES, first_is_slow, address=cluster, timeout=60, on_result=lambda i, r: seen.append(i))
    assert out == BATCHES
    assert seen[-1] == 0, f"batch 0 was meant to finish last: {seen}"


@pytest.mark.slow
def test_batches_past_their_timeout_are_cancelled_and_free_their_cores(cluster, tmp_path):
    """Two hung batches take both cores of the cluster: the two after them run only if the hung ones are cancelled
    (their workers killed) at the timeout."""
    start = time.monotonic()
    out = run_batches([["sleep"], ["sleep"], ["a"], ["b", "c"]], functools.partial(nap, str(tmp_path)),
                      address=cluster, timeout=4)
    took = time.monotonic() - start
    assert out[2:] == [["A"], ["B", "C"]], out
    for i in (0, 1):
        assert isinstance(out[i], BatchFailure) and (out[i].kind, out[i].batch) == (TIMEOUT, i), out[i]
        assert "4 s" in out[i].message
    assert took < 30, f"waited {took:.0f} s: the hung batches were not cancelled at their timeout"
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert len(pids) == 2
    deadline = time.monotonic() + 10  # a force-cancel kills the worker; its exit is seen within moments
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(_alive, pids)), "a hung batch's worker still runs after its cancel"


@pytest.mark.slow
def test_a_batch_that_kills_its_worker_is_a_crash_tried_once(cluster, tmp_path):
    marker = tmp_path / "attempts"
    out = run_batches([["x"], ["die"], ["raise"], ["y"]], functools.partial(fall, str(marker)), address=cluster,
                      timeout=60)
    assert out[0] == ["x"] and out[3] == ["y"]
    assert isinstance(out[1], BatchFailure) and (out[1].kind, out[1].batch) == (CRASH, 1), out[1]
    assert isinstance(out[2], BatchFailure) and (out[2].kind, out[2].batch) == (CRASH, 2), out[2]
    assert out[2].message == "ValueError: bad cell"
    assert all("\n" not in f.message and f.message for f in out[1:3])
    attempts = marker.read_text().splitlines()
    assert attempts.count("['die']") == 1 and attempts.count("['raise']") == 1, attempts


@pytest.mark.slow
def test_local_starts_its_own_instance_and_stops_it(cluster):
    import ray

    assert run_batches(BATCHES[:2], seeded_sums, address="local", timeout=60) == \
        run_batches(BATCHES[:2], seeded_sums, address=None, timeout=60)
    assert not ray.is_initialized()


def _driver(address: str, **env: str) -> str:
    """What a fresh driver process prints after spreading two batches over `address` (or the line it was refused
    with)."""
    code = ("from fpdiff.analysis.distribute import run_batches\n"
            "from fpdiff.core.errors import UsageError\n"
            f"try:\n    print(run_batches([[1], [2]], list, address={address!r}, timeout=60))\n"
            "except UsageError as e:\n    print(e)\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


@pytest.mark.slow
def test_a_head_from_ray_start_wants_its_token_and_takes_it():
    """`ray start --head` turns token authentication on: a driver without RAY_AUTH_MODE=token is told to set it, and
    with it the batches run there."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'fpdiff[ray]'")
    port = _closed_port()
    # a short folder: Ray's unix sockets live under it, and a socket path has ~107 characters at most
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    head = subprocess.Popen([str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--port",
                             str(port), "--num-cpus", "1", "--include-dashboard", "false", "--disable-usage-stats",
                             "--temp-dir", temp], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
        address = f"127.0.0.1:{port}"
        refused = _driver(address)
        assert refused.startswith(f"no Ray cluster answers at {address}: ") and "RAY_AUTH_MODE=token" in refused
        assert _driver(address, RAY_AUTH_MODE="token") == "[[1], [2]]"
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # the head and every process it started: its own session
        head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the closed port is picked when the test runs, not in its id: every pytest-xdist worker collects the same tests
@pytest.mark.parametrize("address", ["127.0.0.1:{closed}", "10.255.255.1:6379"])
def test_an_address_nobody_answers_at_is_one_line_within_seconds(address):
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'fpdiff[ray]'")
    address = address.format(closed=_closed_port())
    start = time.monotonic()
    with pytest.raises(UsageError, match=f"^no Ray cluster answers at {address}: ") as e:
        run_batches(BATCHES, seeded_sums, address=address, timeout=60)
    assert time.monotonic() - start < 10
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("address", ["", "  ", "0", 0, "http://head:8265", "head:", "head:0", "head:70000", ":6379"])
def test_a_malformed_address_is_refused_up_front(address):
    with pytest.raises(UsageError, match="--ray"):
        check_address(address)


def test_a_positive_timeout_is_required():
    with pytest.raises(UsageError, match="timeout"):
        run_batches(BATCHES, seeded_sums, address=None, timeout=0)


def test_without_ray_an_address_says_which_extra_installs_it():
    """In an interpreter without site-packages Ray cannot be found: the refusal names the extra."""
    code = ("from fpdiff.analysis.distribute import check_address\n"
            "from fpdiff.core.errors import UsageError\n"
            "check_address(None)\n"
            "try:\n    check_address('local')\nexcept UsageError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-S", "-c", code], env={"PYTHONPATH": str(SRC)}, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "--ray local: Ray is not installed; pip install 'fpdiff[ray]'"
