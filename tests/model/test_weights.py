"""Weights written once and mapped (model/weights.py): the same numbers as the whole-model copies they replace."""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.model import graph, weights
from fpdiff.model.float64 import float64_everywhere
from fpdiff.sources import load

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "bench" / "specs" / "corpus"
TRANSFORMERS = pytest.importorskip("transformers")


class Tied(torch.nn.Module):
    """A tied weight, a non-persistent buffer, and a plain attribute holding that buffer (transformers' rotary)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(11, 6)
        self.head = torch.nn.Linear(6, 11, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 6), persistent=False)
        self.original_scale = self.scale

    def forward(self, ids):
        return self.head(self.emb(ids) * self.scale)


def _mapped(t: torch.Tensor, path) -> bool:
    """The tensor's memory lies in a mapping of the file at `path` (/proc/self/maps)."""
    ptr = t.data_ptr()
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, *rest = line.split()
        lo, hi = (int(v, 16) for v in span.split("-"))
        if lo <= ptr < hi:
            return rest[-1] == str(path)
    return False


def test_share_maps_the_model_onto_one_file(tmp_path):
    torch.manual_seed(0)
    m = Tied().eval()
    ids = torch.tensor([[1, 2, 3, 10]])
    want = m(ids)
    path = weights.share(m, tmp_path)
    assert _mapped(m.emb.weight, path) and _mapped(m.scale, path)
    assert m.head.weight is m.emb.weight and m.original_scale is m.scale  # ties and attributes follow
    assert torch.equal(m(ids), want)
    assert weights.share(m, tmp_path) == path  # once per run: the same tensors are not written again


def test_skeleton_builds_on_meta_and_maps(tmp_path):
    torch.manual_seed(0)
    m = Tied().eval()
    ids = torch.tensor([[4, 5]])
    want = m(ids)
    state = weights.load(weights.share(m, tmp_path))
    built = weights.skeleton(Tied, state)
    assert all(t.device.type == "cpu" for _, t in weights.named_tensors(built))
    assert built.head.weight is built.emb.weight and built.original_scale is built.scale
    assert torch.equal(built.eval()(ids), want)


def test_skeleton_takes_a_state_dict_without_non_persistent_buffers():
    """Inline weights (a state_dict) lack non-persistent buffers: the real build supplies them."""
    torch.manual_seed(0)
    m = Tied().eval()
    built = weights.skeleton(Tied, m.state_dict())
    assert torch.equal(built.eval()(torch.tensor([[3]])), m(torch.tensor([[3]])))


def test_skeleton_refuses_a_file_missing_a_weight(tmp_path):
    state = dict(weights.load(weights.share(Tied(), tmp_path)))
    state.pop("head.weight")
    state.pop("emb.weight")
    with pytest.raises(ValueError, match="lacks"):
        weights.skeleton(Tied, state)


def test_cast_copy_shares_same_dtype_weights_and_copies_buffers():
    m = Tied()
    same = weights.cast_copy(m, torch.float32)
    assert same.emb.weight.data_ptr() == m.emb.weight.data_ptr()
    assert same.scale.data_ptr() != m.scale.data_ptr()  # a forward may write a buffer
    half = weights.cast_copy(m, torch.float16)
    assert half.emb.weight.dtype == torch.float16 and half.head.weight is half.emb.weight
    assert m.emb.weight.dtype == torch.float32


@pytest.mark.parametrize("spec", ["llama", "gemma2", "t5", "mixtral"])
def test_lazy_cast_is_the_whole_cast_bit_for_bit(spec):
    """The float64 judge and an fp16 run with weights cast per op equal the whole-model casts, on real
    architectures (rotary buffers, tied heads, soft-capping, relative attention, MoE routing)."""
    src = load(str(CORPUS / f"{spec}.py"))
    m, x = src.module, src.inputs
    for dtype in (torch.float64, torch.float16):
        xs = tuple(t.to(dtype) if t.is_floating_point() else t for t in x)
        whole, lazy = copy.deepcopy(m).to(dtype), weights.cast_copy(m, dtype, lazy=True)
        assert any(isinstance(t, weights.LazyCast) for _, t in weights.named_tensors(lazy))
        with torch.no_grad(), float64_everywhere(promote=dtype == torch.float64):
            a, b = whole(*xs), lazy(*xs)
        for u, v in zip(torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)):
            assert u.dtype == v.dtype and torch.equal(u, v)


@pytest.mark.parametrize("spec", ["llama", "t5", "swin", "whisper"])
def test_lazy_export_traces_fake_weights_and_equals_the_cast_copy(spec):
    """The program exported from fake weights (no cast copy) is the cast copy's program, node for node, and with
    the model's own weights cast per op it computes the same outputs bit for bit (rotary buffers, relative
    attention bias, windowed attention, an encoder-decoder)."""
    src = load(str(CORPUS / f"{spec}.py"))
    p = prec.get("fp16")
    fake, origin = weights.fake_copy(src.module, p.dtype)
    assert origin and all(t.dtype == torch.float32 for t in origin.values())
    real = graph.export(src.module, src.inputs, p, graph.STATIC, None)
    lazy = graph.export(src.module, src.inputs, p, graph.STATIC, None, lazy=True)
    assert str(lazy.graph) == str(real.graph)
    held = [*lazy.state_dict.values(), *lazy.constants.values()]
    assert any(isinstance(t, weights.LazyCast) for t in held)
    assert not any(isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype == torch.float16
                   and not isinstance(t, weights.LazyCast) for t in held)  # no cast copy of any weight
    x = graph.cast_inputs(src.inputs, p)
    with torch.no_grad():
        a, b = real.module()(*x), lazy.module()(*x)
    for u, v in zip(torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)):
        assert torch.equal(u, v)


def test_lazy_program_says_when_a_fake_weight_is_left():
    """A fake weight nothing stands for would fail at the first run: lazy_program says so, and graph.export then
    exports the cast copy instead."""
    m, x, p = Tied().eval(), (torch.tensor([[1, 2, 3]]),), prec.get("fp16")
    fake, origin = weights.fake_copy(m, p.dtype)
    program = torch.export.export(fake, x, strict=False)
    assert not weights.lazy_program(program, {})
    assert weights.lazy_program(program, origin)
    lazy = graph.export(m, x, p, graph.STATIC, None, lazy=True)
    with torch.no_grad():
        assert torch.equal(lazy.module()(*x), copy.deepcopy(m).half()(*x))


def test_lazy_cast_stays_lazy_through_a_transpose():
    """linear transposes its weight before the matmul: with `views`, the view stays a wrapper (what autograd saves for
    a backward is then no float64 copy), and the matmul sees the cast copy's transposed view, values and strides."""
    torch.manual_seed(0)
    w, x = torch.randn(5, 3), torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    lazy = weights.LazyCast(w, torch.float64, views=True)
    assert not isinstance(weights.LazyCast(w, torch.float64).t(), weights.LazyCast)  # views: only when asked
    assert isinstance(lazy.t(), weights.LazyCast) and lazy.t().stride() == w.double().t().stride()
    y = torch.nn.functional.linear(x, lazy)
    assert torch.equal(y, torch.nn.functional.linear(x, w.double()))
    y.sum().backward()
    assert torch.equal(x.grad, w.double().sum(0).expand(4, 3))


def test_lazy_cast_keeps_a_write():
    buf = weights.LazyCast(torch.zeros(3), torch.float64)
    buf.add_(1.0)
    assert buf.inner.dtype == torch.float64 and torch.equal(buf.inner, torch.ones(3, dtype=torch.float64))


def test_a_model_too_big_is_refused_before_it_is_built(tmp_path):
    spec = tmp_path / "huge.py"
    spec.write_text("import torch\ndef model():\n    return torch.nn.Linear(200000, 200000)\n"
                    "def inputs():\n    return (torch.randn(1, 200000),)\n")
    out = subprocess.run([sys.executable, "-m", "fpdiff", "check", str(spec)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert "cannot fit in memory even streamed" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_estimate_counts_weights_once_and_the_largest_at_float64():
    with torch.device("meta"):
        m = Tied()
    n = 11 * 6 + 6  # the tied weight once, the buffer
    assert weights.estimated_peak(m) == 4 * n + 8 * 66 + 2 * weights.PROCESS_BYTES
    with pytest.raises(UsageError):
        with torch.device("meta"):
            weights.refuse_unfit(torch.nn.Linear(1 << 20, 1 << 20), "a model")


GB = 1 << 30
MEMINFO_24GB = """MemTotal:       24684084 kB
MemFree:          913232 kB
MemAvailable:     838860 kB
AnonPages:      22020096 kB
Shmem:              8872 kB
HugePages_Total:       0
"""


def _readings(*available_gb: float, anon_gb: float = 20, total_gb: float = 24):
    """A meminfo reader returning these MemAvailable readings in turn (the last one from then on)."""
    left = list(available_gb)

    def read() -> dict[str, int]:
        have = left.pop(0) if len(left) > 1 else left[0]
        return {"MemTotal": int(total_gb * GB), "MemAvailable": int(have * GB), "AnonPages": int(anon_gb * GB)}
    return read


def _model_of(gb: float) -> torch.nn.Module:
    """A meta-device model whose estimated peak is about `gb` GB."""
    n = int((gb * GB - 2 * weights.PROCESS_BYTES) / 12)
    with torch.device("meta"):
        return torch.nn.Linear(n, 1, bias=False)


def test_meminfo_reads_the_kernels_counters_in_bytes(tmp_path):
    f = tmp_path / "meminfo"
    f.write_text(MEMINFO_24GB)
    info = weights.meminfo(f)
    assert info["MemTotal"] == 24684084 * 1024 and info["AnonPages"] == 22020096 * 1024
    assert info["HugePages_Total"] == 0  # a count, not kB
    assert weights.meminfo(tmp_path / "absent") is None


def test_a_model_beyond_what_the_machine_can_free_is_refused(capsys):
    """Available now plus what other processes hold privately is all a run could ever get: beyond it, refused."""
    with pytest.raises(UsageError, match="cannot fit in memory even streamed") as e:
        weights.refuse_unfit(_model_of(30), "a model", read=_readings(2, anon_gb=20), pause_s=0)
    assert "can free 22.0 GB of its 24.0 GB" in str(e.value)
    assert capsys.readouterr().err == ""


def test_memory_another_process_holds_for_now_is_read_again_then_a_warning_not_a_refusal(capsys):
    """A 0.8 GB model on a 24 GB machine while another process holds all but 0.5 GB: read again, still short,
    the run goes on with one line on stderr (before, a UsageError)."""
    reads = []
    read = _readings(0.5)
    weights.refuse_unfit(_model_of(0.8), "the model of m.py", read=lambda: reads.append(1) or read(), pause_s=0)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("fpdiff: warning: the model of m.py needs about 0.8")
    assert len(reads) == 1 + weights.REREADS


def test_memory_freed_while_read_again_goes_on_silently(capsys):
    weights.refuse_unfit(_model_of(0.8), "a model", read=_readings(0.5, 0.5, 6), pause_s=0)
    assert capsys.readouterr().err == ""


def test_a_model_that_fits_is_read_once_and_says_nothing(capsys):
    reads = []
    read = _readings(6)
    weights.refuse_unfit(_model_of(0.8), "a model", read=lambda: reads.append(1) or read(), pause_s=0)
    assert capsys.readouterr().err == "" and len(reads) == 1
    weights.refuse_unfit(_model_of(0.8), "a model", read=lambda: None, pause_s=0)  # no meminfo: nothing to say
    assert capsys.readouterr().err == ""
