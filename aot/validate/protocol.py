"""The validation firmware's serial protocol (host side): frames, commands, replies.

A frame, in both directions (multi-byte fields little-endian):

    offset  size  field
    0       4     sync word "AOTV" (0x41 0x4F 0x54 0x56)
    4       1     command (requests 0x01 HELLO, 0x02 RUN; a reply is request | 0x80; 0x7F NACK;
                  0x80 BOOT, sent once by the firmware when it starts)
    5       1     sequence number (a reply echoes its request's)
    6       4     payload length N (uint32)
    10      4     CRC-32 of bytes 4..9
    14      N     payload
    14 + N  4     CRC-32 of the payload

CRC-32 is zlib's (IEEE 802.3: reflected polynomial 0xEDB88320, initial value and final xor
0xFFFFFFFF). The firmware's side is aot/board/project/templates/main_validate.c.j2.
"""
from __future__ import annotations

import json
import random
import struct
import time
import zlib
from dataclasses import dataclass
from typing import Any, Protocol

from aot.errors import Error

SYNC = b"AOTV"
HEADER = struct.Struct("<BBII")  # command, sequence, length, header CRC (after the sync word)
HEADER_BYTES = len(SYNC) + HEADER.size
CMD_HELLO = 0x01
CMD_RUN = 0x02
CMD_NACK = 0x7F
REPLY = 0x80
CMD_BOOT = 0x80  # sent once by the firmware when it starts (a reply to no request, sequence 0)
RUN_HEAD = struct.Struct("<iIQ")  # status, stack high-water mark (bytes), timer count
PROTOCOL_VERSION = 1
NACK_REASONS = {1: "bad header CRC", 2: "bad payload CRC", 3: "request too large", 4: "unknown command",
                5: "wrong payload length", 6: "the frame stopped mid-way"}
MAX_REPLY_BYTES = 1 << 26  # a reply longer than this is garbage on the line, not a frame


class LinkError(Error):
    """The line to the board failed: no answer in time, garbage, a reset, a closed connection."""


class Nack(LinkError):
    """The firmware refused a request (bad CRC, too large, unknown command, wrong length)."""

    def __init__(self, reason: int, command: int) -> None:
        self.reason = reason
        self.command = command
        super().__init__(f"the firmware refused command 0x{command:02x}: "
                         f"{NACK_REASONS.get(reason, f'reason {reason}')} (NACK)")


class Transport(Protocol):
    """A byte pipe to the board: the console UART (pyserial) or QEMU's UART socket."""

    def write(self, data: bytes) -> None: ...
    def read(self, size: int, timeout: float) -> bytes: ...  # up to size bytes; b"" on timeout
    def close(self) -> None: ...
    def describe_failure(self) -> str | None: ...  # why the line went dead (QEMU exited), if known


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def encode_frame(command: int, seq: int, payload: bytes = b"") -> bytes:
    head = struct.pack("<BBI", command & 0xFF, seq & 0xFF, len(payload))
    return SYNC + head + struct.pack("<I", crc32(head)) + payload + struct.pack("<I", crc32(payload))


@dataclass(frozen=True)
class Frame:
    command: int
    seq: int
    payload: bytes


@dataclass(frozen=True)
class RunReply:
    status: int
    stack_bytes: int
    count: int  # the timer's count: QEMU instructions, DWT cycles or SysTick cycles (HELLO's "timer")
    outputs: bytes


class FrameReader:
    """Reads frames off a transport: skips bytes until a sync word, checks both CRCs."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._buf = bytearray()
        self.skipped = 0  # bytes before a sync word (noise, a boot banner) since the last frame

    def _fill(self, n: int, deadline: float) -> None:
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            chunk = self.transport.read(max(n - len(self._buf), 4096), min(left, 0.5))
            if chunk:
                self._buf += chunk

    def read_frame(self, timeout: float) -> Frame:
        deadline = time.monotonic() + timeout
        while True:
            self._fill(HEADER_BYTES, deadline)
            at = self._buf.find(SYNC)
            if at < 0:
                keep = len(SYNC) - 1
                self.skipped += len(self._buf) - keep
                del self._buf[:len(self._buf) - keep]
                continue
            if at:
                self.skipped += at
                del self._buf[:at]
                continue
            command, seq, length, hcrc = HEADER.unpack_from(self._buf, len(SYNC))
            if crc32(bytes(self._buf[4:10])) != hcrc or length > MAX_REPLY_BYTES:
                self.skipped += 1
                del self._buf[:1]  # not a frame: look for the next sync word
                continue
            self._fill(HEADER_BYTES + length + 4, deadline)
            payload = bytes(self._buf[HEADER_BYTES:HEADER_BYTES + length])
            (pcrc,) = struct.unpack_from("<I", self._buf, HEADER_BYTES + length)
            if crc32(payload) != pcrc:
                raise LinkError(f"a reply from the board failed its CRC (command 0x{command:02x}, {length} bytes): "
                                f"the line is noisy or the baud rate is wrong")
            del self._buf[:HEADER_BYTES + length + 4]
            self.skipped = 0
            return Frame(command, seq, payload)


class Client:
    """Requests and replies over a transport: HELLO and RUN, each with a timeout."""

    def __init__(self, transport: Transport, timeout: float = 10.0) -> None:
        self.transport = transport
        self.reader = FrameReader(transport)
        self.timeout = timeout
        self._seq = random.randrange(256)  # a late reply to an earlier host's request is not taken for ours
        self._stash: dict[int, Frame] = {}

    def _dead(self, what: str) -> LinkError:
        why = self.transport.describe_failure()
        if why:
            return LinkError(f"{why} while {what}")
        if self.reader.skipped:
            return LinkError(f"garbage on the line while {what}: {self.reader.skipped} bytes that are no frame and "
                             f"no reply within {self.timeout:g} s (wrong baud rate, or another firmware printing?)")
        return LinkError(f"the board did not answer within {self.timeout:g} s while {what} (is the firmware "
                         f"`aot project --validate` flashed, the port and baud right, the board out of reset?)")

    def send(self, command: int, payload: bytes, what: str) -> int:
        """Write one request; its sequence number (for `receive`)."""
        self._seq = (self._seq + 1) & 0xFF
        try:
            self.transport.write(encode_frame(command, self._seq, payload))
        except OSError as e:
            raise LinkError(f"writing to the board failed while {what}: {e}") from None
        return self._seq

    def receive(self, seq: int, command: int, what: str, timeout: float | None = None) -> Frame:
        """The reply to request `seq` (replies to later requests that come first are kept)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            frame = self._stash.pop(seq, None)
            if frame is None:
                try:
                    frame = self.reader.read_frame(max(deadline - time.monotonic(), 0.0))
                except TimeoutError:
                    raise self._dead(what) from None
                except OSError as e:
                    raise LinkError(f"reading from the board failed while {what}: {e}") from None
                if frame.command == CMD_BOOT:
                    if command == CMD_HELLO:
                        continue  # the firmware just started: the HELLO is still to be answered
                    raise LinkError(f"the board reset (its firmware announced a new start) while {what}")
                if frame.seq != seq:
                    if frame.command != CMD_NACK or len(frame.payload) < 2 or frame.payload[1] == command:
                        self._stash[frame.seq] = frame  # a reply to a request still in flight
                    if len(self._stash) > 8:
                        self._stash.pop(next(iter(self._stash)))  # stale replies of abandoned requests
                    continue
            if frame.command == CMD_NACK and len(frame.payload) >= 2:
                raise Nack(frame.payload[0], frame.payload[1])
            if frame.command != (command | REPLY):
                raise LinkError(f"the board answered command 0x{frame.command:02x} to 0x{command:02x} while {what}")
            return frame

    def request(self, command: int, payload: bytes, what: str, timeout: float | None = None) -> Frame:
        return self.receive(self.send(command, payload, what), command, what, timeout)

    def hello(self, attempts: int = 3) -> dict[str, Any]:
        """The firmware's description. A few tries: a partial frame left on the line by an
        earlier host ends in a NACK (a bad CRC, or the firmware's wait for its missing bytes),
        and the next HELLO goes through."""
        last: LinkError | None = None
        for _ in range(attempts):
            try:
                frame = self.request(CMD_HELLO, b"", "waiting for HELLO", self.timeout / attempts)
                break
            except LinkError as e:
                if self.transport.describe_failure():
                    raise
                last = e
        else:
            assert last is not None
            raise last
        try:
            info = json.loads(frame.payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise LinkError("the board's HELLO reply is not the validation firmware's JSON "
                            "(another firmware, or a protocol of another version)") from None
        if not isinstance(info, dict) or info.get("protocol") != PROTOCOL_VERSION:
            raise LinkError(f"the board speaks validation protocol {info.get('protocol') if isinstance(info, dict) else '?'}, "
                            f"this host {PROTOCOL_VERSION}: rebuild the firmware with this microaot")
        return info

    def run(self, payload: bytes, output_bytes: int, timeout: float | None = None) -> RunReply:
        return self.run_reply(self.request(CMD_RUN, payload, "waiting for a RUN reply", timeout), output_bytes)

    def send_run(self, payload: bytes) -> int:
        """Queue a RUN (several may be in flight: the firmware reads the next while the host waits)."""
        return self.send(CMD_RUN, payload, "sending a RUN request")

    def receive_run(self, seq: int, output_bytes: int, timeout: float | None = None) -> RunReply:
        return self.run_reply(self.receive(seq, CMD_RUN, "waiting for a RUN reply", timeout), output_bytes)

    @staticmethod
    def run_reply(frame: Frame, output_bytes: int) -> RunReply:
        if len(frame.payload) != RUN_HEAD.size + output_bytes:
            raise LinkError(f"the board's RUN reply has {len(frame.payload)} bytes, expected "
                            f"{RUN_HEAD.size + output_bytes} (a firmware of another model?)")
        status, stack, count = RUN_HEAD.unpack_from(frame.payload)
        return RunReply(status, stack, count, frame.payload[RUN_HEAD.size:])
