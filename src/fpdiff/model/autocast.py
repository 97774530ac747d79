"""Autocast off torch's dispatcher: the mixed-precision graph an autocast cell deploys to ONNX Runtime, IREE or a
plugin. Ops torch's autocast runs in float32 stay float32, the rest compute at the low dtype (model/mixed.py,
onnxtools/mixed.py); inputs and outputs stay float32."""
from __future__ import annotations

import contextlib
import hashlib

import torch

# torch's autocast op lists, by base op name (overloads folded). Source: PyTorch 2.13,
# aten/src/ATen/autocast_mode.cpp (TORCH_LIBRARY_IMPL(aten, AutocastCPU, m): the CPU lists) and
# aten/src/ATen/autocast_mode.h (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE,
# AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE, AT_FORALL_PROMOTE: the CUDA lists, registered for AutocastCUDA with
# cudnn_convolution[_transpose] and the banned binary_cross_entropy). Also at
# https://pytorch.org/docs/stable/amp.html#autocast-op-reference. tests/model/test_autocast.py checks them against the
# kernels the installed torch registers for AutocastCPU / AutocastCUDA, so a torch upgrade that moves an op fails.
# Torch models do not read these lists: their graph is decided by torch's own dispatcher (torch_keep below); ONNX
# models (no dispatcher) and plan's prior read them.
LOW = {  # lower_precision_fp: computed at the autocast dtype
    "cpu": frozenset({
        "conv1d", "conv2d", "conv3d", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm", "_addmm_activation", "addbmm",
        "linear", "_convolution", "matmul", "conv_tbc", "mkldnn_rnn_layer", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "prelu", "scaled_dot_product_attention", "_native_multi_head_attention"}),
    "cuda": frozenset({
        "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv",
        "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
        "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
        "_scaled_dot_product_flash_attention", "scaled_dot_product_attention", "cudnn_convolution",
        "cudnn_convolution_transpose"}),
}
FP32 = {  # fp32, fp32_set_opt_dtype, fp32_append_dtype: computed in float32 whatever the input dtype
    "cpu": frozenset({
        "avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile", "nanquantile", "stft",
        "cdist", "grid_sampler_2d", "_grid_sampler_2d_cpu_fallback", "grid_sampler_3d", "trace", "view_as_complex",
        "cholesky", "cholesky_inverse", "cholesky_solve", "inverse", "lu_solve", "orgqr", "ormqr", "pinverse",
        "max_pool3d", "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d", "reflection_pad1d", "reflection_pad2d",
        "replication_pad1d", "replication_pad2d", "replication_pad3d", "mse_loss", "cosine_embedding_loss",
        "nll_loss", "nll_loss2d", "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy_loss",
        "l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss",
        "multi_margin_loss", "ctc_loss", "kl_div", "multilabel_margin_loss", "binary_cross_entropy_with_logits",
        "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_rfft", "fft_irfft",
        "fft_rfft2", "fft_irfft2", "fft_rfftn", "fft_irfftn", "fft_hfft", "fft_ihfft", "linalg_cond",
        "linalg_matrix_rank", "linalg_solve", "linalg_cholesky", "linalg_svdvals", "linalg_eigvals",
        "linalg_eigvalsh", "linalg_inv", "linalg_householder_product", "linalg_tensorinv", "linalg_tensorsolve",
        "fake_quantize_per_tensor_affine", "geqrf", "_lu_with_info", "qr", "svd", "triangular_solve",
        "fractional_max_pool2d", "fractional_max_pool3d", "adaptive_max_pool3d", "multilabel_margin_loss_forward",
        "linalg_qr", "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh", "linalg_lstsq",
        "linalg_inv_ex"}),
    "cuda": frozenset({
        "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
        "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm", "rms_norm", "group_norm",
        "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss",
        "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
        "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
        "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
        "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d", "_upsample_nearest_exact2d",
        "upsample_nearest3d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
        "_upsample_bilinear2d_aa", "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa",
        "prod", "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm", "linalg_matrix_norm", "sum",
        "norm"}),
}
PROMOTE = {  # computed in the widest input dtype
    "cpu": frozenset({"stack", "cat", "index_copy"}),
    "cuda": frozenset({"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler", "index_put",
                       "tensordot", "scatter_add"}),
}
BANNED = {"cpu": frozenset(), "cuda": frozenset({"binary_cross_entropy"})}  # autocast raises: unsafe in fp16

# ONNX op types by the torch op each stands for (the op torch.onnx exports to it, or the one torch runs it as): an
# ONNX node takes that op's policy on the cell's device. Ops named nowhere follow their inputs (see onnx_keep).
ONNX_AS_TORCH = {
    "MatMul": "matmul", "Gemm": "addmm", "Conv": "conv2d", "ConvTranspose": "conv_transpose2d", "PRelu": "prelu",
    "Einsum": "bmm",  # torch's einsum runs as bmm: CPU autocast lists bmm (not einsum), CUDA lists both
    "Attention": "scaled_dot_product_attention",
    "LSTM": "mkldnn_rnn_layer", "GRU": "mkldnn_rnn_layer", "RNN": "mkldnn_rnn_layer",  # what CPU runs nn.LSTM etc. as
    "InstanceNormalization": "group_norm",  # torch.onnx writes group_norm as InstanceNormalization + Mul + Add
    "Exp": "exp", "Log": "log", "Pow": "pow", "Reciprocal": "reciprocal", "Softplus": "softplus", "Acos": "acos",
    "Asin": "asin", "Cosh": "cosh", "Sinh": "sinh", "Tan": "tan",
    "LayerNormalization": "layer_norm", "GroupNormalization": "group_norm", "RMSNormalization": "rms_norm",
    "Softmax": "softmax", "LogSoftmax": "log_softmax", "ReduceSum": "sum", "ReduceSumSquare": "sum",
    "ReduceProd": "prod", "ReduceL1": "linalg_vector_norm", "ReduceL2": "linalg_vector_norm",
    "ReduceLogSumExp": "logsumexp", "ReduceLogSum": "log", "CumSum": "cumsum", "CumProd": "cumprod",
    "Resize": "upsample_bilinear2d",  # every upsample mode has one policy on each device
    "GridSample": "grid_sampler", "STFT": "stft", "DFT": "fft_fft", "MaxUnpool": "max_unpool2d",
    "NegativeLogLikelihoodLoss": "nll_loss", "SoftmaxCrossEntropyLoss": "nll_loss",  # log_softmax + nll_loss
    "Concat": "cat",
}


def device_type(device: str) -> str:
    """The autocast policy a device follows: CUDA's for cuda devices, CPU's otherwise."""
    return "cuda" if device.split(":")[0] == "cuda" else "cpu"


def policy(op: str, device: str) -> str | None:
    """'low', 'fp32', 'promote' for a listed torch op (base name), None for one autocast leaves to its inputs."""
    d = device_type(device)
    for name, table in (("low", LOW), ("fp32", FP32), ("promote", PROMOTE)):
        if op in table[d]:
            return name
    return None


def digest() -> str:
    """Part of the cache key of an autocast artifact: a changed list is another graph."""
    text = repr([sorted(t[d]) for t in (LOW, FP32, PROMOTE) for d in ("cpu", "cuda")] + sorted(ONNX_AS_TORCH.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def fp32_names() -> frozenset[str]:
    """Every op autocast runs in float32 on some device, torch names and the ONNX op types standing for them."""
    torch_names = FP32["cpu"] | FP32["cuda"]
    return torch_names | {o for o, t in ONNX_AS_TORCH.items() if t in torch_names}


# ---- torch models: torch's own dispatcher decides ----------------------------------------------------------------

@contextlib.contextmanager
def _autocast_on(dev: str, low: torch.dtype):
    """Autocast's dispatch keys on for `dev`. Not torch.autocast: it turns itself off for cuda on a machine without
    CUDA, while the dispatcher's CUDA policy applies to fake CUDA tensors anywhere."""
    saved = torch.is_autocast_enabled(dev), torch.get_autocast_dtype(dev), torch.is_autocast_cache_enabled()
    torch.set_autocast_enabled(dev, True)
    torch.set_autocast_dtype(dev, low)
    torch.set_autocast_cache_enabled(False)  # the cache keeps casts of real leaf tensors; nothing here is one
    try:
        yield
    finally:
        torch.set_autocast_enabled(dev, saved[0])
        torch.set_autocast_dtype(dev, saved[1])
        torch.set_autocast_cache_enabled(saved[2])


def _float_dtype(val) -> torch.dtype | None:
    """The dtype an op computed in, read from its (first float) output."""
    if isinstance(val, torch.Tensor):
        return val.dtype if val.is_floating_point() else None
    if isinstance(val, (tuple, list)):
        return next((d for d in map(_float_dtype, val) if d is not None), None)
    return None


def torch_keep(gm: torch.fx.GraphModule, inputs: tuple, device: str, low: torch.dtype) -> frozenset[str]:
    """The ops (mixed.units) torch's autocast computes in float32 on this device: the fp32 graph run under autocast
    on fake tensors, so torch's own lists, type promotion and composite ops decide, and nothing is computed."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from fpdiff.model import mixed
    dev = device_type(device)
    mode = FakeTensorMode(shape_env=ShapeEnv())  # a shape env, as export has: data-dependent shapes trace too
    fakes: dict[int, torch.Tensor] = {}

    def fake(t):
        """A real tensor's fake twin on the device, made once (weights are read by many ops)."""
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in fakes:
            # a CPU-only torch cannot move even a fake tensor to cuda, but can make one there (only dtypes matter)
            fakes[id(t)] = (mode.from_tensor(t) if t.device.type == dev else
                            torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=dev))
        return fakes[id(t)]

    dtypes: dict[str, torch.dtype | None] = {}

    class _Trace(torch.fx.Interpreter):
        def fetch_attr(self, target):  # weights and constants as fake tensors on the device
            return fake(super().fetch_attr(target))

        def call_function(self, target, args, kwargs):
            if target is torch.ops.aten._assert_tensor_metadata.default:
                return None  # the fp32 export's dtype (and device) asserts: autocast changes dtypes on purpose
            if dev != "cpu":  # the graph was exported on the CPU: its moves and factory calls name the CPU
                here = torch.device(dev)
                args, kwargs = torch.fx.node.map_aggregate((args, kwargs), lambda a: here if isinstance(
                    a, torch.device) else a)
                if getattr(target, "overloadpacket", None) is torch.ops.aten.to:
                    # only the dtype matters here; a CPU-only torch refuses aten.to onto cuda even for fakes
                    x, rest = args[0], list(args[1:]) + list(kwargs.values())
                    dt = next((a.dtype if isinstance(a, torch.Tensor) else a for a in rest
                               if isinstance(a, (torch.dtype, torch.Tensor))), x.dtype)
                    return x if dt == x.dtype else torch.ops.aten._to_copy.default(x, dtype=dt)
            return super().call_function(target, args, kwargs)

        def run_node(self, n):
            out = super().run_node(n)
            dtypes[n.name] = _float_dtype(out)
            return out

    with mode:
        args = [fake(t) for t in inputs]
    with mode, _autocast_on(dev, low), torch.no_grad():
        _Trace(gm).run(*args)
    # an op autocast leaves in another float dtype (float64) is not at `low` either: it keeps its float32 form
    return frozenset(n.name for n in mixed.units(gm) if dtypes.get(n.name) != low)


def mixed_program(module: torch.nn.Module, inputs: tuple, low: torch.dtype, device: str, dynamic_shapes=None):
    """The model as torch.export of its autocast graph: float32 in and out, ops at `low` where autocast puts them."""
    from fpdiff.model import mixed
    from fpdiff.model.mixed import fp32_module
    args = tuple(t.float() if t.is_floating_point() else t for t in inputs)
    gm = fp32_module(module, args, dynamic_shapes)
    keep = torch_keep(gm, args, device, low)
    return torch.export.export(mixed.apply(gm, keep, low), args, dynamic_shapes=dynamic_shapes, strict=False)


# ---- ONNX models: the lists above, mapped to op types ------------------------------------------------------------

def _torch_op(node) -> str | None:
    """The torch op an ONNX node stands for under autocast (pools and pads by their attributes)."""
    attrs = {a.name: a for a in node.attribute}
    if node.op_type in ("MaxPool", "AveragePool"):
        # only the 3-D forms are on a list (CPU); kernel_shape is required by both ops' schemas
        if "kernel_shape" in attrs and len(attrs["kernel_shape"].ints) == 3:
            return "max_pool3d" if node.op_type == "MaxPool" else "avg_pool3d"
        return None
    if node.op_type == "Pad":
        mode = attrs["mode"].s.decode() if "mode" in attrs else "constant"
        return {"reflect": "reflection_pad2d", "edge": "replication_pad2d"}.get(mode)
    return ONNX_AS_TORCH.get(node.op_type)


def _elem_type(tp) -> int:
    """A tensor's element type, or that of a sequence's tensors (SplitToSequence carries q, k, v in one)."""
    if tp.HasField("sequence_type"):
        tp = tp.sequence_type.elem_type
    return tp.tensor_type.elem_type if tp.HasField("tensor_type") else 0


def onnx_keep(model, device: str) -> list[str]:
    """Nodes of a float32 ONNX graph (named, as onnxtools.mixed.named makes them) that autocast's policy for this device
    computes in float32: listed fp32 ops; listed low ops never; others in float32 when a float32 value that is not a
    stored constant reaches them (torch's promotion: float32 wins), at the low dtype when only low values do."""
    import onnx

    from fpdiff.onnxtools.export import FLOATS
    from fpdiff.onnxtools.mixed import STANDARD, is_float_constant
    m = onnx.shape_inference.infer_shapes(model)
    elem = {vi.name: _elem_type(vi.type) for vi in list(m.graph.value_info) + list(m.graph.input)
            + list(m.graph.output)}
    elem.update({t.name: t.data_type for t in m.graph.initializer})
    inits = {t.name for t in m.graph.initializer}
    # Each float value's state: "fp32", "low", or "flex" for weights and constants and values made only from them.
    # flex values do not vote: torch.onnx splits a linear into MatMul + Add(bias), and the bias Add must stay with its
    # MatMul as the bias stays inside torch's linear.
    state = {i.name: "fp32" for i in m.graph.input if i.name not in inits and elem.get(i.name) in FLOATS}
    decided: dict[str, str] = {}
    for node in m.graph.node:
        if is_float_constant(node):
            state.update({o: "flex" for o in node.output})
            continue
        if node.domain not in STANDARD or any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute):
            d = "fp32"  # to_mixed leaves these in the model's own types
        elif node.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT for a in node.attribute):
            d = "fp32"  # an explicit .float() in the model: autocast leaves explicit casts alone
        else:
            rule = policy(_torch_op(node) or "", device)
            votes = {state.get(i) for i in node.input if i and elem.get(i) in FLOATS}
            if rule == "low":
                d = "low"
            elif rule == "fp32" or "fp32" in votes:
                d = "fp32"
            else:
                d = "low" if "low" in votes else "flex"
        state.update({o: d for o in node.output if o})
        decided[node.name] = d
    # A flex node (a weight transposed or reshaped) computes in what its readers do when they all agree on the low
    # dtype, so the weight is stored rounded once, as autocast's cast of a weight; float32 otherwise, as a float32
    # parameter is in torch. Readers come later in the graph, so one pass from the end settles chains.
    readers: dict[str, list[str]] = {}
    for node in m.graph.node:
        for i in node.input:
            readers.setdefault(i, []).append(node.name)
    outputs = {o.name for o in m.graph.output}
    for node in reversed(m.graph.node):
        if decided.get(node.name) == "flex":
            users = [u for o in node.output if o for u in readers.get(o, [])]
            low = users and not outputs & set(node.output) and all(decided.get(u) == "low" for u in users)
            decided[node.name] = "low" if low else "fp32"
    # a node with subgraphs is kept whatever its own inputs and outputs are: to_mixed computes an unkept one's
    # subgraphs in the low dtype, and autocast leaves control flow in the model's own types
    floats = {n.name for n in m.graph.node if any(elem.get(v) in FLOATS for v in [*n.input, *n.output] if v)
              or any(a.type in (a.GRAPH, a.GRAPHS) for a in n.attribute)}
    return [n.name for n in m.graph.node if decided.get(n.name) == "fp32" and n.name in floats]


def mixed_onnx(model, low: torch.dtype, device: str):
    """A float32 ONNX graph computing at `low` except where autocast's policy for this device says float32."""
    from onnx import TensorProto

    from fpdiff.onnxtools.mixed import named, to_mixed
    m = named(model)
    target = {torch.float16: TensorProto.FLOAT16, torch.bfloat16: TensorProto.BFLOAT16}[low]
    return to_mixed(m, target, onnx_keep(m, device))
