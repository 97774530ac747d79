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
