"""A torch model's weights written once per run and memory-mapped by every process that needs them.

The run's process writes every parameter and buffer (non-persistent buffers too: rotary `inv_freq` is one) to one
file in torch's zip format, then maps its own model onto that file, so its private copy is freed. Each worker builds
the model's skeleton on the meta device (no memory, no random init) and maps the same file: N processes share the
page cache's one physical copy. Pages are mapped private (copy on write): a process that writes into a weight gets
its own page, the file and the others are untouched.
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import torch

# The module attribute that remembers which file a module was mapped onto, and the tensors it was mapped with:
# a module whose tensors were replaced since (locate casting in place) is written again.
_MARK = "_fpdiff_weights"


def named_tensors(module: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Every parameter and buffer under every name it has (a tied weight under each of its names)."""
    yield from module.named_parameters(remove_duplicate=False)
    yield from module.named_buffers(remove_duplicate=False)


def float_sizes(module: torch.nn.Module) -> list[int]:
    """Elements of each floating parameter and buffer, a tensor shared by several names counted once."""
    return [t.numel() for t in {id(t): t for _, t in named_tensors(module)}.values() if t.is_floating_point()]


def fingerprint(module: torch.nn.Module, *parts: bytes) -> str:
    """A digest of the weights' names, dtypes, shapes and bytes, read in place (no serialized copy of the model)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
        h.update(b"\0")
    for name, t in named_tensors(module):
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}\0".encode())
        if t.device.type != "meta" and t.numel():
            h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().data)
    return h.hexdigest()[:20]


def share(module: torch.nn.Module, folder: str | os.PathLike) -> str:
    """Write `module`'s weights to `folder` once and map the module onto the file; returns the file. A module already
    mapped onto a file that still exists, with the same tensors, is not written again."""
    mark = getattr(module, _MARK, None)
    if mark is not None and Path(mark[0]).exists() and mark[1] == _ids(module):
        return mark[0]
    path = Path(folder) / "weights.pt"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(_by_object(module), tmp)
    os.replace(tmp, path)
    assign(module, load(path))
    object.__setattr__(module, _MARK, (str(path), _ids(module)))
    return str(path)


def load(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The weights at `path`, memory-mapped (nothing read until used)."""
    return torch.load(path, mmap=True, weights_only=True, map_location="cpu")


def _by_object(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Name -> detached tensor, a tensor shared by several names saved under each (torch.save keeps one storage)."""
    return {name: t.detach() for name, t in named_tensors(module)}


def _ids(module: torch.nn.Module) -> tuple[int, ...]:
    return tuple(id(t) for _, t in named_tensors(module))


def assign(module: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> list[str]:
    """Point each parameter and buffer of `module` named in `state` at `state`'s tensor (no copy); a tensor that
    several names share in the module stays one tensor. Returns the names `state` lacks."""
    made: dict[int, torch.Tensor] = {}
    missing = []
    olds = list(named_tensors(module))  # alive until the attributes are rebound: their ids are the keys
    for name, old in olds:
        new = state.get(name)
        if new is None:
            missing.append(name)
            continue
        if id(old) not in made:  # requires_grad as the model had it: exporters trace a grad-requiring
            made[id(old)] = (torch.nn.Parameter(new, requires_grad=old.requires_grad)  # weight otherwise
                             if isinstance(old, torch.nn.Parameter) else new)
        _set(module, name, made[id(old)])
    _rebind_attributes(module, made)
    del olds
    return missing


def _set(module: torch.nn.Module, name: str, value: torch.Tensor) -> None:
    owner_name, _, leaf = name.rpartition(".")
    owner = module.get_submodule(owner_name) if owner_name else module
    if leaf in owner._parameters:
        owner._parameters[leaf] = value
    else:
        owner._buffers[leaf] = value


def _rebind_attributes(module: torch.nn.Module, made: Mapping[int, torch.Tensor]) -> None:
    """A plain attribute holding a parameter or buffer (transformers keeps `original_inv_freq = inv_freq`) follows
    the tensor it held."""
    for sub in module.modules():
        for k, v in list(vars(sub).items()):
            if isinstance(v, torch.Tensor) and id(v) in made:
                object.__setattr__(sub, k, made[id(v)])


def skeleton(build: Callable[[], torch.nn.Module], state: Mapping[str, torch.Tensor]) -> torch.nn.Module:
    """The model `build` makes, its tensors `state`'s: built on the meta device (no memory, no init) when every meta
    tensor it holds is then replaced; otherwise built for real and mapped after (its own weights then freed)."""
    try:
        with torch.device("meta"):
            module = build()
        if not assign(module, state) and not _meta_left(module):
            return module
    except Exception:  # noqa: BLE001 - a model that cannot be built on meta is built for real below
        pass
    module = build()
    persistent = set(module.state_dict())  # a non-persistent buffer the state lacks is the real build's own
    missing = [n for n in assign(module, state) if n in persistent]
    if missing:
        raise ValueError(f"the weights file lacks {', '.join(missing[:5])}")
    return module


def _meta_left(module: torch.nn.Module) -> bool:
    """A tensor still on the meta device: a parameter or buffer `state` lacked, or a plain tensor attribute."""
    if any(t.device.type == "meta" for _, t in named_tensors(module)):
        return True
    return any(isinstance(v, torch.Tensor) and v.device.type == "meta"
               for sub in module.modules() for v in vars(sub).values())


aten = torch.ops.aten


class LazyCast(torch.Tensor):
    """A weight kept in its stored dtype and seen in another: each op that reads it gets it cast at that moment, so a
    model at float64 (or fp16) holds one op's cast weights at a time instead of a whole cast copy. The values an op
    sees are the whole-model cast's bit for bit (a cast is elementwise); Python code reading `.dtype` sees the cast
    dtype, as it would after `model.to(dtype)`."""

    inner: torch.Tensor
    views: bool  # dense views of it stay lazy too (for autograd's saved tensors; their consumers must take real())

    @staticmethod
    def __new__(cls, inner: torch.Tensor, dtype: torch.dtype, views: bool = False) -> LazyCast:
        t = torch.Tensor._make_wrapper_subclass(cls, inner.shape, strides=inner.stride(), dtype=dtype,
                                                device=inner.device, requires_grad=False)
        t.inner, t.views = inner, views
        return t

    def __repr__(self) -> str:
        return f"LazyCast({tuple(self.shape)}, {self.inner.dtype} seen as {self.dtype})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        a = args[0] if args else None
        if isinstance(a, LazyCast) and (func in _SAME_TENSOR or (a.views and func in _VIEWS)):
            # nn.Parameter(x) detaches: stay lazy; with `views`, linear's transpose stays lazy too
            return LazyCast(func(a.inner, *args[1:], **kwargs), a.dtype, a.views)
        if func is aten.embedding.default and isinstance(a, LazyCast):  # gather, then cast: the rows only
            return func(a.inner, *args[1:], **kwargs).to(a.dtype)
        if func._schema.is_mutable:  # a write must last: the tensor written becomes a real cast copy for good
            for a in (*args, *kwargs.values()):
                if isinstance(a, LazyCast):
                    a.inner = a.inner.to(a.dtype)
        unwrap = lambda x: x.inner.to(x.dtype) if isinstance(x, LazyCast) else x  # noqa: E731
        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})


# Ops that hand back the same values as another tensor object: the wrapper stays lazy through them.
_SAME_TENSOR = {aten.detach.default, aten.alias.default}
# Dense views (no element dropped or repeated): an elementwise cast commutes with them, and `.to()` keeps a dense
# view's strides, so an op reading the view sees what it would of the cast copy's view, strides included. Only for
# wrappers made with `views`: a value that is a view of a weight then stays a wrapper in the graph's values, which
# autograd saves for a backward without a cast copy (plan's attribution); code that hands values on (to numpy, to
# a file) would have to take real() of each.
_VIEWS = {aten.t.default, aten.transpose.int, aten.permute.default, aten.unsqueeze.default, aten.squeeze.dim,
          aten.squeeze.dims, aten.view.default}


def stored(t):
    """`t`'s values as stored: a LazyCast's uncast tensor (exact where the cast widens), anything else as it is."""
    return t.inner if isinstance(t, LazyCast) else t


def real(t):
    """`t` as a plain tensor (a LazyCast cast now), anything else as it is: for code that saves or traces weights."""
    return t.inner.to(t.dtype) if isinstance(t, LazyCast) else t


# A cast copy of weights over this size (a 128M-parameter model at bf16) is not made where an op can cast what it
# reads (LazyCast), bit for bit the same numbers. Under it the copy is cheaper than a Python dispatch per weight read
# (a 1024-row MLP ran 1.5x slower cast per op at fp16); over it the copy is what keeps a real-size model from
# fitting (a 4B model's bf16 copy is 8 GB beside its 16 GB of fp32 weights).
LAZY_CAST_BYTES = 256 << 20


def cast_is_large(module: torch.nn.Module, dtype: torch.dtype) -> bool:
    """Whether `module`'s floating weights at `dtype` would pass LAZY_CAST_BYTES."""
    return sum(float_sizes(module)) * torch.tensor([], dtype=dtype).element_size() > LAZY_CAST_BYTES


def lazy_program(program: torch.export.ExportedProgram, origin: Mapping[int, torch.Tensor]) -> bool:
    """Replace each weight and constant of `program` that `origin` names (by the id of the program's tensor) by the
    tensor it stands for, cast as each op reads it: the program holds no cast copy of its own. True when no fake
    tensor is left in it (a fake one `origin` missed would fail at the first run). Code that saves or traces the
    program must take real() weights (segments.cut does)."""
    for table in (program.state_dict, program.constants):
        for name, t in list(table.items()):
            src = origin.get(id(t))
            if src is None:
                continue
            lazy = LazyCast(src.detach(), t.dtype) if src.dtype != t.dtype else src.detach()
            table[name] = torch.nn.Parameter(lazy, requires_grad=False) if isinstance(
                t, torch.nn.Parameter) else lazy
    held = [*program.state_dict.values(), *program.constants.values(),
            *(t for _, t in named_tensors(program.graph_module))]
    return not any(_is_fake(t) for t in held)


def origin_by_name(program: torch.export.ExportedProgram, module: torch.nn.Module) -> dict[int, torch.Tensor]:
    """For a program exported from a cast copy of `module`: each of its weights that is `module`'s under the same
    name and shape at another floating dtype, by the id of the program's tensor."""
    own = dict(named_tensors(module))
    out = {}
    for name, t in program.state_dict.items():
        src = own.get(name)
        if (src is not None and src.is_floating_point() and t.is_floating_point() and src.dtype != t.dtype
                and src.shape == t.shape and not isinstance(t, LazyCast)):
            out[id(t)] = src
    return out


def fake_copy(module: torch.nn.Module, dtype: torch.dtype) -> tuple[torch.nn.Module, dict[int, torch.Tensor]]:
    """`module` with each floating tensor a cast to `dtype` would copy replaced by a fake tensor at `dtype` (shape,
    strides and device, no memory), and the map from each fake's id to the tensor it stands for. torch.export traces
    a module's weights as fake tensors anyway: exporting this copy makes the same program without the cast copy."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    origin: dict[int, torch.Tensor] = {}

    def fake(t: torch.Tensor) -> torch.Tensor:
        if not (t.is_floating_point() and t.dtype != dtype):
            return _cast(t, dtype, False)
        with mode:
            f = torch.empty_strided(t.shape, t.stride(), dtype=dtype, device=t.device)
        made = torch.nn.Parameter(f, requires_grad=t.requires_grad) if isinstance(t, torch.nn.Parameter) else f
        origin[id(made)] = t
        return made
    return _copy_with(module, fake), origin


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    return isinstance(t, FakeTensor) or isinstance(getattr(t, "data", None), FakeTensor)


def cast_copy(module: torch.nn.Module, dtype: torch.dtype, lazy: bool = False) -> torch.nn.Module:
    """`module` with its floating tensors at `dtype`, sharing everything it can: a tensor already at `dtype` is
    shared (buffers are copied: a forward may write them), a cast one is made once (`lazy`: LazyCast, made per op).
    Unlike deepcopy + `.to()`, the model's weights never exist twice at their stored dtype."""
    return _copy_with(module, lambda t: _cast(t, dtype, lazy))


def _copy_with(module: torch.nn.Module, make: Callable[[torch.Tensor], torch.Tensor]) -> torch.nn.Module:
    """A deep copy of `module` whose every parameter and buffer `t` is `make(t)`, made once per tensor (ties and
    plain attributes holding it follow)."""
    import copy
    memo: dict = {}
    for _, t in named_tensors(module):
        if id(t) not in memo:
            memo[id(t)] = make(t)
    return copy.deepcopy(module, memo)


def _cast(t: torch.Tensor, dtype: torch.dtype, lazy: bool) -> torch.Tensor:
    param, grad = isinstance(t, torch.nn.Parameter), t.requires_grad
    t = t.detach()
    if t.is_floating_point() and t.dtype != dtype:
        t = LazyCast(t, dtype) if lazy else t.to(dtype)
    elif not param:
        t = t.clone()
    if param and not isinstance(t, LazyCast):  # requires_grad kept: what torch.export traces depends on it (an
        return torch.nn.Parameter(t, requires_grad=grad)  # attention kernel with a grad-requiring bias differs)
    return t


# What one fpdiff process holds before any model (torch and the backends imported): measured at 0.3-0.4 GB here.
PROCESS_BYTES = 400 << 20


def estimated_peak(module: torch.nn.Module) -> int:
    """The least memory a run of `module` needs, in bytes: its fp32 weights in memory once (built, then mapped and
    shared by every worker), plus the largest weight at float64 (the judge casts one op's weights at a time), plus
    two processes' own size. Activations are not counted (they depend on the inputs; small against real-size
    weights at the short sequences a precision check uses)."""
    sizes = float_sizes(module)
    if not sizes:
        return 2 * PROCESS_BYTES
    return 4 * sum(sizes) + 8 * max(sizes) + 2 * PROCESS_BYTES


MEMINFO = Path("/proc/meminfo")
# MemAvailable is one moment's reading: another process holding memory for a second (a compile, a test) lowers it.
# Only what the machine could not free even when every other process gave back its own is refused: MemTotal less
# what no process's exit returns (the kernel's own unreclaimable memory, tmpfs and shared memory, the reserve the
# kernel keeps), which is MemAvailable plus the processes' private memory (AnonPages). Between that and MemAvailable
# the reading is taken again a few times; still short, the run goes on with one line on stderr, since the memory may
# be freed before the model needs it.
REREADS, REREAD_PAUSE_S = 3, 0.5


def meminfo(path: Path = MEMINFO) -> dict[str, int] | None:
    """The kernel's memory counters in bytes by name (MemTotal, MemAvailable, AnonPages...), or None where the
    system has no such file."""
    try:
        rows = [line.split() for line in path.read_text().splitlines()]
    except OSError:
        return None
    return {r[0].rstrip(":"): int(r[1]) * (1024 if r[2:] == ["kB"] else 1) for r in rows if len(r) >= 2
            and r[1].isdigit()}


def available(info: dict[str, int] | None = None) -> int | None:
    """Memory the kernel can give without swapping now (MemAvailable), or None where it does not say."""
    info = meminfo() if info is None else info
    return (info or {}).get("MemAvailable")


def freeable(info: dict[str, int]) -> int | None:
    """The most this machine could give a run: what is available now plus what other processes hold privately and
    give back when they end; None where the kernel does not say."""
    if "MemAvailable" not in info:
        return None
    return info["MemAvailable"] + info.get("AnonPages", 0)


def refuse_unfit(module: torch.nn.Module, what: str, read: Callable[[], dict[str, int] | None] = meminfo,
                 pause_s: float = REREAD_PAUSE_S) -> None:
    """Say before any work when even the streamed run cannot fit (UsageError: one line, exit 2); on memory that is
    only held for now, say so on stderr and go on."""
    need, info = estimated_peak(module), read()
    ceiling = freeable(info) if info else None
    if ceiling is None:
        return
    gb = 1 << 30
    if need > ceiling:
        from fpdiff.core.errors import UsageError
        raise UsageError(f"{what} cannot fit in memory even streamed: it needs about {need / gb:.1f} GB (its fp32 "
                         f"weights once, the largest weight at float64, two processes) and this machine can free "
                         f"{ceiling / gb:.1f} GB of its {info.get('MemTotal', 0) / gb:.1f} GB")
    have = _available_soon(need, info, read, pause_s)
    if have is not None:
        print(f"fpdiff: warning: {what} needs about {need / gb:.1f} GB and {have / gb:.1f} GB is available now "
              f"(other processes hold memory); going on, as it may be freed", file=sys.stderr)


def _available_soon(need: int, info: dict[str, int], read: Callable[[], dict[str, int] | None],
                    pause_s: float) -> int | None:
    """None when `need` fits what is available, now or at one of REREADS readings `pause_s` apart; else the last
    reading (memory held by others may be a moment's)."""
    have = info["MemAvailable"]
    for _ in range(REREADS):
        if need <= have:
            return None
        time.sleep(pause_s)
        have = available(read() or {}) or have
    return None if need <= have else have
