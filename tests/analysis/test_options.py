"""The shared options are checked once per run, each wrong one a one-line usage error; ready() builds the run's one
registry and checks each backend's flags against it."""
from pathlib import Path

import pytest

from fpdiff.analysis.check import CheckOptions
from fpdiff.analysis.options import RunOptions, split
from fpdiff.core.errors import UsageError


@pytest.mark.parametrize("given, said", [
    ({"timeout": 0}, "timeout is seconds per job"),
    ({"timeout": "5"}, "timeout is seconds per job"),
    ({"seed": 1.5}, "seed is an integer"),
    ({"seed": True}, "seed is an integer"),
    ({"cache_dir": True}, "cache_dir is a folder"),
    ({"cache_dir": 3}, "cache_dir is a folder"),
    ({"plugins": "mine.py"}, "plugins is a list"),
    ({"inputs": 5}, "inputs is the path of an .npz"),
    ({"shapes": {"x": [1, -2]}}, "the shape of x is a list of non-negative integers"),
    ({"shapes": [1, 2]}, "shapes maps an input's name"),
    ({"backend_flags": ["--O3"]}, "backend_flags maps a backend's name"),
    ({"backend_flags": {"nope": ["-x"]}}, "unknown backend 'nope'"),
    ({"backend_flags": {"torch": ["-x"]}}, "backend torch takes no flags"),
    ({"progress": 3}, "progress is a function"),
])
def test_a_wrong_shared_option_is_one_line(given, said):
    with pytest.raises(UsageError) as e:
        RunOptions(**given).ready()
    assert said in str(e.value) and "\n" not in str(e.value)


def test_ready_builds_the_registry_once_and_keeps_what_was_given():
    ready = RunOptions(backend_flags={"iree": "--iree-opt-level=O3"}, cache_dir=Path("/tmp/c"),
                       shapes={"x": (1, 2)}).ready()
    assert ready.registry is not None and "torch" in ready.registry.names()
    assert ready.flags == {"iree": ("--iree-opt-level=O3",)} and ready.shapes == {"x": [1, 2]}
    assert ready.cache == "/tmp/c" and ready.ready() is ready


def test_keywords_split_into_the_analysis_options_and_the_shared_ones():
    own, shared = split({"backends": ["ort"], "seed": 3, "timeout": 9.0}, CheckOptions)
    assert own == {"backends": ["ort"]} and shared == {"seed": 3, "timeout": 9.0}
