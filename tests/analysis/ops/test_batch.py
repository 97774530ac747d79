"""Cases of one kind share a program (analysis/ops/batch.py): the verdicts are those of each case run alone (same
cells, same statuses), a case that fails in a program is split out and judged alone, and the sweep runs far fewer
jobs. The plugin backends below (this file is also their --plugin file) plant one refusal and one wrong op."""
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fpdiff import api
from fpdiff.core.errors import Unsupported
from fpdiff.core.status import Status

pytestmark = pytest.mark.slow

SLICE = ["add", "mul", "exp", "tanh", "*softmax*", "Relu", "Sigmoid"]
WRONG = 1.25  # the planted op's outputs are off by this factor


class _TanhOff(TorchDispatchMode):
    """tanh's outputs scaled by WRONG, every other op as it is."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * WRONG if func is torch.ops.aten.tanh.default else out


class PickyBackend:
    """Refuses any program holding exp (as a runtime without the kernel says so), computes tanh wrong, and runs
    everything else right in torch eager."""
    name = "picky"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        if any(n.op == "call_function" and "aten.exp" in str(n.target) for n in program.graph.nodes):
            raise Unsupported("picky has no exp kernel", op="exp")
        module = program.module()

        def run(*inputs):
            with torch.no_grad(), _TanhOff():
                return module(*inputs)
        return run


def _sweep(jobs: Counter, monkeypatch, **kw):
    """api.ops on the slice, counting every worker job by backend."""
    from fpdiff.runtime import external
    real = external.Router.run

    def counted(self, job, timeout):
        jobs[job.backend] += 1
        return real(self, job, timeout)
    monkeypatch.setattr(external.Router, "run", counted)
    return api.ops(**{"variants": [], "repro_dir": None, "recheck": False, **kw})


def _statuses(result) -> dict:
    return {(c.case, c.backend, c.precision, c.shape_variant): str(c.status) for c in result.cells}


def test_programs_give_each_case_its_alone_verdict_with_fewer_jobs(monkeypatch):
    kw = {"catalogs": ["torch", "onnx"], "patterns": SLICE, "backends": ["torch", "ort"],
          "precisions": ["fp32", "fp16"]}
    alone_jobs, batched_jobs = Counter(), Counter()
    alone = _sweep(alone_jobs, monkeypatch, program_size=1, **kw)
    batched = _sweep(batched_jobs, monkeypatch, **kw)
    assert alone.cells and _statuses(batched) == _statuses(alone)
    assert {c.support for c in batched.cells} == {c.support for c in alone.cells}
    assert batched.programs["in_programs"] > 0 and alone.programs["in_programs"] == 0
    assert any(c.info.get("program") for c in batched.cells)
    cases = len({c.case for c in alone.cells})
    per_case = {b: (alone_jobs[b] / cases, batched_jobs[b] / cases) for b in alone_jobs}
    assert sum(batched_jobs.values()) * 2 < sum(alone_jobs.values()), per_case
    assert batched_jobs["ort"] * 2 < alone_jobs["ort"], per_case  # the exports and compiles: one per program


def test_a_failing_case_is_split_out_and_judged_alone(monkeypatch):
    kw = {"catalogs": ["torch"], "patterns": ["add", "mul", "exp", "tanh", "sigmoid", "nn.functional.relu"],
          "backends": ["torch", "picky"], "precisions": ["fp32"], "plugins": [__file__]}
    alone = _sweep(Counter(), monkeypatch, program_size=1, **kw)
    jobs = Counter()
    batched = _sweep(jobs, monkeypatch, **kw)
    assert _statuses(batched) == _statuses(alone)
    picky = {c.op: c for c in batched.cells if c.backend == "picky"}
    assert picky["exp"].status == Status.UNSUPPORTED and picky["tanh"].status == Status.MISMATCH
    assert {op for op, c in picky.items() if c.status != Status.PASS} == {"exp", "tanh"}
    for op in ("exp", "tanh"):  # a failing verdict is the case's own, run alone
        assert not picky[op].info.get("program"), picky[op].info
    assert any(c.info.get("program") for c in picky.values() if c.status == Status.PASS)
    assert batched.programs["programs"] > 1 and batched.programs["alone"] >= 2, batched.programs


def test_cases_that_would_test_something_else_run_alone():
    from fpdiff.analysis.ops import batch, catalog
    from fpdiff.analysis.ops import variants as v
    from fpdiff.analysis.ops.sweep import SweepConfig
    from fpdiff.backends import registry
    reg, config = registry(()), SweepConfig(("torch", "ort"), ("fp32",))
    cases, _ = catalog.select(["torch"], ["exp", "round"], 1)
    dynamic = v.expand(cases, ["dynamic"])
    why = {c.case_id + "/" + c.variant: batch.why_alone(c, reg, config) for c in dynamic}
    assert any("dynamic dims" in (w or "") for w in why.values()), why
    assert any("flips" in (w or "") for w in why.values()), why  # round: integer-valued
    assert batch.groups(cases, 1, reg, config) == [[c] for c in cases]
