"""Model Explorer node data from locate: loads with the package's own classes, keyed to the exported graph's nodes."""
import json

import pytest
import torch

from fpdiff.cli import main
from fpdiff.sources import load

me = pytest.importorskip("model_explorer.node_data_builder", reason="ai-edge-model-explorer is not installed")
dacite = pytest.importorskip("dacite")
pytestmark = pytest.mark.slow  # runs locate on torch: make test, not make test-fast


def test_locate_writes_node_data_model_explorer_reads(tmp_path):
    out = tmp_path / "rms.json"
    assert main(["locate", "example:rmsnorm", "--precision", "fp16", "--no-repro", "--model-explorer", str(out)]) == 0
    local = dacite.from_dict(me.GraphNodeData, json.loads(out.read_text()))
    acc = dacite.from_dict(me.GraphNodeData, json.loads((tmp_path / "rms.accumulated.json").read_text()))
    assert isinstance(local.results["mul"], me.NodeDataResult) and local.thresholds[0].bgColor
    # the culprit (x*x overflows in fp16) is red in the local file: over the culprit factor of its floor
    red = local.thresholds[-1].bgColor
    first_over = next(t for t in local.thresholds if local.results["mul"].value <= t.value)
    assert first_over.bgColor == red and local.results["linear"].value <= 1.0
    assert set(acc.results) == set(local.results)
    # keys are the node names of the model exported as fpdiff exports it, so they land on the user's graph
    src = load("example:rmsnorm")
    names = {n.name for n in torch.export.export(src.module, src.inputs, strict=False).graph.nodes}
    assert set(local.results) <= names
    me.ModelNodeData(graphsData={"main": local}).to_json_string()  # and the package serializes it again
