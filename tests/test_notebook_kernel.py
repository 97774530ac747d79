"""fpdiff as a notebook user meets it: a real .ipynb executed in a Jupyter kernel, whose model class is defined in a
cell (so it lives in `__main__`, which no worker can import) and goes through check, locate, plan and ranges."""
from __future__ import annotations

import os
import sys

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat (pip install 'fpdiff[test]')")
nbclient = pytest.importorskip("nbclient", reason="the notebook test needs nbclient (pip install 'fpdiff[test]')")
pytest.importorskip("ipykernel", reason="the notebook test needs a Jupyter kernel: ipykernel ('fpdiff[test]')")

CELLS = [
    '''import torch
import fpdiff


class Scaled(torch.nn.Module):
    """Defined in this cell: its class lives in __main__."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.scaled = Scaled(4.0)
        self.act = lambda t: torch.tanh(t) * 2  # a lambda: plain pickle refuses it

    def forward(self, x):
        return torch.softmax(self.scaled(self.act(self.norm(self.proj(x)))), -1)


torch.manual_seed(0)
net, x = Net().eval(), torch.randn(4, 16)''',
    '''r = fpdiff.check(net, inputs=(x,), backends=["torch", "ort"], precisions=["fp32", "fp16"])
assert r.exit_code() == 0, [(c.backend, c.precision, c.status.value, c.reason) for c in r.cells]
assert {c.status.value for c in r.cells} <= {"pass", "precision-loss"}, r.cells
r''',
    '''loc = fpdiff.locate(net, inputs=(x,), backend="torch", precision="fp16")
print(type(loc).__name__, loc.exit_code())''',
    '''p = fpdiff.plan(net, inputs=(x,), precision="fp16", measure_speed=False)
print(type(p).__name__, p.exit_code())''',
    '''rg = fpdiff.ranges(net, inputs=(x,))
print(type(rg).__name__, rg.exit_code())''',
]


@pytest.mark.slow
def test_a_model_defined_in_a_notebook_cell_goes_through_every_analysis(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}})
    client.km = client.create_kernel_manager()
    client.km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]  # this Python
    client.execute(env=env)
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert html and "fpdiff check Net (a module held in Python: " in html[0]  # its report, titled by the class
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    for kind in ("Locate", "Plan", "Ranges"):
        assert kind in text, text
