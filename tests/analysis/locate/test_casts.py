"""locate on models that cast inside (`.to(torch.float32)` as Llama's RMSNorm and rotary code do, a model's own
narrowing) and on one torch.export cannot trace: float64 and the precision step through one graph, the float64
run computing every float op in float64, and an export failure is one clean answer."""
import os

import pytest

import fpdiff
from conftest import SPECS
from fpdiff.cli import main

pytestmark = pytest.mark.slow  # exports and runs models


def tiny_llama():
    """A Llama decoder from a transformers config: RMSNorm and rotary embeddings with explicit float32 casts."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)
    torch.manual_seed(0)

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = transformers.LlamaModel(cfg)

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False, return_dict=False)[0]
    return Wrapped().eval(), (torch.randint(0, 64, (1, 8)),)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_explicit_float_norm_pairs_every_op(precision):
    """`.float()` of an fp32 tensor is the tensor itself in the fp32 export and a copy in the float64 one: two
    exports paired by node name crashed here (KeyError)."""
    r = fpdiff.locate(str(SPECS / "explicit_float.py"), precision=precision)
    assert [o.op for o in r.ops].count("aten.to.dtype") == 3
    assert r.culprit is None and 0 < r.eager_output_error < 10 * fpdiff.core.precision.get(precision).tolerance


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_llama_decoder_is_analysed(precision):
    from fpdiff.analysis.locate import analyse
    from fpdiff.core import precision as prec
    module, inputs = tiny_llama()
    ops, out_err = analyse(module, inputs, prec.get(precision))
    assert len(ops) > 50 and all(o.cause != "error" for o in ops)
    # the reference is float64 inside the rotary code's float32 island too: its fp32 run is not exact there
    rotary = [o for o in ops if o.stack.endswith("rotary_emb")]
    assert rotary and rotary[0].accumulated > 0
    assert 0 < out_err < prec.get(precision).tolerance


def test_the_models_own_narrowing_cast_is_the_culprit():
    """With the float64 run keeping the model's `.to(torch.bfloat16)` (as two exports did), the loss is part of
    the reference and nothing is blamed; widened, the cast is named at its source line."""
    r = fpdiff.locate(str(SPECS / "locate_own_cast.py"), precision="fp32")
    c = r.culprit
    assert c is not None and c.op == "aten.to.dtype" and c.cause == "cast"
    assert c.source.endswith("locate_own_cast.py:15")
    assert r.eager_output_error > 0.1


def test_an_export_failure_is_located_at_torch_export_in_one_line(capsys):
    r = fpdiff.locate(str(SPECS / "locate_dtype_branch.py"), backend="iree", precision="fp16")
    seg = r.segment
    assert seg.stage == "torch.export" and seg.status == "error"
    assert "locate_dtype_branch.py:15" in seg.reason and "isfinite" in seg.reason
    assert r.as_dict()["culprit"]["stage"] == "torch.export"
    code = main(["locate", str(SPECS / "locate_dtype_branch.py"), "--backend", "torch", "--precision", "fp16",
                 "--no-repro"])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err and "def forward" not in out + err
    assert "torch.export failed" in out
    # at fp32 the branch stops at the dtype test: the model exports and is analysed
    assert fpdiff.locate(str(SPECS / "locate_dtype_branch.py"), precision="fp32").ops
