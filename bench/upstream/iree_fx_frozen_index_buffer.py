"""IREE 3.13's FX importer (import_frozen_program) fails when a buffer is an index of aten.index.Tensor:
"AssertionError: Heterogeneous lists are not supported: expected vtensor, got <class 'torch.Tensor'>".

The frozen import turns the buffer into a literal tensor, and the index list of aten.index.Tensor then mixes that
literal with graph values, which the importer cannot type. Swin indexes its relative position bias table this way
(table[relative_position_index]). fpdiff works around it by passing such state through aten.clone first
(backends/iree.py, _state_out_of_lists); iree-turbine's aot.export, which keeps state as globals, imports it.

Run: python iree_fx_frozen_index_buffer.py   (needs torch, iree-base-compiler). Exits 1 while it fails.
"""
import sys

import torch


class BiasTable(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(16, 2))
        self.register_buffer("index", torch.randint(0, 16, (4, 4)))

    def forward(self, x):
        return x + self.table[self.index]  # aten.index.Tensor(table, [index])


def main() -> int:
    from iree.compiler.extras.fx_importer import FxImporter
    program = torch.export.export(BiasTable(), (torch.randn(4, 4, 2),))
    print("torch.export: OK")
    try:
        FxImporter().import_frozen_program(program, func_name="main")
    except AssertionError as e:
        print("import_frozen_program FAILS: AssertionError:", e)
        return 1
    print("import_frozen_program: OK (fixed in this version)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
