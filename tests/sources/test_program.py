"""Exported programs (.pt2 from torch.export.save): the saved example inputs, the program's dynamic dims, --inputs,
and every analysis on one."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from fpdiff.core.errors import UsageError
from fpdiff.sources import load


class Attention(torch.nn.Module):
    """A scaled softmax over a projection, masked: enough to lose precision in fp16 and to have a dynamic batch."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x, mask):
        return torch.softmax(self.norm(self.proj(x)) * 8, -1) * mask.unsqueeze(-1)


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a program's spec is written under ./fpdiff-out


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=32)
    x, mask = torch.randn(3, 5, 32), torch.ones(3, 5)
    program = torch.export.export(Attention().eval(), (x, mask), dynamic_shapes={"x": {0: batch}, "mask": {0: batch}})
    path = tmp_path / "attention.pt2"
    torch.export.save(program, path)
    return path, program, (x, mask)


def test_the_saved_inputs_and_dynamic_dims_come_from_the_program(saved):
    path, program, (x, mask) = saved
    s = load(str(path))
    assert s.ref.kind == "torch" and s.ref.label == str(path)
    assert s.input_names == ["x", "mask"] and torch.equal(s.inputs[0], x) and torch.equal(s.inputs[1], mask)
    dims = s.dynamic_shapes
    assert set(dims) == {"x", "mask"} and dims["x"][0] is dims["mask"][0]  # one symbol: one Dim
    assert (dims["x"][0].min, dims["x"][0].max) == (1, 32)
    assert s.notes["program"] == {"inputs": "saved with the program", "dynamic dims": {"x": [0], "mask": [0]}}
    # the module computes what the program computes, and takes eval() (its mode was fixed at export)
    assert torch.allclose(s.module.eval()(x, mask), program.module()(x, mask))


def test_inputs_file_replaces_the_saved_inputs(saved, tmp_path):
    path, _, _ = saved
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.ones((2, 5, 32), np.float32), mask=np.zeros((2, 5), np.float32))
    s = load(str(path), inputs=str(npz))
    assert s.inputs[0].shape == (2, 5, 32) and s.notes["program"]["inputs"] == f"from {npz}"
    np.savez(npz, x=np.ones((2, 5, 32), np.float32))
    with pytest.raises(UsageError, match=r"lacks arrays for inputs \['mask'\]"):
        load(str(path), inputs=str(npz))


def test_bad_programs_are_one_line(tmp_path):
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="is not an exported program torch.export.load can read"):
        load(str(bad))
    with pytest.raises(UsageError, match="--shape applies to ONNX models"):
        load(str(bad), shapes={"x": [1]})
    with pytest.raises(UsageError, match="model file not found"):
        load(str(tmp_path / "absent.pt2"))


def test_a_program_saved_without_inputs_asks_for_them(tmp_path):
    program = torch.export.export(Attention(), (torch.randn(2, 5, 32), torch.ones(2, 5)))
    program.example_inputs = None
    path = tmp_path / "bare.pt2"
    torch.export.save(program, path)
    with pytest.raises(UsageError, match=r"holds no example inputs .* give --inputs NPZ with an array per input "
                                         r"\(x, mask\)"):
        load(str(path))


def _fpdiff(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fpdiff", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


@pytest.mark.slow
def test_every_analysis_runs_on_a_program(saved, tmp_path):
    """check (static and the program's dynamic batch), locate, plan and ranges on the .pt2, as a user runs them."""
    path, _, _ = saved
    p = _fpdiff("check", str(path), "--backends", "torch,ort", "--precisions", "fp32,fp16", "--json", "c.json",
                "--no-store", cwd=tmp_path)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    r = json.loads((tmp_path / "c.json").read_text())
    assert r["model"] == str(path) and r["source"]["program"]["dynamic dims"] == {"x": [0], "mask": [0]}
    assert {c["shape_variant"] for c in r["cells"] if c["backend"] == "ort"} >= {"static", "dynamic"}
    assert {c["status"] for c in r["cells"] if c["precision"] == "fp32"} == {"pass"}
    assert "exported program" in p.stdout
    for args in (["locate", str(path), "--backend", "ort", "--precision", "fp16", "--json", "l.json"],
                 ["plan", str(path), "--precision", "fp16", "--no-speed", "--json", "p.json"],
                 ["ranges", str(path), "--json", "r.json"]):
        p = _fpdiff(*args, cwd=tmp_path)
        assert p.returncode in (0, 1) and "Traceback" not in p.stderr, (args, p.stdout[-2000:], p.stderr[-2000:])
        assert json.loads((tmp_path / args[-1]).read_text())["model"] == str(path)
