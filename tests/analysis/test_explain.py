"""The commands check suggests run as printed: they carry the run's route for a routed backend."""
import sys

from fpdiff.analysis.check.explain import route_options
from fpdiff.backends import registry
from fpdiff.backends.routes import Routes, using


def test_a_routed_backend_keeps_its_route_in_the_suggested_command(tmp_path):
    token = tmp_path / "token"
    token.write_text("t")
    given = Routes(python={"ort@other": sys.executable}, host={"iree@gpu": "10.0.0.2:7000"},
                   token_file=str(token))
    with using(given):
        reg = registry()
    assert route_options(reg.cls("ort@other").route) == ["--backend-python", f"ort@other={sys.executable}"]
    assert route_options(reg.cls("iree@gpu").route) == ["--backend-host", "iree@gpu=10.0.0.2:7000", "--token-file",
                                                        str(token)]
    assert route_options(reg.cls("ort").route) == []
