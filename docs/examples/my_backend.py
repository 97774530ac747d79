"""The minimal backend plugin: `fpdiff check MODEL --plugin docs/examples/my_backend.py --backends torch,mine`.
This one runs the program it is handed as torch does; yours hands it to your compiler or runtime."""


class MyBackend:
    name = "mine"

    def available(self) -> str | None:  # None when usable, else why not
        return None

    def prepare(self, program, precision: str, device: str):  # program: torch.export.ExportedProgram
        # return a callable: (*inputs: torch.Tensor on CPU) -> sequence of torch.Tensor
        return program.module()
