import importlib.metadata
import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PLUGINS = HERE / "plugins"
SPECS = HERE / "specs"
DATA = HERE / "data"  # users' own artifacts, made by real converters (data/README.md)


def builtin_backends() -> set[str]:
    """fpdiff's own backends, as its entry points name them (a new built-in is seen by every test that asks)."""
    eps = importlib.metadata.entry_points(group="fpdiff.backends")
    return {ep.name for ep in eps if ep.value.startswith("fpdiff.")}


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """One compile cache and one run history for the whole session, never the user's. Under pytest-xdist the
    workers share the cache (its entries are renamed into place whole, runtime/cache.py), so what one worker
    compiled the other reuses as a serial run would; each keeps its own history."""
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "cache"
    cache.mkdir(exist_ok=True)
    os.environ["FPDIFF_CACHE"] = str(cache)
    os.environ["FPDIFF_STORE"] = str(tmp_path_factory.mktemp("store") / "history.sqlite")



# Files that start a local Ray instance (ray.init, `ray start --head`, a ray.cluster_utils.Cluster): under
# pytest-xdist they run on one worker, one after another, so two Ray instances never start side by side and race
# for ports, cores and /tmp/ray (distribute's timeout test counts on the cluster's cores being its own).
RAY_FILES = {"tests/analysis/ops/test_distribute.py", "tests/analysis/ops/test_ops.py",
             "tests/analysis/fuzz/test_fuzz.py"}


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: absent without it, and then never called
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (make test): each file whole on one worker, so a module-scoped setup (an export, a
    compile, a server) is built once as in a serial run; and the Ray files together, as one unit."""
    if config.getvalue("dist") != "loadfile":
        return None  # another --dist the user asked for: xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling

    class RayTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "ray" if path in RAY_FILES else path
    return RayTogether(config, log)
