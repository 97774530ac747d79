"""The minimal plugin form, healthy: runs the exported program's module as it is."""


class EagerPlugin:
    name = "eager-plugin"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        return program.module()
