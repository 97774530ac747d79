"""Plugin backends that die, hang, or are unavailable: the grid must go on without them."""
import os
import time


class DiesBackend:
    name = "dies"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        def run(*inputs):
            os._exit(3)  # the process vanishes mid-run, as a segfault would
        return run


class HangsBackend:
    name = "hangs"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        def run(*inputs):
            time.sleep(3600)
        return run


class AbsentBackend:
    name = "absent"

    def available(self):
        return "needs hardware this machine does not have"

    def prepare(self, program, precision, device):
        raise AssertionError("never prepared when unavailable")


class BrokenCompilerBackend:
    """A compiler that asserts while preparing: an error charged to it, not a refusal."""
    name = "broken-compiler"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        raise AssertionError("\x1b[31mlowering pass lost a buffer\x1b[0m")


class WrongTypeBackend:
    """Returns something that is not a tensor: the backend's fault, not fpdiff's."""
    name = "wrong-type"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        return lambda *inputs: ["not a tensor"]


class FlakyBackend:
    """Adds fresh noise on every call: the same compiled model answers differently each time."""
    name = "flaky"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        import torch
        module = program.module()

        def run(*inputs):
            out = module(*inputs)
            return out + 1e-9 * torch.randn_like(out) * out.abs().max()
        return run
