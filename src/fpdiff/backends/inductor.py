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

    def prepare_task(self, task: Task) -> Prepared:
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

    def repro(self, r: Repro) -> str | None:
        if r.onnx_segment:
            return None
        return TORCH_INPUTS + """with torch.no_grad():
    outs = torch.compile(program.module())(*xt)
"""


class _Autocast(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module, device_type: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.inner, self.device_type, self.dtype = inner, device_type, dtype

    def forward(self, *args: Any) -> Any:
        with torch.autocast(device_type=self.device_type, dtype=self.dtype):
            return self.inner(*args)
