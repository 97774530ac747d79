"""A toy analysis in one file, registered as an entry point of fpdiff.analyses: the largest magnitude of a model's
float64 output, scaled. Everything an analysis declares is here: its options, its run, its result, its command-line
arguments and its renderers."""
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from fpdiff.analyses import Analysis
from fpdiff.analysis.base import Result


@dataclass(frozen=True)
class ToyOptions:
    scale: float = 1.0
    limit: float = 1e6


@dataclass
class ToyResult(Result):
    kind = "toy"
    model: str
    peak: float
    limit: float
    seed: int

    def as_dict(self) -> dict:
        return {"kind": self.kind, "model": self.model, "peak": self.peak, "limit": self.limit, "seed": self.seed}

    def exit_code(self, strict: bool = False) -> int:
        return int(self.peak > self.limit)

    def next_steps(self) -> list[str]:
        return [f"fpdiff ranges {self.model}"]


def run(model, options, shared):
    import torch

    from fpdiff.sources import load
    source = load(model, seed=shared.seed)
    shared.step("toy: float64 run", 0, 1)
    with torch.no_grad():
        out = source.module.double()(*(t.double() if t.is_floating_point() else t for t in source.inputs))
    return ToyResult(model, float(out.abs().max()) * options.scale, options.limit, shared.seed)


def terminal(result, console, loud=False):
    console.print(f"toy peak of {result.model}: {result.peak:.6g}" + (" (loud)" if loud else ""), highlight=False)


def html(report):
    return f"<p class='toy'>peak {report['peak']:.6g} against {report['limit']:g}</p>"


def junit(result, strict):
    suite = ET.Element("testsuite", name=f"toy {result.model}", tests="1", failures=str(result.exit_code()))
    case = ET.SubElement(suite, "testcase", classname="toy", name=result.model)
    if result.exit_code():
        ET.SubElement(case, "failure", message=f"peak {result.peak} above {result.limit}")
    return ET.ElementTree(suite)


def cells(result):
    status = "mismatch" if result.exit_code() else "pass"
    return [("toy", "cpu", "fp64", "static", status, result.peak, None, "peak", "[]")]


def arguments(parser):
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the peak")
    parser.add_argument("--limit", type=float, default=1e6, help="exit 1 above this")
    parser.add_argument("--loud", action="store_true", help="say so")


TOY = Analysis(name="toy", summary="the peak of the float64 output, scaled", run=run, options=ToyOptions,
               shared=("seed", "progress"), arguments=arguments, cli_groups=("junit", "store"),
               view=lambda args: {"loud": args.loud}, terminal=terminal, html=html, junit=junit, cells=cells,
               names={"ToyResult": ToyResult})
