"""torch -> ONNX, and ONNX -> another float dtype: stages that can change numbers, so they are never trusted."""
from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path

import onnx

from fpdiff.core.errors import MESSAGE_CHARS, ONNX_EXPORT, StageError, plain, raised_by_fpdiff
from fpdiff.onnxtools.dtypes import FLOATS, ONNX_TYPE, np_cast  # noqa: F401 (read from here by other modules)


def _info_file(onnx_path: Path) -> Path:
    return onnx_path.with_name(onnx_path.stem + ".export.json")


def save_export_info(onnx_path: Path, info: dict) -> None:
    """Keep which exporter made `onnx_path` beside it (export_program returns it), for every later cell."""
    _info_file(Path(onnx_path)).write_text(json.dumps(info))


def export_info(onnx_path: Path) -> dict:
    """Which exporter made a cached ONNX export and why (a cell reports it: the exporter is a stage that can change
    numbers). Empty for ONNX sources."""
    f = _info_file(Path(onnx_path))
    return json.loads(f.read_text()) if f.exists() else {}


def export_program(program, path: Path, module=None, args: tuple | None = None,
                   input_names: list[str] | None = None, dynamic_axes: dict | None = None) -> dict:
    """torch.onnx's dynamo exporter first, optimizer off: its constant folding deletes `x + 1e-8` (a real number
    change). When it fails, the TorchScript exporter on `module` (an nn.Module, or a callable making one; default:
    the program's own module) with `args` (default: the program's example inputs). Returns which exporter made the
    file and, after a fallback, why dynamo failed. Both failing is the exporter's failure (StageError), never the
    failure of the backend that wanted the file."""
    try:
        _dynamo(program, path)
        return {"onnx_exporter": "dynamo"}
    except Exception as e:
        if raised_by_fpdiff(e):
            raise
        dynamo_failure = _why(e)
    try:
        _torchscript(program, path, module, args, input_names, dynamic_axes)
    except Exception as e:
        if raised_by_fpdiff(e):
            raise
        # each reason cut to half a line, so the report's one line holds both
        half = MESSAGE_CHARS // 2
        raise StageError(ONNX_EXPORT, "torch.onnx", f"dynamo exporter: {dynamo_failure[:half]}; TorchScript "
                         f"exporter (the fallback): {_why(e)[:half]}") from e
    return {"onnx_exporter": "torchscript", "onnx_exporter_why": f"the dynamo exporter failed: {dynamo_failure}"}


def _dynamo(program, path: Path) -> None:
    import logging

    import torch
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed" and such
    with contextlib.redirect_stdout(io.StringIO()):
        onnx_program = torch.onnx.export(program, (), dynamo=True, optimize=False, verbose=False)
    onnx_program.save(str(path))


def _torchscript(program, path: Path, module, args, input_names, dynamic_axes) -> None:
    """The TorchScript exporter traces the module at these inputs. Its constant folding (always on, no switch in
    torch 2.13) only evaluates subgraphs whose inputs are all constants, in their own dtype: `x + 1e-8` stays."""
    import torch
    if module is None:
        module = program.module()  # an unlifted GraphModule: it refuses train(), hence PRESERVE below
    elif not isinstance(module, torch.nn.Module):
        module = module()
    if args is None:
        args = tuple(program.example_inputs[0])
    names = list(input_names) if input_names else [f"input{i}" for i in range(len(args))]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # its deprecation notice and tracer warnings; failures still raise
        torch.onnx.export(module, tuple(args), str(path), dynamo=False, input_names=names,
                          dynamic_axes=dynamic_axes, training=torch.onnx.TrainingMode.PRESERVE)


def _why(e: BaseException) -> str:
    """One line: the exporter's own first sentence, then the innermost cause, where the real reason is."""
    def line(x: BaseException) -> str:
        # torch appends the FX node and the user's traceback after the reason: the reason is enough for one line
        text = " ".join(plain(str(x)).split()).split(" While executing ")[0]
        return f"{type(x).__name__}: {text}" if text else type(x).__name__
    root, seen = e, {id(e)}
    while (nxt := root.__cause__ or root.__context__) is not None and id(nxt) not in seen:
        root = nxt
        seen.add(id(nxt))
    top = line(e).split(". ")[0]
    return (top if root is e else f"{top[:200]} <- {line(root)}")[:MESSAGE_CHARS]


def cast_model(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """Every float computation of the graph in `target` (like .half() on a torch model), typed as the ONNX schema
    allows (onnxtools/mixed.py)."""
    from fpdiff.onnxtools.mixed import cast_model as cast
    return cast(model, target)
