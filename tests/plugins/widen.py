"""A plugin backend that says it computed the precision asked for and computed float32: the fp32 program with fp32
weights, inputs rounded at the cell's precision and widened, float32 results (what OpenVINO's CPU plugin does with a
bf16 hint it reports back on a CPU without bf16 arithmetic). Its record says fp16/bf16; only its numbers tell."""
import torch

from fpdiff.backends.base import TORCH, Backend, Prepared


class WidenBackend(Backend):
    name = "widen"
    kinds = frozenset({TORCH})

    def available(self):
        return None

    def prepare_task(self, task):
        module = self.export(task, fp32=True).module()
        want = task.requested_dtype
        ops = sum(1 for n in module.graph.nodes if n.op == "call_function")

        def run(*inputs):
            with torch.no_grad():
                return module(*[t.float() if t.is_floating_point() else t for t in inputs])
        return Prepared(run, computed_dtype=want, op_dtypes={want: ops})
