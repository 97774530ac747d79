"""ExecuTorch with a planted bug in static int8 cells: the .pte it runs dequantizes one activation with its zero point
off by SHIFT steps, while it reports the honest quantized program as the one it ran. Nothing of it can be read back,
so quant's output-level rule must call it mismatch; a cell with no such activation runs as ExecuTorch does."""
from pathlib import Path

from fpdiff.backends.base import Prepared
from fpdiff.backends.executorch import ExecuTorchBackend, _runner, load_method, write_quantized_pte, xnnpack_quantizer
from fpdiff.core import precision as prec
from fpdiff.model import pt2e

SHIFT = 8


class ZeroPointExecuTorch(ExecuTorchBackend):
    name = "executorch-zero-point"

    def prepare_quantized(self, task):
        cell = super().prepare_quantized(task)
        if task.precision.name != "int8":
            return cell
        fp32 = task.at(prec.FP32)
        program = pt2e.quantize(self.export(fp32), xnnpack_quantizer("int8"), task.calibration(), tuple(fp32.inputs()))
        if not shifted(program, SHIFT):
            return cell
        bad = Path(cell.artifact).with_name("planted.pte")
        write_quantized_pte(program, bad)
        cell.close()
        return Prepared(_runner(load_method(bad)), info={**cell.info, "planted": f"zero point +{SHIFT}"},
                        artifact=bad, quantized=cell.quantized)


def shifted(program, shift: int) -> bool:
    """The middle activation dequantize's zero point moved by `shift` in place; False without one."""
    dq = [n for n in program.graph.nodes if n.op == "call_function" and "dequantize_per_tensor" in str(n.target)
          and isinstance(n.args[2], int)]
    if not dq:
        return False
    node = dq[len(dq) // 2]
    args = list(node.args)
    args[2] = max(args[3], min(args[4], args[2] + shift))
    node.args = tuple(args)
    program.graph_module.recompile()
    return True
