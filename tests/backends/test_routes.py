"""Routes: where a backend runs, from fpdiff.toml and the command line; bad ones are one clear line."""
import pytest

from fpdiff.backends import registry, routes
from fpdiff.cli import main
from fpdiff.core.errors import UsageError


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    yield
    routes.configure()


def test_config_file_routes_with_paths_relative_to_it(tmp_path):
    (tmp_path / "fpdiff.toml").write_text('[backends."ort@1.20"]\npython = ".venv-old/bin/python"\n\n'
                                          '[backends.coreml]\nhost = "mac.local:8470"\ntoken_file = "token"\n'
                                          'kinds = ["torch"]\n')
    r = routes.active()
    assert r["ort@1.20"].base == "ort" and r["ort@1.20"].python == str(tmp_path / ".venv-old/bin/python")
    assert r["coreml"].host == "mac.local:8470" and r["coreml"].token_file == str(tmp_path / "token")


def test_the_command_line_wins_and_routed_names_keep_the_base_declarations(tmp_path):
    (tmp_path / "fpdiff.toml").write_text('[backends."ort@x"]\npython = "/a/python"\n')
    routes.configure(python={"ort@x": "/b/python", "iree@old": "/c/python"})
    reg = registry()
    assert reg.cls("ort@x").route.python == "/b/python"
    assert reg.cls("iree@old").takes_flags and reg.cls("ort@x").kinds == reg.cls("ort").kinds
    # marking outputs needs ORT in this process: a route implements no optional lifecycle method
    assert reg.cls("ort").implements("prepare_marked") and not reg.cls("ort@x").implements("prepare_marked")
    assert not reg.cls("ort@x").cross_checks  # a route runs a backend elsewhere; the judge's cross-check stays local
    assert registry(routed=False).names() == [n for n in reg.names() if "@" not in n]


def test_a_route_has_its_base_backends_quantization_path_and_no_in_process_method():
    """A quantized cell is prepared in the route's worker, so `quant --backends ort@x` is taken; the methods that run
    in this process (a user's converted file read here) are not the route's."""
    routes.configure(python={"ort@x": "/b/python", "mine@x": "/c/python"})
    reg = registry()
    assert reg.cls("ort@x").implements("prepare_quantized") and reg.cls("ort").implements("prepare_quantized")
    assert not reg.cls("ort@x").implements("read_artifact") and reg.cls("ort").implements("read_artifact")
    assert not reg.cls("mine@x").implements("prepare_quantized")  # no base known here: nothing claimed


@pytest.mark.parametrize("text, words", [
    ("[backends.x]\n", "needs exactly one of python = ... or host = ..."),
    ('[backends.x]\npython = "p"\nhost = "h:1"\n', "needs exactly one of"),
    ('[backends.x]\nhost = "nohostport"\n', "a worker address is HOST:PORT"),
    ("[backends\n", "is not valid TOML"),
    ('[backends.x]\npython = "p"\nshape_variant = false\n', "'shape_variant', which is no route setting; known: "
     "python, host, token_file, base, kinds, shape_variants, takes_flags"),
    ('[backends.x]\npython = "p"\ntakes_flags = "yes"\n', "takes_flags must be a bool"),
    ('[backends.x]\npython = "p"\nkinds = ["tflite"]\n', "kinds are torch, onnx"),
])
def test_a_bad_config_is_one_line(tmp_path, text, words):
    (tmp_path / "fpdiff.toml").write_text(text)
    with pytest.raises(UsageError, match=words):
        routes.active()


def test_a_remote_route_without_a_token_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv(routes.TOKEN_ENV, raising=False)
    with pytest.raises(UsageError, match="give a token"):
        routes.Route("coreml", "coreml", host="mac:1").token()


@pytest.mark.parametrize("argv, words", [
    (["backends", "--backend-python", "ort-no-equals"], "--backend-python wants NAME=PYTHON"),
    (["backends", "--backend-host", "x=nohostport"], "a worker address is HOST:PORT"),
    (["worker", "--listen", "nohostport", "--token-file", "t"], "--listen wants HOST:PORT"),
    (["worker", "--listen", "127.0.0.1:0"], "a worker needs a shared token"),
    (["worker", "--listen", "127.0.0.1:0", "--token-file", "/no/such/token"], "cannot read the token file"),
])
def test_cli_bad_routes_and_workers_exit_2_with_one_line(capsys, monkeypatch, argv, words):
    monkeypatch.delenv(routes.TOKEN_ENV, raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err
