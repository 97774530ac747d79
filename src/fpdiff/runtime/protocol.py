"""The job protocol between fpdiff and a worker in another interpreter or on another machine: JSON headers and
numpy arrays only, never a pickle, so two sides with different torch (or no shared code at all) can talk, and
nothing is parsed before it is authenticated.

A connection opens with a handshake: the worker greets (GREETING: the protocol's magic and version) with a fresh
nonce, the client answers with the HMAC-SHA256 of that nonce under the shared token and its own nonce, the worker
answers the HMAC of the client's. Both then hold a session key, the HMAC of the token over both roles and nonces,
that no earlier or other connection shares. Over TCP the token is the user's; to an interpreter fpdiff spawns
(`--stdio`) fpdiff writes a fresh token first on the child's stdin. The same framing and MACs follow either way.

A frame: its sequence number (8 bytes), the header's length (8) and the number of blobs (4), each blob's size (8
each), the UTF-8 JSON header (`blobs`: the blob names), the blobs raw, then the HMAC-SHA256 under the session key
of the sender's role and everything before it. Each direction counts its frames from 0. The receiver reads the
frame's bytes, checks the MAC and that the number is the next it expects before it parses the header: a frame
altered, forged, dropped, replayed or reordered on the way ends the connection (AuthenticationError).

A conversation: the client sends `hello` with PROTOCOL; the worker answers `hello` with its PROTOCOL, its fpdiff,
Python and torch versions and the declarations of its backends; then for each job the client sends a `files` frame
when the job's model, data or plugins are new to the connection, and a `job` frame naming them by digest, which
the worker answers with one `result` frame (or `error`). `bye` ends it."""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import struct
from pathlib import Path

import numpy as np

PROTOCOL = 3  # 3: a job carries the files beside its model (companions) and the user's converted file
MAGIC = b"fpdiff job protocol\n"
GREETING = MAGIC + struct.pack("!H", PROTOCOL)
MAX_HEADER = 16 << 20  # a header is JSON about one job: megabytes means a foreign or hostile peer
MAX_BLOB = 16 << 30  # weights of a large model; a length beyond this is a corrupt or hostile frame
MAX_BLOBS = 1 << 16
NONCE = TOKEN = MAC = 32
CHUNK = 1 << 20  # bytes read at a time
NUMERIC = "biufc"  # numpy dtype kinds an array blob may have
_SEQ = struct.Struct("!Q")
_HEAD = struct.Struct("!QI")  # header length, number of blobs


class ProtocolError(Exception):
    """The peer broke the protocol (wrong version, bad frame, failed authentication, hung up)."""


class AuthenticationError(ProtocolError):
    """A frame failed its MAC or came out of sequence: altered, forged, dropped, replayed or reordered on the way.
    Nothing of it was parsed; the connection ends. Raised where it was seen, or from the peer's `error` frame."""


class ConnectionClosed(ProtocolError):
    """The peer hung up (between frames, or mid-frame)."""


class PeerError(ProtocolError):
    """The peer answered with an `error` frame: its reason, in its words."""


def read_exact(stream, n: int) -> bytearray:
    """n bytes, in memory that grows only as they arrive (a frame's claimed length is not yet authenticated)."""
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(min(n - len(buf), CHUNK))
        if not chunk:
            raise ConnectionClosed("the connection closed mid-frame" if buf else "the connection closed")
        buf += chunk
    return buf


def _json(x):
    """What a header may carry beyond JSON's own types: numpy scalars and arrays, paths, sets. Anything else is a
    bug in what fpdiff put there, not something to stringify silently."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, os.PathLike):
        return os.fspath(x)
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    raise TypeError(f"a frame header cannot carry {type(x).__name__}: {x!r}"[:300])


def encode(header: dict, blobs: dict[str, bytes] | None = None) -> list[bytes]:
    """A frame's parts without sequence number and MAC: lengths, header, blobs."""
    blobs = blobs or {}
    data = json.dumps({**header, "blobs": list(blobs)}, default=_json).encode()
    sizes = struct.pack(f"!{len(blobs)}Q", *(len(v) for v in blobs.values()))
    return [_HEAD.pack(len(data), len(blobs)) + sizes, data, *blobs.values()]


def _read_parts(stream) -> list[bytes]:
    """A frame's parts as raw bytes, its lengths bounded; nothing in them is parsed."""
    head = read_exact(stream, _HEAD.size)
    n, count = _HEAD.unpack(head)
    if n > MAX_HEADER or count > MAX_BLOBS:
        raise ProtocolError(f"a frame header of {n} bytes and {count} blobs: the peer does not speak fpdiff's job "
                            "protocol")
    sizes_raw = read_exact(stream, 8 * count)
    sizes = struct.unpack(f"!{count}Q", sizes_raw)
    if any(s > MAX_BLOB for s in sizes):
        raise ProtocolError(f"a blob of {max(sizes)} bytes: corrupt frame")
    return [head + sizes_raw, read_exact(stream, n), *(read_exact(stream, s) for s in sizes)]


def decode(parts: list[bytes]) -> tuple[dict, dict[str, bytes]]:
    """(header, blobs) of a frame's parts: the header parsed as JSON, the blobs by the names it lists."""
    try:
        header = json.loads(parts[1])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"the peer sent a header that is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise ProtocolError("the peer sent a header that is not a JSON object")
    names = header.pop("blobs", [])
    if not isinstance(names, list) or len(names) != len(parts) - 2 or not all(isinstance(k, str) for k in names):
        raise ProtocolError("the frame's blob names do not match its blobs")
    return header, dict(zip(names, parts[2:]))


def unpack(data: bytes) -> tuple[dict, dict[str, bytes]]:
    """A frame carried whole as one message (the local worker's pipe): b"".join(encode(...)) read back."""
    stream = io.BytesIO(data)
    parts = _read_parts(stream)
    if stream.tell() != len(data):
        raise ProtocolError("trailing bytes after the frame")
    return decode(parts)


class Channel:
    """One authenticated conversation: every frame carries its sequence number and a MAC under the session key,
    checked before anything of it is parsed."""

    def __init__(self, stream, key: bytes, role: str) -> None:
        self.stream, self._key = stream, key
        self.role, self.peer = role, "worker" if role == "client" else "client"
        self.sent = self.received = 0
        self._broken: str | None = None

    def _mac(self, role: str, parts: list[bytes]) -> bytes:
        h = hmac.new(self._key, role.encode() + b"\0", hashlib.sha256)
        for p in parts:
            h.update(p)
        return h.digest()

    def send(self, header: dict, blobs: dict[str, bytes] | None = None) -> None:
        self.send_encoded(encode(header, blobs))

    def send_encoded(self, frame: list[bytes]) -> None:
        """Send a frame's parts from `encode`."""
        parts = [_SEQ.pack(self.sent), *frame]
        for p in (*parts, self._mac(self.role, parts)):
            self.stream.write(p)
        self.stream.flush()
        self.sent += 1

    def receive(self) -> tuple[dict, dict[str, bytes]]:
        if self._broken:
            raise AuthenticationError(self._broken)
        seq = read_exact(self.stream, _SEQ.size)
        try:
            parts = [seq, *_read_parts(self.stream)]
        except ConnectionClosed:
            raise
        except ProtocolError as e:  # lengths no frame has: altered on the way, like a frame that fails its MAC
            self._fail(f"authentication failed: the {self.peer}'s frame {self.received} cannot be read ({e})")
        mac = read_exact(self.stream, MAC)
        if not hmac.compare_digest(mac, self._mac(self.peer, parts)):
            self._fail(f"authentication failed: the {self.peer}'s frame {self.received} carries no valid MAC "
                       "(altered or forged on the way)")
        (n,) = _SEQ.unpack(seq)
        if n != self.received:
            why = ("replayed" if n < self.received else
                   f"frame {self.received} was dropped or the frames were reordered on the way")
            self._fail(f"authentication failed: the {self.peer}'s frame {n} came where frame {self.received} "
                       f"was due ({why})")
        self.received += 1
        return decode(parts[1:])

    def _fail(self, why: str) -> None:
        self._broken = why
        raise AuthenticationError(why)


def expect(header: dict, kind: str) -> dict:
    if header.get("type") == "error":
        why = str(header.get("message") or "the worker refused")
        raise AuthenticationError(why) if header.get("cause") == "authentication" else PeerError(why)
    if header.get("type") != kind:
        raise ProtocolError(f"expected a {kind!r} frame, got {header.get('type')!r}")
    return header


# Mutual authentication on a shared token: each side proves it holds the token by the HMAC of the other's fresh
# nonce; the roles are in the MAC so a reflected answer does not pass.
def _proof(token: bytes, role: bytes, nonce: bytes) -> bytes:
    return hmac.new(token, role + nonce, hashlib.sha256).digest()


def _session_key(token: bytes, worker_nonce: bytes, client_nonce: bytes) -> bytes:
    return hmac.new(token, b"fpdiff session\0worker" + worker_nonce + b"client" + client_nonce,
                    hashlib.sha256).digest()


def authenticate_as_client(stream, token: bytes) -> Channel:
    magic = read_exact(stream, len(MAGIC))
    if magic != MAGIC:
        raise ProtocolError(f"the peer does not greet as an fpdiff worker of job protocol {PROTOCOL} (an older "
                            "fpdiff, or not fpdiff): install the same fpdiff on both sides")
    (version,) = struct.unpack("!H", read_exact(stream, 2))
    if version != PROTOCOL:
        raise ProtocolError(f"the worker speaks fpdiff job protocol {version}, this fpdiff {PROTOCOL}: install the "
                            "same fpdiff on both sides")
    theirs = read_exact(stream, NONCE)
    ours = os.urandom(NONCE)
    stream.write(_proof(token, b"client", theirs) + ours)
    stream.flush()
    try:
        answer = read_exact(stream, MAC)
    except ConnectionClosed:
        raise ProtocolError("authentication failed: the worker closed the connection (wrong token?)") from None
    if not hmac.compare_digest(answer, _proof(token, b"worker", ours)):
        raise ProtocolError("authentication failed: the worker does not hold our token")
    return Channel(stream, _session_key(token, theirs, ours), "client")


def authenticate_as_worker(stream, token: bytes) -> Channel:
    ours = os.urandom(NONCE)
    stream.write(GREETING + ours)
    stream.flush()
    answer = read_exact(stream, MAC)
    theirs = read_exact(stream, NONCE)
    if not hmac.compare_digest(answer, _proof(token, b"client", ours)):
        raise ProtocolError("authentication failed: wrong token")
    stream.write(_proof(token, b"worker", theirs))
    stream.flush()
    return Channel(stream, _session_key(token, ours, theirs), "worker")


# Arrays: each one blob of its raw bytes, its dtype (with byte order) and shape in the header; numeric dtypes only,
# so nothing can carry a pickle. bfloat16 (no numpy dtype) travels as its 16-bit pattern under its own name.
def array_blobs(arrays: dict[str, np.ndarray]) -> tuple[dict[str, list], dict[str, memoryview]]:
    """(header entry: name -> [dtype, shape], blobs: name -> raw bytes) of some arrays."""
    meta, blobs = {}, {}
    for k, a in arrays.items():
        a = np.asarray(a)
        if a.dtype.name == "bfloat16":
            meta[k], a = ["bfloat16", list(a.shape)], a.view(np.uint16)
        elif a.dtype.kind in NUMERIC:
            meta[k] = [a.dtype.str, list(a.shape)]
        else:
            raise TypeError(f"array {k!r} of dtype {a.dtype}: a frame carries numeric arrays only")
        blobs[k] = memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return meta, blobs


def read_arrays(meta: dict, blobs: dict[str, bytes]) -> dict[str, np.ndarray]:
    """The arrays `array_blobs` sent, writable; a dtype that is not numeric or a size that does not match is the
    peer's error."""
    out = {}
    for k, (name, shape) in meta.items():
        if name == "bfloat16":
            import ml_dtypes
            dtype = np.dtype(ml_dtypes.bfloat16)
        else:
            dtype = np.dtype(str(name))
            if dtype.kind not in NUMERIC or dtype.hasobject:
                raise ProtocolError(f"array {k!r} of dtype {name!r}: a frame carries numeric arrays only")
        shape = tuple(int(d) for d in shape)
        buf = blobs[k]
        if len(buf) != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            raise ProtocolError(f"array {k!r}: {len(buf)} bytes for {name} {list(shape)}")
        a = np.frombuffer(buf, dtype=dtype).reshape(shape)
        out[k] = a if a.flags.writeable else a.copy()
    return out


def job_frames(job, timeout: float, backend: str, sent: dict,
               same_machine: bool = False) -> list[tuple[dict, dict[str, bytes]]]:
    """A Job as frames: a `files` frame with the model file, the saved data as arrays and the plugin files, when
    this connection has not carried them yet (`sent` remembers), then the `job` frame naming them by digest with
    the job's fields as JSON. `backend` is the name the worker knows it by (`ort` for a local `ort@1.20`).
    `same_machine`: a worker in another interpreter here, which uses the job's own cache folder (a remote worker
    keeps its own cache)."""
    artifact = getattr(job, "artifact", None)
    key = (job.source.path, job.data_path, job.plugins, artifact)
    frames = []
    if key not in sent:
        from fpdiff.runtime import jobdata
        from fpdiff.sources.base import digest
        data = jobdata.read(job.data_path)
        arrays = {f"input{i}": _np(x) for i, x in enumerate(data["inputs"])}
        arrays.update({f"state:{k}": _np(v) for k, v in (data.get("state") or {}).items()})
        calibration = data.get("calibration") or []  # a quantized cell's calibration inputs, tuple by tuple
        arrays.update({f"calibration{i}:{j}": _np(x) for i, c in enumerate(calibration) for j, x in enumerate(c)})
        meta, blobs = array_blobs(arrays)
        blobs.update({"model": Path(job.source.path).read_bytes()})
        for i, p in enumerate(job.plugins):
            blobs[f"plugin{i}"] = Path(p).read_bytes()
        mates = companions(Path(job.source.path))
        for i, c in enumerate(mates):
            blobs[f"companion{i}"] = c.read_bytes()
        beside = companions(Path(artifact)) if artifact else []
        if artifact:
            blobs["artifact"] = _artifact_bytes(Path(artifact))
            for i, c in enumerate(beside):
                blobs[f"artifact_companion{i}"] = c.read_bytes()
        sent[key] = digest(*blobs.values())
        frames.append(({"type": "files", "files": sent[key], "model": Path(job.source.path).name, "arrays": meta,
                        "data": {"fingerprint": data["fingerprint"], "input_names": data["input_names"],
                                 "inputs": len(data["inputs"]), "state": "state" in data,
                                 "calibration": [len(c) for c in calibration]},
                        "plugins": [Path(p).name for p in job.plugins], "companions": [c.name for c in mates],
                        "artifact": Path(artifact).name if artifact else None,
                        "artifact_folder": bool(artifact) and Path(artifact).is_dir(),
                        "artifact_companions": [c.name for c in beside]}, blobs))
    frames.append(({"type": "job", "files": sent[key], "timeout": timeout, "backend": backend,
                    "source": {"kind": job.source.kind, "label": job.source.label},
                    "job": {"precision": job.precision.name, "device": job.device, "flags": list(job.flags),
                            "seed": job.seed, "repeat": job.repeat, "cached": job.cache_dir is not None,
                            "cache_dir": job.cache_dir if same_machine else None,
                            "mode": job.mode, "artifact": bool(artifact),
                            "variant": {"name": job.variant.name, "static": None if job.variant.static is None
                                        else sorted(job.variant.static)}}}, {}))
    return frames


# the files beside a model that travel with it: an ONNX model's external data (model.onnx.data), the weights and
# sample a spec loads from its own folder (an op case's sin_0.pt beside sin_0.py); anything larger stays behind
COMPANION_BYTES = 1 << 30


def companions(model: Path) -> list[Path]:
    """Files beside the model that share its stem (`model.*`), which a model file refers to by name."""
    if not model.parent.is_dir():
        return []
    return sorted(p for p in model.parent.glob(f"{model.stem}.*") if p != model and p.is_file()
                  and p.stat().st_size <= COMPANION_BYTES)


def _artifact_bytes(path: Path) -> bytes:
    """A converted file as one blob; a folder (an .mlpackage) as a zip of its tree."""
    if path.is_file():
        return path.read_bytes()
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(path.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(path).as_posix())
    return buf.getvalue()


def _np(x) -> np.ndarray:
    import torch

    from fpdiff.backends import to_numpy
    return to_numpy(x.detach().cpu()) if isinstance(x, torch.Tensor) else np.asarray(x)
