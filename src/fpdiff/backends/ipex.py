"""Intel Extension for PyTorch on CPU: `ipex.optimize` over the eager module. It pins its own torch, so it runs in its
own interpreter (`make ipex-env`, then `--backend-python ipex=.venv-ipex/bin/python`)."""
from __future__ import annotations

import contextlib
from typing import Any

from fpdiff.backends.base import TORCH, Backend, Prepared, Task
from fpdiff.core.errors import COMPILE, Unsupported, stage
from fpdiff.core.precision import dtype_name


class IpexBackend(Backend):
    name = "ipex"
    kinds = frozenset({TORCH})
    shape_variants = False  # eager: it runs what it is given

    requires = ("intel_extension_for_pytorch",)
    install_hint = "it pins its own torch: `make ipex-env`, then --backend-python ipex=.venv-ipex/bin/python"

    def prepare_task(self, task: Task) -> Prepared:
        import intel_extension_for_pytorch as ipex
        import torch
        if not task.is_torch:
            raise Unsupported("IPEX runs torch models; this model is ONNX")
        if task.device != "cpu":
            raise Unsupported(f"fpdiff runs IPEX's CPU build; {task.device} is not cpu")
        p = task.precision
        module = task.module().eval()
        info = {"ipex": ipex.__version__, "torch": torch.__version__}
        low = p.autocast if p.autocast is not None else p.dtype
        if low == torch.float64:  # ipex.optimize takes fp32, bf16 and fp16; fp64 is this env's torch eager
            info["ipex_optimize"] = "not applied (fp64)"
            optimized = module
        else:
            with stage(COMPILE, "ipex.optimize"):
                try:
                    optimized = ipex.optimize(module, dtype=low, inplace=True)
                    info["ipex_optimize"] = dtype_name(low)
                except AssertionError as e:
                    if "weights_prepack" not in str(e):
                        raise
                    # IPEX's fp16 weight prepacking needs AVX512-FP16 or AVX-NE-CONVERT; without them it asks for
                    # weights_prepack=False, which keeps its other fp16 optimizations: do what it says, and say so
                    optimized = ipex.optimize(module, dtype=low, inplace=True, weights_prepack=False)
                    info["ipex_optimize"] = f"{dtype_name(low)}, weights_prepack=False (this CPU cannot prepack it)"
        amp = torch.autocast("cpu", dtype=p.autocast) if p.autocast is not None else contextlib.nullcontext()

        def run(*inputs: torch.Tensor) -> Any:
            with torch.no_grad(), amp:
                return optimized(*inputs)

        computed = f"mixed ({dtype_name(p.autocast)} + float32)" if p.autocast is not None else None
        return Prepared(run, computed, info=info)
