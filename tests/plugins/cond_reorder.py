"""A correct backend that sums in another order: every linear layer's odd output features are computed with the
reduction split in two halves added at the end. Each result is right to rounding; only the order of the additions
differs from torch's, as between any two real implementations, so it breaks exactly tied outputs apart."""
import torch


def _linear(x, weight, bias=None):
    half = weight.shape[1] // 2
    whole = torch.nn.functional.linear(x, weight)
    split = torch.nn.functional.linear(x[..., :half], weight[:, :half]) + \
        torch.nn.functional.linear(x[..., half:], weight[:, half:])
    odd = torch.arange(weight.shape[0], device=weight.device) % 2 == 1
    out = torch.where(odd, split, whole)
    return out + bias if bias is not None else out


class ReorderBackend:
    """Runs the exported program with torch's linear replaced by the reordered one."""
    name = "cond-reorder"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        gm = program.module()
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target == torch.ops.aten.linear.default:
                n.target = _linear
        gm.recompile()

        def run(*inputs):
            with torch.no_grad():
                return gm(*inputs)
        return run
