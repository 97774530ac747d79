"""The job protocol between fpdiff and a worker in another interpreter or on another machine: JSON headers and
numpy arrays only, never a pickle, so two sides with different torch (or no shared code at all) can talk, and
nothing is deserialized before the peer proved it holds the token.

A frame is an 8-byte big-endian length and a UTF-8 JSON header, then the blobs the header lists (`blobs`: name and
size), each raw. A conversation: the client sends `hello` with PROTOCOL; the worker answers `hello` with its
PROTOCOL, its fpdiff, Python and torch versions and the declarations of its backends; then `job` frames, each
answered by one `result` frame. Over TCP a mutual HMAC-SHA256 challenge on the shared token comes first."""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import struct
from dataclasses import fields
from pathlib import Path

import numpy as np

PROTOCOL = 1
MAX_HEADER = 16 << 20  # a header is JSON about one job: megabytes means a foreign or hostile peer
MAX_BLOB = 16 << 30  # weights of a large model; a length beyond this is a corrupt or hostile frame
NONCE = 32


class ProtocolError(Exception):
    """The peer broke the protocol (wrong version, bad frame, failed authentication, hung up)."""


def _read_exact(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise ProtocolError("the connection closed mid-frame" if chunks or left < n else "the connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send(stream, header: dict, blobs: dict[str, bytes] | None = None) -> None:
    blobs = blobs or {}
    header = {**header, "blobs": [[k, len(v)] for k, v in blobs.items()]}
    data = json.dumps(header, default=str).encode()
    stream.write(struct.pack("!Q", len(data)) + data)
    for v in blobs.values():
        stream.write(v)
    stream.flush()


def receive(stream) -> tuple[dict, dict[str, bytes]]:
    (n,) = struct.unpack("!Q", _read_exact(stream, 8))
    if n > MAX_HEADER:
        raise ProtocolError(f"a frame header of {n} bytes: the peer does not speak fpdiff's job protocol")
    try:
        header = json.loads(_read_exact(stream, n))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"the peer sent a header that is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise ProtocolError("the peer sent a header that is not a JSON object")
    blobs = {}
    for name, size in header.pop("blobs", []):
        if not 0 <= size <= MAX_BLOB:
            raise ProtocolError(f"a blob of {size} bytes: corrupt frame")
        blobs[name] = _read_exact(stream, size)
    return header, blobs


def expect(header: dict, kind: str) -> dict:
    if header.get("type") == "error":
        raise ProtocolError(header.get("message", "the worker refused"))
    if header.get("type") != kind:
        raise ProtocolError(f"expected a {kind!r} frame, got {header.get('type')!r}")
    return header


# Mutual authentication on a shared token, before any JSON is parsed: each side proves it holds the token by the
# HMAC of the other's fresh nonce; the roles are in the MAC so a reflected answer does not pass.
def _mac(token: bytes, role: bytes, nonce: bytes) -> bytes:
    return hmac.new(token, role + nonce, hashlib.sha256).digest()


def authenticate_as_client(stream, token: bytes) -> None:
    theirs = _read_exact(stream, NONCE)
    ours = os.urandom(NONCE)
    stream.write(_mac(token, b"client", theirs) + ours)
    stream.flush()
    try:
        answer = _read_exact(stream, 32)
    except ProtocolError:
        raise ProtocolError("authentication failed: the worker closed the connection (wrong token?)") from None
    if not hmac.compare_digest(answer, _mac(token, b"worker", ours)):
        raise ProtocolError("authentication failed: the worker does not hold our token")


def authenticate_as_worker(stream, token: bytes) -> None:
    ours = os.urandom(NONCE)
    stream.write(ours)
    stream.flush()
    answer = _read_exact(stream, 32)
    theirs = _read_exact(stream, NONCE)
    if not hmac.compare_digest(answer, _mac(token, b"client", ours)):
        raise ProtocolError("authentication failed: wrong token")
    stream.write(_mac(token, b"worker", theirs))
    stream.flush()


# Arrays: npz without pickles; bfloat16 (no numpy dtype) travels as its uint16 bits with a tag.
def pack_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    out, tags = {}, {}
    for k, a in arrays.items():
        a = np.asarray(a)
        if a.dtype.name == "bfloat16":
            a, tags[k] = a.view(np.uint16), "bfloat16"
        out[k] = a
    np.savez(buf, __tags__=np.frombuffer(json.dumps(tags).encode(), dtype=np.uint8), **out)
    return buf.getvalue()


def unpack_arrays(blob: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        tags = json.loads(bytes(z["__tags__"]).decode())
        out = {}
        for k in z.files:
            if k == "__tags__":
                continue
            a = z[k]
            if tags.get(k) == "bfloat16":
                import ml_dtypes
                a = a.view(ml_dtypes.bfloat16)
            out[k] = a
        return out


def job_frame(job, timeout: float, backend: str, sent: dict) -> tuple[dict, dict[str, bytes]]:
    """A Job as a frame: its fields as JSON, the model file, the saved data as arrays, plugin files as blobs.
    `backend` is the name the worker knows it by (`ort` for a local `ort@1.20`). `sent` remembers what this
    connection already carried: a grid's later cells name their files by digest instead of sending the weights
    again (`files`)."""
    key = (job.source.path, job.data_path, job.plugins)
    if key in sent:
        header, blobs = sent[key], {}
    else:
        from fpdiff.runtime import jobdata
        from fpdiff.sources.base import digest
        data = jobdata.read(job.data_path)
        arrays = {f"input{i}": _np(x) for i, x in enumerate(data["inputs"])}
        arrays.update({f"state:{k}": _np(v) for k, v in (data.get("state") or {}).items()})
        blobs = {"model": Path(job.source.path).read_bytes(), "data": pack_arrays(arrays)}
        for i, p in enumerate(job.plugins):
            blobs[f"plugin{i}"] = Path(p).read_bytes()
        header = {"source": {"kind": job.source.kind, "label": job.source.label, "name": Path(job.source.path).name},
                  "data": {"fingerprint": data["fingerprint"], "input_names": data["input_names"],
                           "inputs": len(data["inputs"]), "state": "state" in data,
                           "plugins": [Path(p).name for p in job.plugins]},
                  "files": digest(*blobs.values())}
        sent[key] = header
    header = {**header, "type": "job", "timeout": timeout, "backend": backend,
              "job": {"precision": job.precision, "device": job.device, "flags": list(job.flags), "seed": job.seed,
                      "repeat": job.repeat, "cached": job.cache_dir is not None,
                      "variant": {"name": job.variant.name,
                                  "static": None if job.variant.static is None else sorted(job.variant.static)}}}
    return header, blobs


def _np(x) -> np.ndarray:
    import torch

    from fpdiff.backends import to_numpy
    return to_numpy(x.detach().cpu()) if isinstance(x, torch.Tensor) else np.asarray(x)


def result_frame(result) -> tuple[dict, dict[str, bytes]]:
    d = {f.name: getattr(result, f.name) for f in fields(result) if f.name not in ("outputs", "repeats")}
    d["notes"] = [n.as_dict() if hasattr(n, "as_dict") else n for n in result.notes]
    arrays = {f"out{i}": a for i, a in enumerate(result.outputs)}
    for r, outs in enumerate(result.repeats):
        arrays.update({f"rep{r}:{i}": a for i, a in enumerate(outs)})
    return {"type": "result", "result": d, "repeats": len(result.repeats)}, {"outputs": pack_arrays(arrays)}


def read_result(header: dict, blobs: dict[str, bytes]):
    from fpdiff.core.compare import Finding
    from fpdiff.runtime.worker import JobResult
    d = dict(expect(header, "result")["result"])
    arrays = unpack_arrays(blobs["outputs"])
    outs = [arrays[f"out{i}"] for i in range(sum(k.startswith("out") for k in arrays))]
    repeats = [[arrays[f"rep{r}:{i}"] for i in range(len(outs))] for r in range(header.get("repeats", 0))]
    d["notes"] = [Finding(**n) if isinstance(n, dict) else n for n in d.get("notes", [])]
    known = {f.name for f in fields(JobResult)}
    return JobResult(**{k: v for k, v in d.items() if k in known}, outputs=outs, repeats=repeats)
