"""torch.compile with the inductor backend; dynamic dims follow the shape variant via mark_dynamic."""
from __future__ import annotations

import torch

from ..errors import Unsupported
from ..graph import dynamic_dims
from . import Prepared
from .torch_eager import computed_dtype, device_runner


class InductorBackend:
    name = "inductor"

    def available(self) -> str | None:
        return None

    def prepare_task(self, task) -> Prepared:
        if not task.is_torch:
            raise Unsupported("torch.compile runs torch models; this model is ONNX")
        torch._dynamo.reset()  # no guards or graphs carried over from another cell
        module = task.module().to(task.device)
        dims = dynamic_dims(task.source.declared, task.source.input_names, task.variant)
        compiled = torch.compile(module, backend="inductor", dynamic=False if not any(dims) else None)

        def call(*inputs):
            for t, ds in zip(inputs, dims):
                for d in ds:
                    torch._dynamo.mark_dynamic(t, d)
            return compiled(*inputs)

        run = device_runner(call, task.precision, task.device)
        run(*task.inputs())  # compile now, so a compile failure is `unsupported` and run time excludes it
        return Prepared(run, computed_dtype(task.precision))
