"""A backend that answers, but only after a while: for timeouts and connections dropped mid-job."""
import time

DELAY_S = 20.0  # far beyond the tests' timeouts and drop times


class SlowBackend:
    name = "slow"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        module = program.module()

        def run(*inputs):
            time.sleep(DELAY_S)
            return module(*inputs)
        return run
