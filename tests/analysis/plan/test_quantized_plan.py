"""A quantized format's plan: the layers ONNX Runtime's quantizer leaves float (nodes_to_exclude) so the quantized
model meets the tolerance against float64, searched in the order quant's per-layer readings give and verified by the
quantizer and runtime themselves at every step; the search alone against a pure function of its keep-set."""
import pytest

import fpdiff
from conftest import SPECS
from fpdiff.analysis.plan.quantized import Layer, _touching, search
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


def test_the_screen_leaves_float_every_quantized_activation_a_node_reads_or_makes():
    """x -Q-DQ-> MatMul -Q-DQ-> Relu -> y: the MatMul reads x's and makes h's quantized value; the Relu reads h's and
    makes a float output; the quantizers themselves touch nothing."""
    from onnx import TensorProto, helper
    scale, zero = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]), helper.make_tensor("z", TensorProto.UINT8,
                                                                                             [], [128])
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dqx"),
             helper.make_node("MatMul", ["xd", "w"], ["h"], name="mm"),
             helper.make_node("QuantizeLinear", ["h", "s", "z"], ["hq"], name="qh"),
             helper.make_node("DequantizeLinear", ["hq", "s", "z"], ["hd"], name="dqh"),
             helper.make_node("Relu", ["hd"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [scale, zero])
    touching = _touching(g)
    assert touching["mm"] == {"x", "h"} and touching["relu"] == {"h"}
    assert "qx" not in touching and "dqh" not in touching


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
    # screened on the emulation, then verified: the pure cell and one trial on the backend
    assert sorted(plan.kept) == ["node_linear", "node_linear_1"] and plan.evaluations == 2, plan.trials
    assert plan.screened >= 1 and "screened on the exact emulation" in plan.analyses[0]
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
    with pytest.raises(UsageError, match="coreml's is not driven that way here"):
        fpdiff.plan(spec, precision="int8", backend="coreml")
    with pytest.raises(UsageError, match="no float graph to rank its weights"):
        fpdiff.plan(spec, precision="int8-dynamic", backend="executorch")
    with pytest.raises(UsageError, match="on ort exports onnx .* not coreml"):
        fpdiff.plan(spec, precision="int8", backend="ort", exports=["coreml=x.mlpackage"])
    with pytest.raises(UsageError, match="the file is a .onnx"):
        fpdiff.plan(spec, precision="int8", backend="ort", exports=["onnx=x.tflite"])


@pytest.mark.slow
@pytest.mark.parametrize("backup", ["float", "int8"])
def test_a_weight_only_plan_finds_the_outlier_layer_and_quant_reproduces_it(backup):
    """quant_plan_weights: one MatMul's int4 blocks hold a weight of 24 standard deviations. The plan ranks its
    weight first (what it alone costs, in float64) and leaves it float, or quantizes it at 8 bits with ORT's second
    MatMulNBits pass; quant re-verifies either with the flag the plan prints."""
    spec = str(SPECS / "quant_plan_weights.py")
    plan = fpdiff.plan(spec, precision="int4-weight", backend="ort", tolerance=0.25, backup=backup)
    assert plan.passed and plan.pure_error > 0.25 > plan.error and plan.evaluations == 2, plan.trials
    assert plan.kept == {"node_linear_1"} and "costs 0.3" in plan.keep[0].why[0], plan.keep
    option = "nodes_to_exclude" if backup == "float" else "nodes_at_8_bits"
    value = plan.message.split("--backend-flag ort=", 1)[1].strip()
    assert value == f"{option}=node_linear_1" and plan.backup == backup
    again = fpdiff.quant(spec, schemes=["int4-weight"], backends=["ort"], backend_flags={"ort": (value,)})
    (cell,) = again.cells
    assert abs(cell.metrics["rel_l2"] - plan.error) < 1e-9 and f"{option}=1 node" in cell.info["quantized_by"]


@pytest.mark.slow
def test_a_weight_only_plan_on_openvino_leaves_the_layer_out_of_nncfs_compression():
    pytest.importorskip("nncf", reason="NNCF is not installed (pip install 'fpdiff[openvino]')")
    plan = fpdiff.plan(str(SPECS / "quant_plan_weights.py"), precision="int4-weight", backend="openvino",
                       tolerance=0.25)
    assert plan.passed and plan.kept == {"node_linear_1"} and "nncf.compress_weights(" in plan.message, plan


@pytest.mark.slow
def test_a_dynamic_plan_names_a_gemm_as_quantize_dynamic_renames_it():
    """tinyformer's linear layers are Gemms in ORT's pre-processed graph; quantize_dynamic reads nodes_to_exclude
    after renaming each to G_MatMul, so the plan names them so (a Gemm's own name would leave nothing float)."""
    plan = fpdiff.plan("example:tinyformer", precision="int8-dynamic", backend="ort", tolerance=0.002)
    assert plan.passed and plan.error < 0.002 < plan.pure_error, plan.trials
    assert plan.keep and all(k.node.endswith("_MatMul") for k in plan.keep) and "quantize_dynamic(" in plan.message


def test_a_backup_the_backend_does_not_mix_is_refused_in_one_line():
    spec = str(SPECS / "quant_plan_weights.py")
    with pytest.raises(UsageError, match="not driven to mix int4-weight with int8"):
        fpdiff.plan(spec, precision="int4-weight", backend="openvino", backup="int8")
    with pytest.raises(UsageError, match="not driven to mix int8 with int8"):
        fpdiff.plan(spec, precision="int8", backend="ort", backup="int8")
    with pytest.raises(UsageError, match="--backup int8 is for a quantized format"):
        fpdiff.plan(spec, precision="fp16", backend="ort", backup="int8")
    with pytest.raises(UsageError, match="NNCF does not make int8-dynamic"):
        fpdiff.plan(spec, precision="int8-dynamic", backend="openvino")


@pytest.mark.slow
def test_a_quantized_plan_exports_the_file_its_quantizer_made_and_a_saved_plan_reverifies(tmp_path):
    """The export is the quantized .onnx the plan's last trial ran, the quantizer's settings beside it, judged again
    as the user's file; the saved plan, loaded, hands its nodes to the quantizer again in one evaluation."""
    import json
    spec = str(SPECS / "quant_plan_weights.py")
    out, saved = tmp_path / "model.onnx", tmp_path / "plan.json"
    plan = fpdiff.plan(spec, precision="int4-weight", backend="ort", tolerance=0.25, backup="int8",
                       exports={"onnx": str(out)}, save=str(saved))
    (e,) = plan.exports
    assert e.written and e.verified and abs(e.error - plan.error) < 1e-9, e
    settings = json.loads(out.with_suffix(".quantizer.json").read_text())
    assert settings["flag"] == "nodes_at_8_bits=node_linear_1" and "bits=8" in settings["apply"]
    again = fpdiff.plan(spec, precision="int4-weight", backend="ort", tolerance=0.25, backup="int8",
                        load=str(saved))
    assert again.passed and again.evaluations == 1 and again.kept == plan.kept
    assert abs(again.error - plan.error) < 1e-9
    with pytest.raises(UsageError, match="the saved plan is for int4-weight on ort with --backup int8"):
        fpdiff.plan(spec, precision="int4-weight", backend="ort", tolerance=0.25, load=str(saved))


@pytest.mark.slow
def test_a_plan_on_iree_hands_nodes_to_exclude_to_the_quantizer_whose_graph_it_compiles():
    pytest.importorskip("iree.compiler", reason="IREE is not installed (pip install 'fpdiff[iree]')")
    spec = str(SPECS / "quant_plan_ranges.py")
    plan = fpdiff.plan(spec, precision="int8", backend="iree")
    assert plan.passed and sorted(plan.kept) == ["node_linear", "node_linear_1"], plan.trials
    value = plan.message.split("--backend-flag iree=", 1)[1].strip()
    again = fpdiff.quant(spec, schemes=["int8"], backends=["iree"], backend_flags={"iree": (value,)})
    (cell,) = again.cells
    assert abs(cell.metrics["rel_l2"] - plan.error) < 1e-9 and "nodes_to_exclude=2 nodes" in cell.info["quantized_by"]
    c = fpdiff.check(spec, backends=["iree"], precisions=["fp32"], backend_flags={"iree": ("nodes_to_exclude=x",)})
    cell = next(x for x in c.cells if x.backend == "iree")
    assert cell.status == Status.ERROR and "not quantized" in cell.reason, cell.reason


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["executorch", "inductor"])
def test_a_pt2e_plan_leaves_modules_float_through_the_quantizers_filter_and_quant_reproduces_it(backend):
    """PT2E quantizers leave float by module: the plan's layers are the modules the ranked activations' nodes came
    from (a functional ReLU by the module that feeds it), handed to XNNPACKQuantizer's filter function or
    X86InductorQuantizer's set_module_name_qconfig(name, None); quant re-verifies with the printed flag."""
    pytest.importorskip("executorch" if backend == "executorch" else "torchao")
    spec = str(SPECS / "quant_plan_ranges.py")
    plan = fpdiff.plan(spec, precision="int8", backend=backend)
    assert plan.passed and plan.error < 0.05 < plan.pure_error, plan.trials
    assert all(k.op == "module" for k in plan.keep) and plan.kept <= {"fc1", "fc2", "fc3", "fc4"}, plan.keep
    assert len(plan.kept) < 4 and plan.evaluations <= 6
    value = plan.message.split(f"--backend-flag {backend}=", 1)[1].strip()
    again = fpdiff.quant(spec, schemes=["int8"], backends=[backend], backend_flags={backend: (value,)})
    (cell,) = again.cells
    assert abs(cell.metrics["rel_l2"] - plan.error) < 1e-9 and "float (fc" in cell.info["quantized_by"], cell.info
    bad = fpdiff.quant(spec, schemes=["int8"], backends=[backend], backend_flags={backend: ("float_modules=nope",)})
    assert bad.cells[0].status == Status.ERROR and "has no op in: nope" in bad.cells[0].reason


def test_at_a_backup_format_every_layer_may_be_taken():
    keep, trial = search(LAYERS, lambda keep: Trial([x.tensor for x in keep], 0.0, len(keep) == 20), whole=True)
    assert len(keep) == 20 and trial.passed
    assert search(LAYERS, lambda keep: Trial([x.tensor for x in keep], 1.0, len(keep) == 20)) is None
