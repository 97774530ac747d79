"""The compile cache on real files: hits, the size limit, least-recently-used eviction, builds in flight, several
processes sharing one folder, and the info and clear that `fpdiff cache` prints."""
import fcntl
import multiprocessing
import os
import time

import pytest

from fpdiff.core.errors import UsageError
from fpdiff.runtime import cache
from fpdiff.runtime.cache import Cache

KB = 1000  # each test entry's bytes


def writer(size: int = KB):
    def build(p):
        p.write_bytes(b"x" * size)
    return build


def put(root, key: str, limit: int, size: int = KB, age: float = 0.0):
    """One build in a fresh Cache (one job's), its mtime set `age` seconds back."""
    path, hit = Cache(root, limit=limit).get_or_build(key, suffix=".bin", build=writer(size))
    if age:
        t = time.time() - age
        os.utime(path, (t, t))
    return path


def names(root) -> set[str]:
    return {p.name for p in root.iterdir() if not p.name.startswith(".")}


@pytest.mark.parametrize("text, want", [("4096", 4096), ("500M", 500 << 20), ("4G", 4 << 30), ("4gb", 4 << 30),
                                        ("1.5GiB", 3 << 29), (" 2 k ", 2048), ("0", 0), ("off", 0), ("OFF", 0)])
def test_sizes_read(text, want):
    assert cache.parse_size(text) == want


@pytest.mark.parametrize("text", ["lots", "-1", "4X", "G", "1e9", "4 G B"])
def test_malformed_size_is_one_line_naming_the_variable(text):
    with pytest.raises(UsageError) as e:
        cache.parse_size(text)
    assert cache.LIMIT_ENV in str(e.value) and "\n" not in str(e.value) and repr(text) in str(e.value)


def test_limit_from_the_environment_or_the_default(monkeypatch):
    monkeypatch.delenv(cache.LIMIT_ENV, raising=False)
    assert cache.cache_limit() == (cache.DEFAULT_LIMIT, "default")
    monkeypatch.setenv(cache.LIMIT_ENV, "500M")
    assert cache.cache_limit() == (500 << 20, cache.LIMIT_ENV)
    monkeypatch.setenv(cache.LIMIT_ENV, "off")
    assert cache.cache_limit() == (0, cache.LIMIT_ENV)


def test_a_run_with_a_malformed_limit_stops_before_any_work(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.LIMIT_ENV, "4 gigs")
    with pytest.raises(UsageError, match=cache.LIMIT_ENV):
        cache.run_folder(str(tmp_path))
    assert cache.run_folder(False) is None  # no cache: no limit to read


def test_a_malformed_limit_fails_before_the_build(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.LIMIT_ENV, "plenty")
    built = []
    with pytest.raises(UsageError):
        Cache(tmp_path).get_or_build("k", suffix=".bin", build=built.append)
    assert built == []


def test_hit_returns_the_artifact_and_refreshes_its_recency(tmp_path):
    first = put(tmp_path, "a", limit=0, age=3600)
    old = first.stat().st_mtime
    path, hit = Cache(tmp_path).get_or_build("a", suffix=".bin", build=writer())
    assert hit and path == first and path.stat().st_mtime > old + 3000


def test_least_recently_used_goes_first_and_a_hit_counts_as_use(tmp_path):
    limit = 3 * KB
    a, b, c = (put(tmp_path, k, limit, age=age) for k, age in (("a", 300), ("b", 200), ("c", 100)))
    Cache(tmp_path, limit=limit).get_or_build("a", suffix=".bin", build=writer())  # a is now the newest
    d = put(tmp_path, "d", limit)
    assert names(tmp_path) == {a.name, c.name, d.name}  # b, least recently used, went
    e = put(tmp_path, "e", limit)
    assert names(tmp_path) == {a.name, d.name, e.name}


def test_the_limit_holds_over_many_builds(tmp_path):
    limit = 10 * KB
    for i in range(40):
        put(tmp_path, f"k{i}", limit, size=KB * (1 + i % 3))
        assert cache.cache_info(tmp_path).bytes <= limit
    assert cache.cache_info(tmp_path).entries >= 3


def test_no_limit_keeps_everything(tmp_path):
    for i in range(12):
        put(tmp_path, f"k{i}", limit=0)
    assert cache.cache_info(tmp_path).entries == 12


def test_the_entry_just_built_stays_even_over_the_limit(tmp_path):
    put(tmp_path, "small", limit=2 * KB, age=60)
    big = put(tmp_path, "big", limit=2 * KB, size=5 * KB)
    assert names(tmp_path) == {big.name}


def test_entries_this_job_uses_are_not_evicted_under_it(tmp_path):
    limit = 2 * KB
    job = Cache(tmp_path, limit=limit)
    used, _ = job.get_or_build("mine", suffix=".bin", build=writer())
    os.utime(used, (time.time() - 600, time.time() - 600))  # the oldest in the folder, but this job holds it
    other = put(tmp_path, "other", limit, age=300)
    new, _ = job.get_or_build("next", suffix=".bin", build=writer())
    assert names(tmp_path) == {used.name, new.name} and not other.exists()


def test_an_entry_is_the_artifact_with_what_backends_keep_beside_it(tmp_path):
    limit = 3 * KB

    def compile_module(out):  # as IREE's build: the module, and its compilation phases dumped beside it
        out.write_bytes(b"v" * KB)
        phases = out.with_name(out.name.split(".")[0] + ".phases")
        phases.mkdir()
        (phases / "model.1.input.mlir").write_bytes(b"m" * KB)
    put(tmp_path, "old", limit, age=400)
    vmfb, _ = Cache(tmp_path, limit=limit).get_or_build("module", suffix=".vmfb", build=compile_module)
    stem = vmfb.name.removesuffix(".vmfb")
    (tmp_path / f"{stem}.import.json").write_text("{}")  # written by the backend after the build returns
    for p in (vmfb, tmp_path / f"{stem}.phases" / "model.1.input.mlir", tmp_path / f"{stem}.phases",
              tmp_path / f"{stem}.import.json"):
        os.utime(p, (time.time() - 300, time.time() - 300))
    info = cache.cache_info(tmp_path)
    assert info.entries == 2 and info.bytes == 3 * KB + 2
    newer = put(tmp_path, "newer", limit)  # the phases were counted at the build: this one passes the limit
    assert names(tmp_path) == {newer.name}  # the module went whole: its record and phases with it


def test_a_subfolder_holds_entries_too(tmp_path):
    opset = tmp_path / "opset"
    opset.mkdir()
    converted = opset / f"{'0' * 20}.opset21.onnx"
    converted.write_bytes(b"o" * KB)
    os.utime(converted, (time.time() - 900, time.time() - 900))
    assert cache.cache_info(tmp_path).entries == 1
    put(tmp_path, "a", limit=2 * KB, age=100)
    put(tmp_path, "b", limit=2 * KB)
    assert not converted.exists() and len(names(tmp_path) - {"opset"}) == 2


def test_a_build_in_flight_stays_and_a_dead_ones_leftovers_go(tmp_path):
    live = tmp_path / f"{'1' * 20}.vmfb.tmp4242"
    dead = tmp_path / f"{'2' * 20}.vmfb.tmp4343"
    for p, age in ((live, 1200), (dead, cache.STALE_BUILD_S + 60)):
        p.write_bytes(b"t" * KB)
        os.utime(p, (time.time() - age, time.time() - age))
    put(tmp_path, "a", limit=KB)
    assert live.exists() and not dead.exists()


def test_a_failed_build_leaves_nothing(tmp_path):
    def fails(p):
        p.write_bytes(b"half")
        raise RuntimeError("compiler died")
    with pytest.raises(RuntimeError):
        Cache(tmp_path, limit=KB).get_or_build("k", suffix=".bin", build=fails)
    assert names(tmp_path) == set()


def test_what_the_kept_total_missed_is_found_by_the_next_scan(tmp_path, monkeypatch):
    limit = 3 * KB
    put(tmp_path, "a", limit)
    stray = tmp_path / f"{'4' * 20}.onnx"  # written beside the cache's own builds (a converted model, a record)
    stray.write_bytes(b"s" * 5 * KB)
    os.utime(stray, (time.time() - 600, time.time() - 600))
    monkeypatch.setattr(cache, "RESCAN_S", 0.0)  # the kept total is stale at once: the next build scans
    put(tmp_path, "b", limit)
    assert not stray.exists() and cache.cache_info(tmp_path).bytes == 2 * KB


def test_info_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.LIMIT_ENV, "1G")
    for k in "abc":
        put(tmp_path, k, limit=0)
    (tmp_path / "notes.txt").write_text("not an entry")
    building = tmp_path / f"{'3' * 20}.pte.tmp99"
    building.write_bytes(b"b" * KB)
    info = cache.cache_info(tmp_path)
    assert (info.entries, info.bytes, info.limit, info.limit_from) == (4, 4 * KB, 1 << 30, cache.LIMIT_ENV)
    done = cache.clear(tmp_path)
    assert (done.entries, done.bytes, done.kept) == (3, 3 * KB, 1)
    assert names(tmp_path) == {"notes.txt", building.name}  # what is not the cache's, and a build in flight, stay


def test_a_file_as_the_cache_folder_is_a_usage_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(UsageError, match="is a file"):
        cache.cache_info(f)


def _builder(root: str, seed: int, errors) -> None:
    """One worker process: builds and hits overlapping keys into the shared folder under a tiny limit."""
    try:
        for i in range(30):
            key = f"k{(i * 7 + seed) % 23}"
            Cache(root, limit=5 * KB).get_or_build(key, suffix=".bin", build=writer(KB + 37 * (i % 5)))
    except BaseException as e:  # noqa: BLE001  the parent reports whatever a builder raised
        errors.put(f"{type(e).__name__}: {e}")
        raise


def test_concurrent_builders_share_one_folder_within_its_limit(tmp_path):
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    procs = [ctx.Process(target=_builder, args=(str(tmp_path), s, errors)) for s in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0], errors.get(timeout=1) if not errors.empty() else None
    info = cache.cache_info(tmp_path)
    assert 0 < info.bytes <= 5 * KB
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]  # no temp file or build marker left


def _hold_lock(root, held, release) -> None:
    """Another run evicting: holds the folder's lock until told to let go."""
    with open(root / cache.LOCK_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        held.set()
        release.wait(60)


def test_eviction_waits_for_the_folders_lock(tmp_path):
    for k in "ab":
        put(tmp_path, k, limit=0, age=100)
    ctx = multiprocessing.get_context("fork")
    held, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(tmp_path, held, release))
    holder.start()
    try:
        assert held.wait(30)
        builder = ctx.Process(target=put, args=(tmp_path, "c", KB))
        builder.start()
        builder.join(1.0)
        assert builder.is_alive() and len(names(tmp_path)) == 3  # built and in place; its eviction waits its turn
    finally:
        release.set()
        holder.join(30)
    builder.join(60)
    assert builder.exitcode == 0 and len(names(tmp_path)) == 1


def test_a_companion_is_named_after_the_artifacts_final_name_even_while_it_is_built(tmp_path):
    """A build writes to a temporary name; what it writes beside it must land where a later hit looks for it."""
    cache = Cache(tmp_path)
    seen = {}

    def build(out):
        seen["companion"] = cache.beside(out, ".qdq.onnx")
        seen["companion"].write_text("graph")
        out.write_text("artifact")
    path, hit = cache.get_or_build("k", suffix=".pte", build=build)
    assert not hit and seen["companion"] == path.with_suffix(".qdq.onnx") and seen["companion"].exists()
    assert cache.beside(path, ".qdq.onnx") == seen["companion"]
