"""A quantized format's plan: the layers ONNX Runtime's quantizer leaves float (nodes_to_exclude) so the quantized
model meets the tolerance against float64, searched in the order quant's per-layer readings give and verified by the
quantizer and runtime themselves at every step; the search alone against a pure function of its keep-set."""
import pytest

import fpdiff
from conftest import SPECS
from fpdiff.analysis.plan.quantized import Layer, search
from fpdiff.analysis.plan.search import Trial
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status

LAYERS = [Layer(f"t{i}", (f"n{i}",), ("MatMul",), "") for i in range(20)]


def run(needed: set[str]):
    log = []

    def evaluate(keep):
        names = {x.tensor for x in keep}
        log.append(names)
        ok = needed <= names
        return Trial(sorted(names), 0.0 if ok else 1.0, ok)
    return search(LAYERS, evaluate), log


@pytest.mark.parametrize("needed", [{"t0"}, {"t3"}, {"t1", "t6"}, {"t2", "t9", "t13"}, {"t18"}])
def test_the_search_finds_exactly_the_needed_layers_in_few_evaluations(needed):
    (keep, trial), log = run(needed)
    assert {x.tensor for x in keep} == needed and trial.passed
    assert len(log) <= 2 * 5 + max(int(t[1:]) for t in needed) + 1  # doubling and bisecting, then one try each kept


def test_the_search_says_so_when_even_every_layer_fails():
    found, log = run({"t0", "nowhere"})
    assert found is None and len(log[-1]) == len(LAYERS) - 1  # every layer float is the float model: never tried


@pytest.mark.slow
def test_a_plan_leaves_the_wide_layers_activation_float_and_the_quantizer_reproduces_it():
    """quant_plan_ranges: the first layer's output spans 10,000x, the rest quantize well. The plan leaves the nodes
    that make and read that activation float, the other layers stay int8, and quant re-verifies it with the flag
    the plan prints."""
    spec = str(SPECS / "quant_plan_ranges.py")
    plan = fpdiff.plan(spec, precision="int8", backend="ort")
    assert plan.passed and plan.pure_error > plan.tolerance == 0.05 > plan.error, plan
    assert sorted(plan.kept) == ["node_linear", "node_linear_1"] and plan.evaluations <= 3, plan.trials
    assert all("relu" in k.why[0] for k in plan.keep)
    flag = plan.message.split("--backend-flag ", 1)[1].strip()
    backend, _, value = flag.partition("=")
    again = fpdiff.quant(spec, schemes=["int8"], backends=["ort"], backend_flags={backend: (value,)})
    (cell,) = again.cells
    assert cell.status == Status.PASS and abs(cell.metrics["rel_l2"] - plan.error) < 1e-9, cell.reason
    assert "nodes_to_exclude=2 nodes" in cell.info["quantized_by"]


@pytest.mark.slow
def test_a_plan_on_openvino_leaves_nodes_out_of_nncfs_ignored_scope_and_quant_reproduces_it():
    """NNCF's int8 costs 0.021 on quant_plan_ranges (its own range estimators), within the format's 0.05: at a
    tolerance of 0.01 the plan leaves the wide activation float through nncf.IgnoredScope."""
    pytest.importorskip("nncf", reason="NNCF is not installed (pip install 'fpdiff[openvino]')")
    spec = str(SPECS / "quant_plan_ranges.py")
    plan = fpdiff.plan(spec, precision="int8", backend="openvino", tolerance=0.01)
    assert plan.passed and plan.pure_error > 0.01 > plan.error, plan
    assert "nncf.IgnoredScope(names=" in plan.message and len(plan.keep) <= 3, plan.message
    value = plan.message.split("--backend-flag openvino=", 1)[1].strip()
    again = fpdiff.quant(spec, schemes=["int8"], backends=["openvino"], backend_flags={"openvino": (value,)})
    (cell,) = again.cells
    assert abs(cell.metrics["rel_l2"] - plan.error) < 1e-9 and "IgnoredScope(names=)" in cell.info["quantized_by"]


@pytest.mark.slow
def test_ort_takes_nodes_to_exclude_only_and_only_in_a_quantized_cell():
    spec = str(SPECS / "quant_plan_ranges.py")
    r = fpdiff.quant(spec, schemes=["int8"], backends=["ort"], backend_flags={"ort": ("nodes_to_exclude=nope",)})
    assert r.cells[0].status == Status.ERROR and "does not have: nope" in r.cells[0].reason
    r = fpdiff.quant(spec, schemes=["int8"], backends=["ort"], backend_flags={"ort": ("threads=2",)})
    assert "ort takes --backend-flag ort=nodes_to_exclude=NODE,NODE" in r.cells[0].reason
    c = fpdiff.check(spec, backends=["ort"], precisions=["fp32"], backend_flags={"ort": ("nodes_to_exclude=x",)})
    cell = next(x for x in c.cells if x.backend == "ort")
    assert cell.status == Status.ERROR and "not quantized" in cell.reason, cell.reason


def test_a_quantized_plan_refuses_what_it_cannot_do_yet_in_one_line():
    spec = str(SPECS / "quant_plan_ranges.py")
    with pytest.raises(UsageError, match="iree's is not driven that way here"):
        fpdiff.plan(spec, precision="int8", backend="iree")
    with pytest.raises(UsageError, match="takes no --export yet"):
        fpdiff.plan(spec, precision="int8", backend="ort", exports=["onnx=x.onnx"])
