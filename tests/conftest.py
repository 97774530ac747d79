import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PLUGINS = HERE / "plugins"
SPECS = HERE / "specs"


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """One compile cache and one run history for the whole session, never the user's."""
    os.environ["FPDIFF_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    os.environ["FPDIFF_STORE"] = str(tmp_path_factory.mktemp("store") / "history.sqlite")
