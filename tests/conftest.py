import importlib.metadata
import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PLUGINS = HERE / "plugins"
SPECS = HERE / "specs"


def builtin_backends() -> set[str]:
    """fpdiff's own backends, as its entry points name them (a new built-in is seen by every test that asks)."""
    eps = importlib.metadata.entry_points(group="fpdiff.backends")
    return {ep.name for ep in eps if ep.value.startswith("fpdiff.")}


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """One compile cache and one run history for the whole session, never the user's."""
    os.environ["FPDIFF_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    os.environ["FPDIFF_STORE"] = str(tmp_path_factory.mktemp("store") / "history.sqlite")
