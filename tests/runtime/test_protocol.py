"""The job protocol's pieces: frames, arrays without pickles, the token handshake, hostile input."""
import io
import socket
import struct
import threading

import ml_dtypes
import numpy as np
import pytest

from fpdiff.runtime import protocol
from fpdiff.runtime.protocol import ProtocolError


def test_frames_and_arrays_round_trip_bfloat16_included():
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16),
              "i": np.array([3, 4], dtype=np.int64)}
    buf = io.BytesIO()
    protocol.send(buf, {"type": "x", "n": 1}, {"data": protocol.pack_arrays(arrays)})
    buf.seek(0)
    header, blobs = protocol.receive(buf)
    back = protocol.unpack_arrays(blobs["data"])
    assert header == {"type": "x", "n": 1}
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype and np.array_equal(back[k].astype(np.float64), a.astype(np.float64))


def test_arrays_never_load_pickles():
    buf = io.BytesIO()
    np.savez(buf, __tags__=np.frombuffer(b"{}", dtype=np.uint8), obj=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        protocol.unpack_arrays(buf.getvalue())


@pytest.mark.parametrize("data, words", [
    (struct.pack("!Q", 1 << 40), "does not speak fpdiff's job protocol"),
    (struct.pack("!Q", 3) + b"{{{", "not JSON"),
    (struct.pack("!Q", 2) + b"[]", "not a JSON object"),
    (struct.pack("!Q", 10) + b"{}", "closed mid-frame"),
    (b"", "the connection closed"),
])
def test_hostile_or_broken_frames_are_refused_with_a_reason(data, words):
    with pytest.raises(ProtocolError, match=words):
        protocol.receive(io.BytesIO(data))


class _Sock:
    def __init__(self, s):
        self.s = s

    def read(self, n):
        return self.s.recv(n)

    def write(self, b):
        self.s.sendall(b)

    def flush(self):
        pass


@pytest.mark.parametrize("client_token, ok", [(b"same", True), (b"other", False)])
def test_the_handshake_needs_the_same_token_on_both_sides(client_token, ok):
    a, b = socket.socketpair()
    errors = {}

    def worker():
        try:
            protocol.authenticate_as_worker(_Sock(b), b"same")
        except ProtocolError as e:
            errors["worker"] = str(e)
        finally:
            b.close()
    t = threading.Thread(target=worker)
    t.start()
    try:
        protocol.authenticate_as_client(_Sock(a), client_token)
    except ProtocolError as e:
        errors["client"] = str(e)
    t.join()
    a.close()
    if ok:
        assert not errors
    else:
        assert "wrong token" in errors["worker"] and "authentication failed" in errors["client"]
