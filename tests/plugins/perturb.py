"""A plugin backend with a known bug: one chosen op's output is off by 1e-3 relative (alternating sign)."""
import torch

TARGETS = {torch.ops.aten.linear.default, torch.ops.aten.conv2d.default, torch.ops.aten.addmm.default,
           torch.ops.aten.mm.default}


def _perturb(x):
    sign = torch.ones_like(x).flatten()
    sign[1::2] = -1
    return x * (1 + 1e-3 * sign.reshape(x.shape))


def _width(node):
    """Output features/channels of a linear or conv node: an intrinsic property of the op, as a kernel bug's
    trigger would be (SEEDS #3: one conv layout), so the bug follows the op into any segment cut around it."""
    w = node.args[1] if len(node.args) > 1 else None
    val = getattr(w, "meta", {}).get("val")
    return val.shape[0] if val is not None and val.dim() >= 2 else None


class PerturbBackend:
    """Corrupts the linear/conv ops with these output widths (tinyformer: mlp.0 has 256, tinycnn: conv 0 has 16)."""
    name = "perturb"
    widths = {256, 16}

    def available(self):
        return None

    def prepare(self, program, precision, device):
        gm = program.module()
        for node in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in TARGETS
                     and _width(n) in self.widths]:
            with gm.graph.inserting_after(node):
                new = gm.graph.call_function(_perturb, (node,))
            node.replace_all_uses_with(new, delete_user_cb=lambda user, new=new: user is not new)
        gm.recompile()

        def run(*inputs):
            with torch.no_grad():
                return gm(*inputs)
        return run


class PerturbQKV(PerturbBackend):
    name = "perturb-qkv"
    widths = {192}  # tinyformer's qkv projection (3 x 64)


class PerturbLast(PerturbBackend):
    name = "perturb-last"
    widths = {10, 64}  # tinycnn's head; tinyformer's proj and mlp.2


class HonestBackend:
    """Runs the program it is given as is: must never be judged mismatch."""
    name = "honest"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        gm = program.module()
        return lambda *inputs: gm(*inputs)


class DynamicOnlyBug(PerturbBackend):
    """Correct on static shapes, wrong whenever the program has a symbolic dim (as IREE #21028 was for mixed)."""
    name = "dynbug"

    def prepare(self, program, precision, device):
        symbolic = any(not isinstance(d, int) for n in program.graph.nodes if n.op == "placeholder"
                       and hasattr(n.meta.get("val"), "shape") for d in n.meta["val"].shape)
        return super().prepare(program, precision, device) if symbolic else \
            HonestBackend().prepare(program, precision, device)


def _swapped_conv1d(x, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), groups=1):
    return torch.nn.functional.conv1d(x, weight.transpose(1, 2), bias, stride, padding, dilation, groups)


class ConvSwap(PerturbBackend):
    """SEEDS #3's bug: a 1-D conv whose filter is read with its channel and kernel dims swapped (only possible
    unnoticed when in_channels == kernel_size, as in the IREE report's 2x2x2 filter)."""
    name = "convswap"

    def prepare(self, program, precision, device):
        gm = program.module()
        for n in gm.graph.nodes:
            w = n.args[1].meta.get("val") if n.op == "call_function" and len(n.args) > 1 and hasattr(
                n.args[1], "meta") else None
            if n.target == torch.ops.aten.conv1d.default and w is not None and w.shape[1] == w.shape[2]:
                n.target = _swapped_conv1d
        gm.recompile()

        def run(*inputs):
            with torch.no_grad():
                return gm(*inputs)
        return run
