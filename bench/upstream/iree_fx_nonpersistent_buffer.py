"""IREE 3.13's FX importer (iree.compiler.extras.fx_importer, import_frozen_program) fails on any module with a
non-persistent buffer: "AssertionError: Could not find state mapping for buffer".

torch.export keeps non-persistent buffers in ExportedProgram.constants, not in state_dict, and the frozen import
looks for every buffer in state_dict only. transformers registers position_ids (BERT, all-MiniLM-L6-v2), rotary
inv_freq (Llama) and relative position indices (Swin) this way. fpdiff works around it by showing the importer a
state_dict that includes those constants (backends/iree.py, _FrozenView).

Run: python iree_fx_nonpersistent_buffer.py   (needs torch, iree-base-compiler). Exits 1 while it fails.
"""
import sys

import torch


class Positions(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("position_ids", torch.arange(8), persistent=False)
        self.embed = torch.nn.Embedding(8, 4)

    def forward(self, x):
        return x + self.embed(self.position_ids)


def main() -> int:
    from iree.compiler.extras.fx_importer import FxImporter
    program = torch.export.export(Positions(), (torch.randn(8, 4),))
    print("torch.export: OK; the buffer is in constants:", list(program.constants))
    try:
        FxImporter().import_frozen_program(program, func_name="main")
    except AssertionError as e:
        print("import_frozen_program FAILS: AssertionError:", e)
        return 1
    print("import_frozen_program: OK (fixed in this version)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
