"""torch.compile with the inductor backend; dynamic dims follow the shape variant via mark_dynamic."""
from __future__ import annotations

from typing import Any

import torch

from fpdiff.backends.base import TORCH_INPUTS, Backend, Prepared, Repro, Task
from fpdiff.backends.torch_eager import computed_dtype, device_runner
from fpdiff.core.errors import Unsupported
from fpdiff.model.graph import to_device


class InductorBackend(Backend):
    name = "inductor"
    takes_flags = True  # float_modules=MODULE,MODULE: a quantized cell's modules X86InductorQuantizer leaves float

    def prepare_task(self, task: Task) -> Prepared:
        _flags(task)  # refused here in one line
        if not task.is_torch:
            raise Unsupported("torch.compile runs torch models; this model is ONNX")
        torch._dynamo.reset()  # no guards or graphs carried over from another cell
        module = to_device(task.module(), task.device)
        if task.precision.autocast is not None:
            # autocast inside the compiled region: traced into the graph, so the graph itself differs per
            # autocast dtype (entered outside, a graph compiled under amp-fp16 was seen reused for amp-bf16)
            module = _Autocast(module, task.device.split(":")[0], task.precision.autocast)
        dims = task.dynamic_dims()
        compiled = torch.compile(module, backend="inductor", dynamic=False if not any(dims) else None)

        def call(*inputs: torch.Tensor) -> Any:
            for t, ds in zip(inputs, dims):
                for d in ds:
                    torch._dynamo.mark_dynamic(t, d)
            return compiled(*inputs)

        run = device_runner(call, task.precision, task.device, autocast=False)
        run(*task.inputs())  # compile now, so a compile failure is `unsupported` and run time excludes it
        return Prepared(run, computed_dtype(task.precision), release=torch._dynamo.reset)

    def prepare_quantized(self, task: Task) -> Prepared:
        """The cell's fp32 program quantized as torch's users quantize for inductor on a CPU (PT2E with torchao's
        X86InductorQuantizer), compiled with freezing on (the setting under which inductor fuses the quantized
        patterns into oneDNN's integer kernels); what it fused is read from inductor's own pattern counters."""
        scheme = task.precision.name
        if scheme not in X86_QUANTIZERS:
            raise Unsupported(f"fpdiff quantizes for inductor with torchao's X86InductorQuantizer, which has no "
                              f"{scheme}: it quantizes {' and '.join(X86_QUANTIZERS)}", dtype=scheme)
        if not task.is_torch or task.given:
            raise Unsupported("torch.compile runs torch models; a quantized file is not one", dtype=scheme)
        from torch._dynamo.utils import counters

        from fpdiff.core import precision as prec
        from fpdiff.core.errors import COMPILE, stage
        from fpdiff.model import pt2e
        fp32 = task.at(prec.FP32)
        modules = _flags(task)
        program = self.export(fp32)
        pt2e.known_modules(program, modules, "inductor")
        program = pt2e.quantize(program, x86_quantizer(scheme, modules), task.calibration(), tuple(fp32.inputs()))
        key = task.key("inductor-x86-qdq", "modules-v1", scheme, task.calibration_digest())
        graph, _ = task.cache.get_or_build(*key, suffix=".onnx", build=lambda out: pt2e.qdq_graph(program, out))
        torch._dynamo.reset()
        counters.clear()
        module = program.module()
        with stage(COMPILE, "torch.compile (inductor, freezing)"), torch.no_grad(), \
                torch._inductor.config.patch(freezing=True):
            compiled = torch.compile(module, backend="inductor", dynamic=False)
            compiled(*fp32.inputs())  # compile now: a compile failure is the compiler's, and run time excludes it
        from fpdiff.backends.executorch import modules_said
        tool = f"torchao PT2E with X86InductorQuantizer({X86_QUANTIZERS[scheme]})" + modules_said(
            modules, "set_module_name_qconfig(name, None)")
        from fpdiff.onnxtools.quantize import float_graph
        record = {"graph": str(graph), "tool": tool, "component": "torchao's X86InductorQuantizer (PT2E)",
                  **fused(counters["inductor"], program), **float_graph(task, pre=False)}  # as ExecuTorch's

        def run(*inputs: torch.Tensor) -> Any:
            with torch.no_grad():
                return compiled(*inputs)
        return Prepared(run, info={"quantized_by": tool, "scheme": X86_SCHEMES[scheme],
                                   "run_by": "torch.compile, inductor with freezing (oneDNN)"},
                        release=torch._dynamo.reset, quantized=record)

    def repro(self, r: Repro) -> str | None:
        if r.onnx_segment:
            return None
        return TORCH_INPUTS + """with torch.no_grad():
    outs = torch.compile(program.module())(*xt)
"""


# The formats torch's users make for inductor on a CPU, asked of torchao's X86InductorQuantizer
# (get_default_x86_inductor_quantization_config): int8 weights per channel symmetric, uint8 activations per tensor
# asymmetric, calibrated by PT2E's observers (static), or measured at run time (dynamic, linear layers only).
X86_QUANTIZERS = {"int8": "", "int8-dynamic": "is_dynamic=True"}
X86_SCHEMES = {
    "int8": "weights int8 per-channel symmetric, activations uint8 per-tensor (calibrated) asymmetric, rounding half "
            "to even, calibration minmax on the calibration inputs (PT2E observers)",
    "int8-dynamic": "weights int8 per-channel symmetric, activations uint8 per-tensor at run time asymmetric (linear "
                    "layers), rounding half to even, calibration none (ranges measured at run time)",
}


def x86_quantizer(scheme: str, float_modules: tuple[str, ...] = ()) -> Any:
    """torchao's X86InductorQuantizer set for a format, as its documentation sets it; `float_modules` left float by
    its module filter (set_module_name_qconfig(name, None))."""
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )
    config = get_default_x86_inductor_quantization_config(is_dynamic=scheme == "int8-dynamic")
    q = X86InductorQuantizer().set_global(config)
    for name in float_modules:
        q.set_module_name_qconfig(name, None)
    return q


def _flags(task: Task) -> tuple[str, ...]:
    """The modules the user's flags have X86InductorQuantizer leave float (its only flag); any other flag, or the
    filter in a cell that is not quantized, is one line."""
    from fpdiff.backends.base import quantizer_nodes
    return quantizer_nodes(task.flags, "inductor", ("float_modules",), task.precision)["float_modules"]


def fused(counts: Any, program: Any) -> dict[str, Any]:
    """What inductor ran in oneDNN's integer kernels (its weight-prepack pattern counters: each a quantized conv or
    linear it fused) and the program's compute ops beyond those, which ran in float on dequantized values."""
    from fpdiff.backends.torch_ops import integer_placement
    ints = {name: int(counts.get(f"q{name}_weight_prepack_matcher_count", 0)) for name in ("conv", "linear")}
    declared = integer_placement([("program", program.graph)])
    total = sum(declared["integer_ops"].values()) + declared["float_ops"]
    left = max(total - sum(ints.values()), 0)
    return {"integer_ops": {f"q{k} (oneDNN)": v for k, v in ints.items() if v}, "float_ops": left,
            "left_float": declared["left_float"] if left == declared["float_ops"] else
            [f"{left} of the program's {total} conv and linear ops ran in float"]}


class _Autocast(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module, device_type: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.inner, self.device_type, self.dtype = inner, device_type, dtype

    def forward(self, *args: Any) -> Any:
        with torch.autocast(device_type=self.device_type, dtype=self.dtype):
            return self.inner(*args)
