"""Compiled artifacts on disk, keyed by a content hash of everything that can change them, bounded in size: when a
build takes the folder over its limit, the least recently used entries go first.

An entry is everything in the folder named by one key: the artifact (`<digest><suffix>`) and what backends keep
beside it (`<digest>.import.json`, `<digest>.phases/`, ...); files named so in a plain subfolder (`opset/`) are
entries too. A hit touches the artifact, so an entry's recency is the newest mtime among its files. Eviction runs
under an exclusive flock on the folder's lock file, so concurrent runs sharing the folder evict one at a time; a
build in flight (its temp file or build marker is fresh), an entry this Cache handed out, and an entry touched
since the scan are never removed."""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from fpdiff.core.errors import UsageError
from fpdiff.core.paths import cache_root
from fpdiff.runtime import rundir
from fpdiff.sources.base import digest

LIMIT_ENV = "FPDIFF_CACHE_MAX"
# 4 GiB: a default check writes about one weight-sized file per backend, precision and shape variant (ONNX exports,
# ONNX Runtime's optimized graphs, IREE modules: some 30); for a MiniLM-sized model (90 MB of fp32 weights) that is
# 2-3 GiB, so a rerun is all hits. Past that a long campaign's older models go first, and the cache stays a small
# share of a disk.
DEFAULT_LIMIT = 4 << 30
# A temp file or build marker older than this is a build whose process died (a worker killed at its timeout, which
# is minutes): its entry is evictable again.
STALE_BUILD_S = 6 * 3600.0
# The folder's total is kept between builds (TOTAL_FILE) and trusted this long; then a build scans the folder
# again, catching what was written beside the artifacts or removed by hand since.
RESCAN_S = 600.0
LOCK_FILE, TOTAL_FILE = ".lock", ".total"
_KEY_CHARS = len(digest())
_KEY = re.compile(rf"[0-9a-f]{{{_KEY_CHARS}}}(?=\.)")  # digest()'s names: its hex digits, then a suffix
_BUILDING = re.compile(r"\.tmp\d+")  # get_or_build's temp file and build marker: name.tmp<pid>[.building]
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_NO_LIMIT = ("0", "off", "none")


@dataclasses.dataclass
class Entry:
    key: str  # the digest, with its subfolder ("opset/<digest>") for one below the root
    paths: list[Path]
    bytes: int
    used: float  # the newest mtime among its files: when it was last built or hit
    building: bool  # a fresh temp file or build marker: some process is building it now


@dataclasses.dataclass
class CacheInfo:
    root: str
    bytes: int
    entries: int
    limit: int  # 0: no limit
    limit_from: str  # "default" or LIMIT_ENV

    def as_dict(self) -> dict:
        return {"kind": "cache", **dataclasses.asdict(self)}


@dataclasses.dataclass
class Cleared:
    root: str
    bytes: int
    entries: int
    kept: int  # entries being built by a running fpdiff, left in place

    def as_dict(self) -> dict:
        return {"kind": "cache-clear", **dataclasses.asdict(self)}


class Cache:
    def __init__(self, root: Path | str | None, limit: int | None = None) -> None:
        self.root = Path(root) if root else None  # None: caching off, artifacts go to a temp dir
        self.limit = limit  # None: FPDIFF_CACHE_MAX, else DEFAULT_LIMIT; 0: no limit
        self.used: set[str] = set()  # keys this Cache handed out: in use by its job, never evicted under it

    def path(self, *key: str, suffix: str) -> Path:
        base = self.root if self.root else rundir.mkdtemp(prefix="fpdiff-nocache-")
        base.mkdir(parents=True, exist_ok=True)
        return base / f"{digest(*key)}{suffix}"

    def get_or_build(self, *key: str, suffix: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
        """Return (path, hit). `build` writes to a temp path that is renamed into place only when it succeeds."""
        final = self.path(*key, suffix=suffix)
        if self.root and final.exists():
            self.used.add(final.name[:_KEY_CHARS])
            _touch(final)
            return final, True
        limit = self._limit() if self.root else 0  # a bad FPDIFF_CACHE_MAX stops before the build, not after
        tmp = final.with_name(final.name + f".tmp{os.getpid()}")
        marker = tmp.with_name(tmp.name + ".building")
        try:
            if self.root:
                marker.touch()
            build(tmp)
            os.replace(tmp, final)
        finally:
            _remove(tmp)
            marker.unlink(missing_ok=True)
        if self.root:
            self.used.add(final.name[:_KEY_CHARS])
            if limit:
                with contextlib.suppress(OSError):  # a folder that cannot be trimmed keeps the artifact good
                    self._settle(final, limit)
        return final, False

    @staticmethod
    def beside(built: Path, suffix: str) -> Path:
        """A companion of a cached artifact (its emulation graph, its record), named after the artifact's final name
        even when `built` is the temporary file get_or_build hands its build: both land together under one key."""
        return built.with_name(re.sub(r"\.tmp\d+$", "", built.name)).with_suffix(suffix)

    def _limit(self) -> int:
        return cache_limit()[0] if self.limit is None else self.limit

    def _settle(self, built: Path, limit: int) -> None:
        """Count the new entry into the folder's total; scan and evict only when the total passes the limit."""
        assert self.root is not None
        with _locked(self.root):
            total = _read_total(self.root)
            if total is not None:
                total += _entry_bytes(built)
            if total is None or total > limit:
                total = _evict(self.root, limit, self.used)
            _write_total(self.root, total)


def cache_limit() -> tuple[int, str]:
    """(bytes, where it came from): FPDIFF_CACHE_MAX when set, else DEFAULT_LIMIT; 0 is no limit."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    return (parse_size(text), LIMIT_ENV) if text else (DEFAULT_LIMIT, "default")


def parse_size(text: str) -> int:
    """Bytes from 4294967296, 500M, 4G, 1.5GiB (powers of 1024); 0, off or none: no limit."""
    if text.strip().lower() in _NO_LIMIT:
        return 0
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise UsageError(f"{LIMIT_ENV} wants a size in bytes or with a suffix K, M, G or T (500M, 4G), or 0 or off "
                         f"for no limit; got {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def run_folder(cache_dir: str | Path | None | bool) -> str | None:
    """The cache folder a run uses (None: off); a bad FPDIFF_CACHE_MAX stops the run here, before any work."""
    if cache_dir is False:
        return None
    cache_limit()
    return str(cache_dir or cache_root())


def cache_info(root: str | Path | None = None) -> CacheInfo:
    """Where the cache is, how big, how many entries, and its limit with where that came from."""
    root = _folder(root)
    found = entries(root)
    limit, source = cache_limit()
    return CacheInfo(str(root), sum(e.bytes for e in found), len(found), limit, source)


def clear(root: str | Path | None = None) -> Cleared:
    """Remove every entry but those being built now (a concurrent run would lose its artifact)."""
    root = _folder(root)
    if not root.is_dir():
        return Cleared(str(root), 0, 0, 0)
    with _locked(root):
        found = entries(root)
        gone = [e for e in found if not e.building]
        for e in gone:
            _remove_entry(e)
        _write_total(root, sum(e.bytes for e in found if e.building))
    return Cleared(str(root), sum(e.bytes for e in gone), len(gone), len(found) - len(gone))


def evict(root: str | Path, limit: int, keep: Collection[str] = frozenset()) -> int:
    """Trim the folder to `limit` bytes, least recently used first; returns what it holds after."""
    root = Path(root)
    with _locked(root):
        total = _evict(root, limit, keep)
        _write_total(root, total)
    return total


def entries(root: Path) -> list[Entry]:
    """Every entry of the folder, least recently used first; files vanishing during the scan are left out."""
    groups: dict[str, Entry] = {}
    for folder, prefix in _folders(root):
        for item in _scan(folder):
            m = _KEY.match(item.name)
            if m is None:
                continue
            try:
                st = item.stat(follow_symlinks=False)
                size = _bytes(Path(item.path)) if item.is_dir(follow_symlinks=False) else st.st_size
            except FileNotFoundError:
                continue
            e = groups.setdefault(prefix + m.group(), Entry(prefix + m.group(), [], 0, 0.0, False))
            e.paths.append(Path(item.path))
            e.bytes += size
            e.used = max(e.used, st.st_mtime)
            e.building |= bool(_BUILDING.search(item.name)) and time.time() - st.st_mtime < STALE_BUILD_S
    return sorted(groups.values(), key=lambda e: e.used)


def _evict(root: Path, limit: int, keep: Collection[str]) -> int:
    """Under the lock: remove least recently used entries until the total fits; returns the total after."""
    found = entries(root)
    total = sum(e.bytes for e in found)
    for e in found:
        if total <= limit:
            break
        if e.key in keep or e.building or _used_since(e):
            continue
        _remove_entry(e)
        total -= e.bytes
    return total


def _folders(root: Path) -> Iterator[tuple[Path, str]]:
    """The root, and its plain subfolders (no dot in the name, not hidden), whose digest-named files are entries."""
    yield root, ""
    for item in _scan(root):
        if "." not in item.name and item.is_dir(follow_symlinks=False):
            yield Path(item.path), item.name + "/"


def _scan(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _bytes(path: Path) -> int:
    """Bytes of a file, or of every file below a folder; 0 for what is gone."""
    try:
        if not path.is_dir():
            return path.stat().st_size
        return sum(_bytes(Path(item.path)) if item.is_dir(follow_symlinks=False)
                   else item.stat(follow_symlinks=False).st_size for item in _scan(path))
    except FileNotFoundError:
        return 0


def _entry_bytes(artifact: Path) -> int:
    """Bytes of the artifact and what its build wrote beside it (IREE's phases), without scanning other entries."""
    stem = artifact.name[:_KEY_CHARS] + "."
    return sum(_bytes(Path(item.path)) for item in _scan(artifact.parent) if item.name.startswith(stem))


def _used_since(e: Entry) -> bool:
    """True when a member was touched after the scan (another run hit it): it is the newest now, not the oldest."""
    for p in e.paths:
        with contextlib.suppress(FileNotFoundError):
            if p.stat().st_mtime > e.used:
                return True
    return False


def _remove_entry(e: Entry) -> None:
    """The artifact first (shortest name: a concurrent lookup then misses instead of finding half an entry)."""
    for p in sorted(e.paths, key=lambda p: len(p.name)):
        _remove(p)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _touch(path: Path) -> None:
    """A hit makes its entry the most recently used; a read-only cache is still read."""
    with contextlib.suppress(OSError):
        os.utime(path)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """The folder's exclusive lock, held across processes; closing the file releases it."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _read_total(root: Path) -> int | None:
    """The total kept by the last build, None when there is none or it is older than RESCAN_S."""
    try:
        text, when = (root / TOTAL_FILE).read_text().split()
        return int(text) if time.time() - float(when) < RESCAN_S else None
    except (OSError, ValueError):
        return None


def _write_total(root: Path, total: int) -> None:
    tmp = root / f"{TOTAL_FILE}.tmp{os.getpid()}"
    tmp.write_text(f"{total} {time.time()}")
    os.replace(tmp, root / TOTAL_FILE)


def _folder(root: str | Path | None) -> Path:
    """The cache folder asked for (default: FPDIFF_CACHE, else ~/.cache/fpdiff); a file there is a usage error."""
    path = Path(root) if root else cache_root()
    if path.exists() and not path.is_dir():
        raise UsageError(f"the cache folder {path} is a file, not a folder")
    return path
