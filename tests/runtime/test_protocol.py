"""The job protocol's pieces: frames, arrays without pickles, the token handshake, every frame authenticated, hostile
input."""
import io
import socket
import struct
import threading

import ml_dtypes
import numpy as np
import pytest

from fpdiff.core.compare import Finding
from fpdiff.core.status import Status
from fpdiff.runtime import protocol, worker
from fpdiff.runtime.protocol import AuthenticationError, ProtocolError


class _Sock:
    def __init__(self, s):
        self.s = s

    def read(self, n):
        return self.s.recv(n)

    def write(self, b):
        self.s.sendall(b)

    def flush(self):
        pass


def connected(client_token=b"same", worker_token=b"same"):
    """(client channel, worker channel, errors) over a socket pair, after the real handshake."""
    a, b = socket.socketpair()
    out = {}

    def serve():
        try:
            out["worker"] = protocol.authenticate_as_worker(_Sock(b), worker_token)
        except ProtocolError as e:
            out["worker error"] = str(e)
            b.close()
    t = threading.Thread(target=serve)
    t.start()
    try:
        out["client"] = protocol.authenticate_as_client(_Sock(a), client_token)
    except ProtocolError as e:
        out["client error"] = str(e)
    t.join()
    return out


class _Tape:
    """A stream that records what is written, frame by frame, and replays what a test lays down."""

    def __init__(self):
        self.frames: list[bytes] = []
        self.pending = b""
        self.incoming = io.BytesIO()

    def write(self, b):
        self.pending += b

    def flush(self):
        self.frames.append(self.pending)
        self.pending = b""

    def read(self, n):
        return self.incoming.read(n)

    def lay(self, *frames):
        self.incoming = io.BytesIO(b"".join(frames))


def tape_pair(key=b"k" * 32):
    """(sending channel, its tape, receiving channel, its tape): a worker talking to a client under one key."""
    out, inp = _Tape(), _Tape()
    return protocol.Channel(out, key, "worker"), out, protocol.Channel(inp, key, "client"), inp


def test_frames_and_arrays_round_trip_bfloat16_included():
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16),
              "i": np.array([3, 4], dtype=np.int64)}
    arrays["scalar"] = np.float64(2.5)
    arrays["big-endian"] = np.array([1.0, 2.0], dtype=">f4")
    arrays["strided"] = np.arange(12.0).reshape(3, 4)[:, ::2]
    c = connected()
    meta, blobs = protocol.array_blobs(arrays)
    c["worker"].send({"type": "x", "n": 1, "arrays": meta}, blobs)
    header, blobs = c["client"].receive()
    back = protocol.read_arrays(header.pop("arrays"), blobs)
    assert header == {"type": "x", "n": 1}
    for k, a in arrays.items():
        a = np.asarray(a)
        assert back[k].dtype == a.dtype and back[k].shape == a.shape and back[k].flags.writeable
        assert np.array_equal(back[k].astype(np.float64), a.astype(np.float64))


@pytest.mark.parametrize("meta, words", [
    ({"x": ["|O", [1]]}, "numeric arrays only"),  # a pickle would hide in an object array
    ({"x": ["<f8", [3]]}, "8 bytes for <f8 \\[3\\]"),
])
def test_arrays_are_numeric_and_their_sizes_match(meta, words):
    with pytest.raises(ProtocolError, match=words):
        protocol.read_arrays(meta, {"x": bytearray(8)})
    with pytest.raises(TypeError, match="numeric arrays only"):
        protocol.array_blobs({"x": np.array([{"x": 1}], dtype=object)})


@pytest.mark.parametrize("data, words", [
    (struct.pack("!QI", 1 << 40, 0), "does not speak fpdiff's job protocol"),
    (struct.pack("!QI", 2, 1) + struct.pack("!Q", 1 << 40), "corrupt frame"),
    (struct.pack("!QI", 3, 0) + b"{{{", "not JSON"),
    (struct.pack("!QI", 2, 0) + b"[]", "not a JSON object"),
    (struct.pack("!QI", 16, 0) + b'{"blobs": ["a"]}', "blob names do not match"),
    (struct.pack("!QI", 10, 0) + b"{}", "closed mid-frame"),
    (b"", "the connection closed"),
])
def test_hostile_or_broken_frames_are_refused_with_a_reason(data, words):
    with pytest.raises(ProtocolError, match=words):
        protocol.unpack(data)


@pytest.mark.parametrize("client_token, ok", [(b"same", True), (b"other", False)])
def test_the_handshake_needs_the_same_token_on_both_sides(client_token, ok):
    c = connected(client_token)
    if ok:
        assert "client error" not in c and "worker error" not in c
    else:
        assert "wrong token" in c["worker error"] and "authentication failed" in c["client error"]


@pytest.mark.parametrize("greeting, words", [
    (protocol.MAGIC + struct.pack("!H", 999), "speaks fpdiff job protocol 999"),
    (b"\x01" * 64, "does not greet as an fpdiff worker"),  # an older fpdiff: its nonce first, no greeting
])
def test_a_worker_of_another_protocol_is_named_before_any_secret_is_sent(greeting, words):
    stream = _Tape()
    stream.lay(greeting + b"\0" * protocol.NONCE)
    with pytest.raises(ProtocolError, match=words):
        protocol.authenticate_as_client(stream, b"token")
    assert not stream.frames and not stream.pending  # no proof of the token went out


def frames(n=3):
    sender, out, receiver, inp = tape_pair()
    for i in range(n):
        sender.send({"type": "job", "i": i}, {"plugin0": b"open('marker', 'w')"})
    return out.frames, receiver, inp


def test_frames_in_order_pass_and_each_carries_its_number():
    sent, receiver, inp = frames()
    inp.lay(*sent)
    assert [receiver.receive()[0]["i"] for _ in sent] == [0, 1, 2]


def _altered(frame: bytes, at: int) -> bytes:
    return frame[:at] + bytes([frame[at] ^ 1]) + frame[at + 1:]


@pytest.mark.parametrize("change, words", [
    (lambda f: [_altered(f[0], len(f[0]) // 2), *f[1:]], "frame 0 carries no valid MAC"),  # a header byte
    (lambda f: [_altered(f[0], len(f[0]) - 40), *f[1:]], "frame 0 carries no valid MAC"),  # a blob byte
    (lambda f: [_altered(f[0], len(f[0]) - 1), *f[1:]], "frame 0 carries no valid MAC"),  # the MAC itself
    (lambda f: [f[0], f[2]], "frame 2 came where frame 1 was due .frame 1 was dropped"),
    (lambda f: [f[0], f[0]], "frame 0 came where frame 1 was due .replayed"),
    (lambda f: [f[1], f[0]], "frame 1 came where frame 0 was due .frame 0 was dropped or the frames were reordered"),
])
def test_a_frame_altered_dropped_replayed_or_reordered_is_refused_and_nothing_after_it_is_read(change, words):
    sent, receiver, inp = frames()
    inp.lay(*change(sent))
    with pytest.raises(AuthenticationError, match=f"authentication failed: the worker's {words}") as first:
        while True:
            receiver.receive()
    inp.lay(*sent)  # even the right frames now: the connection is over
    with pytest.raises(AuthenticationError) as again:
        receiver.receive()
    assert str(again.value) == str(first.value)


def test_a_frame_forged_without_the_key_or_reflected_back_is_refused():
    forger, out, _, _ = tape_pair(key=b"x" * 32)  # right format, right numbers, wrong key
    forger.send({"type": "job"}, {"plugin0": b"open('marker', 'w')"})
    _, _, receiver, inp = tape_pair()
    inp.lay(out.frames[0])
    with pytest.raises(AuthenticationError, match="no valid MAC"):
        receiver.receive()
    client_out = _Tape()  # the client's own frame sent back to it: the sender's role is in the MAC
    protocol.Channel(client_out, b"k" * 32, "client").send({"type": "result"})
    _, _, receiver, inp = tape_pair()
    inp.lay(client_out.frames[0])
    with pytest.raises(AuthenticationError, match="no valid MAC"):
        receiver.receive()


def test_a_frame_of_one_connection_does_not_pass_on_another():
    """Fresh nonces on both sides: the same token gives every connection its own session key."""
    one, two = connected(), connected()
    tape = _Tape()
    one["client"].stream, keep = tape, one["client"].stream
    one["client"].send({"type": "job"})
    two["worker"].stream = _Tape()
    two["worker"].stream.lay(tape.frames[0])
    with pytest.raises(AuthenticationError, match="no valid MAC"):
        two["worker"].receive()
    one["client"].stream = keep


def test_a_broken_length_is_an_authentication_failure_not_a_silent_hang_up():
    sent, receiver, inp = frames(1)
    inp.lay(sent[0][:8] + struct.pack("!QI", 1 << 40, 0) + sent[0][20:])
    with pytest.raises(AuthenticationError, match="frame 0 cannot be read"):
        receiver.receive()


def test_a_result_means_the_same_after_its_encoding():
    """One encoding for local and remote results: every field, outputs and repeats as they were."""
    out = [np.arange(4, dtype=np.float64), np.array([1, 2], dtype=np.int64),
           np.array([0.5], dtype=ml_dtypes.bfloat16)]
    r = worker.JobResult(Status.OK, out, ["float32", "int64", "bfloat16"], "float16",
                         [Finding("dtype-changed", "ran fp32", op="MatMul")], {"op_dtypes": {"float16": np.int64(3)}},
                         prepare_s=0.5, run_s=0.25, repeats=[out], output_names=["a", "b", "c"], run_times=[0.25])
    back = worker.read_result(*protocol.unpack(b"".join(worker.encoded(r))))
    assert back.status is Status.OK and back.notes == r.notes and back.info == {"op_dtypes": {"float16": 3}}
    assert back.output_names == ["a", "b", "c"] and back.run_times == [0.25] and back.computed_dtype == "float16"
    for a, b in zip([*back.outputs, *back.repeats[0]], out + out):
        assert a.dtype == b.dtype and np.array_equal(a.astype(np.float64), b.astype(np.float64))


def test_a_result_fpdiff_cannot_encode_is_its_own_internal_error():
    r = worker.JobResult(Status.OK, info={"handle": object()})
    back = worker.read_result(*protocol.unpack(b"".join(worker.encoded(r))))
    assert back.status is Status.ERROR and back.component == worker.INTERNAL and "cannot carry object" in back.message
