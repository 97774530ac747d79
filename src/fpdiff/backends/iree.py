"""IREE: torch programs through the FX importer, ONNX graphs through iree-import-onnx; llvm-cpu or cuda."""
from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from ..compare import Finding
from ..errors import Unsupported
from ..graph import functional
from . import Prepared, mixed_dtype, to_numpy as _to_numpy, too_wide

DEMOTE_F64 = "--iree-input-demote-f64-to-f32"
# sm_80 compiles and runs on H100/H200 with iree-base-compiler 3.13; sm_90 fails with "missing GPU target".
CUDA_TARGET = "sm_80"
_MLIR_TYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
_FLOAT_OP = re.compile(r"=\s*(?:arith\.(?:addf|subf|mulf|divf|remf|negf|maximumf|minimumf|maxnumf|minnumf)|"
                       r"math\.\w+)\b[^\n]*:\s*(?:vector<[\dx]*x)?(f16|bf16|f32|f64)>?\s*$", re.M)
_ABI_DEMOTED = re.compile(r"tensor<[^>]*xf64>\s+as\s+tensor<[^>]*xf32>")


def _tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(found).exists():
        raise Unsupported(f"{name} not found (install iree-base-compiler)")
    return found


def compile_flags(device: str, precision_name: str, user_flags: tuple[str, ...]) -> list[str]:
    """Target flags, plus fp64 kept as fp64 unless the user's own flags say otherwise (IREE demotes by default)."""
    if device.startswith("cuda"):
        flags = ["--iree-hal-target-device=cuda", f"--iree-cuda-target={CUDA_TARGET}"]
    else:
        flags = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                 "--iree-llvmcpu-target-cpu=host"]
    if precision_name == "fp64" and not any(f.startswith(DEMOTE_F64) for f in user_flags):
        flags.append(f"{DEMOTE_F64}=false")
    return flags + list(user_flags)


def computed_dtypes(phase_dir: Path) -> tuple[Counter, bool]:
    """Float arithmetic ops in the dispatches by element type, and whether the public signature was demoted."""
    counts: Counter = Counter()
    for f in phase_dir.glob("*.executable-sources.mlir"):
        counts.update(_MLIR_TYPES[t] for t in _FLOAT_OP.findall(f.read_text()))
    demoted = any(_ABI_DEMOTED.search(f.read_text()) for f in phase_dir.glob("*.abi.mlir"))
    return counts, demoted


def import_program(program, precision_name: str, mlir: Path) -> None:
    """torch program -> torch-dialect MLIR through IREE's FX importer (functional form, weights inline)."""
    from iree.compiler.extras.fx_importer import FxImporter
    with _inline_weights(precision_name in ("bf16", "fp64")):
        imp = FxImporter()
        imp.import_frozen_program(functional(program), func_name="main")
        mlir.write_text(str(imp.module))


@contextlib.contextmanager
def _inline_weights(on: bool):
    """Weights as dense<> literals instead of dense_resource<>: iree-compile 3.13 rejects bf16 and f64 weights in
    the resource form ("'arith.constant' op failed to verify that all of {value, result} have same type").
    Only the encoding of the same values changes."""
    if not on:
        yield
        return
    import iree.compiler.extras.fx_importer as fxi
    from iree.compiler.ir import DenseElementsAttr

    class _Dense:
        @staticmethod
        def get_from_buffer(arr, name, tensor_type):
            return DenseElementsAttr.get(arr, type=tensor_type.element_type, shape=list(tensor_type.shape))

    saved = fxi.DenseResourceElementsAttr
    fxi.DenseResourceElementsAttr = _Dense
    try:
        yield
    finally:
        fxi.DenseResourceElementsAttr = saved


def _unsupported_from_compile(stderr: str, precision: str) -> Unsupported:
    lines = [ln for ln in stderr.splitlines() if "error" in ln.lower()] or stderr.splitlines()[-3:] or ["(no output)"]
    m = re.search(r"undefined symbol: (\w+)", stderr)
    op = m.group(1) if m else None
    if not op:
        m = re.search(r"'([\w.]+)' op|operation '([\w.]+)'", stderr)
        op = m.group(1) if m else None
    return Unsupported(f"iree-compile failed: {lines[0].strip()[:400]}", op=op, dtype=precision)


class IreeBackend:
    name = "iree"

    def available(self) -> str | None:
        try:
            import iree.compiler  # noqa: F401
            import iree.runtime  # noqa: F401
        except ImportError as e:
            return f"IREE does not import: {e}"
        return None

    def prepare_task(self, task) -> Prepared:
        if task.precision.autocast is not None:
            raise Unsupported("autocast has no IREE form (it is a torch dispatch policy)")
        flags = compile_flags(task.device, task.precision.name, task.flags)
        vmfb, hit = task.cache.get_or_build(*task.key("iree", *flags), suffix=".vmfb",
                                            build=lambda out: self._compile(task, flags, out))
        phases = vmfb.with_suffix(".phases")
        counts, demoted = computed_dtypes(phases)
        notes, info = [], {"cache": "hit" if hit else "miss", "flags": flags, "op_dtypes": dict(counts)}
        want = task.requested_dtype
        total = sum(counts.values())
        if demoted or too_wide(counts, want):
            remedy = (f"compile with {DEMOTE_F64}=false" if want == "float64"
                      else "check the compile flags for demotion/promotion options")
            what = "its public signature demoted from f64 to f32" if demoted else "ops in other dtypes"
            notes.append(Finding("dtype-changed", f"IREE compiled {counts[want]} of {total} float ops in {want}, "
                                 f"{what} ({dict(counts)})", remedy=remedy))
        computed = mixed_dtype(counts, want)
        return Prepared(self._runner(vmfb, task.device), computed, notes, info)

    def _compile(self, task, flags: list[str], out: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="fpdiff-iree-") as tmp:
            mlir = Path(tmp) / "model.mlir"
            if task.is_torch:
                import_program(task.program(), task.precision.name, mlir)
                flags = ["--iree-input-type=torch", *flags]
            else:
                r = subprocess.run([_tool("iree-import-onnx"), str(task.onnx_file()), "-o", str(mlir)],
                                   capture_output=True, text=True)
                if r.returncode:
                    raise Unsupported(f"iree-import-onnx failed: {(r.stderr.strip().splitlines() or ['?'])[-1][:400]}")
            phases = out.with_name(out.name.split(".tmp")[0].removesuffix(".vmfb") + ".phases")
            shutil.rmtree(phases, ignore_errors=True)
            r = subprocess.run([_tool("iree-compile"), str(mlir), *flags, "-o", str(out),
                                f"--dump-compilation-phases-to={phases}"], capture_output=True, text=True)
            if r.returncode:
                raise _unsupported_from_compile(r.stderr, task.precision.name)

    @staticmethod
    def _runner(vmfb: Path, device: str):
        import iree.runtime as rt
        config = rt.Config("cuda" if device.startswith("cuda") else "local-task")
        module = rt.VmModule.mmap(config.vm_instance, str(vmfb))
        ctx = rt.SystemContext(config=config)
        ctx.add_vm_module(module)
        names = [n for n in ("main", "main_graph") if module.lookup_function(n) is not None] or [
            n for n in module.function_names if not n.startswith("__") and not n.endswith("$async")]
        if not names:
            raise Unsupported("the compiled module exports no function to call")
        fn = ctx.modules.module[names[0]]

        def run(*inputs):
            out = fn(*(_to_numpy(t) for t in inputs))
            return list(out) if isinstance(out, (tuple, list)) else [out]
        return run


