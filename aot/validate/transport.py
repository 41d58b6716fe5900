"""Byte pipes to a board running the validation firmware: a serial port (pyserial) or one QEMU
process whose console UART listens on a loopback TCP socket."""
from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aot.board.boards import Board
from aot.errors import Error, ToolchainError
from aot.validate.protocol import LinkError


class SerialTransport:
    """The board's console UART through pyserial (`pip install microaot[validate]`)."""

    def __init__(self, port: str, baud: int) -> None:
        try:
            import serial  # type: ignore[import-not-found]
        except ImportError:
            raise Error("talking to a board over a serial port needs pyserial: pip install pyserial "
                        "(or pip install 'microaot[validate]')") from None
        if not port.startswith(("socket://", "rfc2217://", "loop://")) and not os.path.exists(port):
            raise LinkError(f"serial port {port} does not exist (plug the board in; on Linux it is usually "
                            f"/dev/ttyACM0 or /dev/ttyUSB0)")
        try:
            self._serial = serial.serial_for_url(port, baudrate=baud, timeout=0.5, write_timeout=5)
        except (serial.SerialException, OSError, ValueError) as e:
            raise LinkError(f"cannot open serial port {port}: {e}") from None
        self.port = port

    def write(self, data: bytes) -> None:
        self._serial.write(data)
        self._serial.flush()

    def read(self, size: int, timeout: float) -> bytes:
        self._serial.timeout = max(timeout, 0.0)
        first = self._serial.read(1)
        if not first:
            return b""
        waiting = min(self._serial.in_waiting, size - 1)
        return first + (self._serial.read(waiting) if waiting > 0 else b"")

    def describe_failure(self) -> str | None:
        return None

    def close(self) -> None:
        self._serial.close()


def qemu_validate_command(elf: Path, board: Board, port: int) -> list[str]:
    """QEMU for the validation firmware: the board's arguments (deterministic -icount), no
    monitor or display, the console UART on a loopback TCP server that waits for the host."""
    if not board.emulated:
        raise Error(f"board {board.name} has no emulator: validate it over its serial port (--port)")
    qemu = shutil.which("qemu-system-arm")
    if qemu is None:
        raise ToolchainError("qemu-system-arm not found on PATH; install QEMU (Debian: qemu-system-arm)")
    args: list[str] = []
    for a in board.qemu_args():
        args += ["-display", "none", "-monitor", "none"] if a == "-nographic" else [a]
    return [qemu, *args, "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on", "-kernel", str(elf)]


def _die_with_parent() -> None:
    """In the QEMU child before exec: SIGKILL when the host process dies (Linux), so that a killed
    host never leaves an emulated board spinning."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class QemuTransport:
    """One QEMU process for every request; its UART on a loopback TCP socket."""

    def __init__(self, elf: Path, board: Board, start_timeout: float = 20.0) -> None:
        self.board = board
        self._log = tempfile.TemporaryFile()
        self._sock: socket.socket | None = None
        self.proc: subprocess.Popen | None = None
        for _ in range(3):
            port = _free_port()
            self.proc = subprocess.Popen(qemu_validate_command(Path(elf), board, port), stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
            deadline = time.monotonic() + start_timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    self._sock = socket.create_connection(("127.0.0.1", port), timeout=1.0)
                    break
                except OSError:
                    time.sleep(0.05)
            if self._sock is not None:
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return
            said = self._said()
            self._kill()
            if "Address already in use" not in said:
                raise LinkError(f"QEMU ({board.qemu_machine}) did not start within {start_timeout:g} s: "
                                f"{said or 'no message'}")
        raise LinkError("QEMU could not listen on a loopback TCP port (three ports were taken)")

    def _said(self) -> str:
        self._log.seek(0)
        text = self._log.read().decode("utf-8", "replace").strip()
        return " ".join(text.split())[-400:]

    def write(self, data: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(data)
        except OSError:
            raise LinkError(self.describe_failure() or "the connection to QEMU closed") from None

    def read(self, size: int, timeout: float) -> bytes:
        assert self._sock is not None
        ready, _, _ = select.select([self._sock], [], [], max(timeout, 0.0))
        if not ready:
            return b""
        try:
            data = self._sock.recv(size)
        except OSError:
            data = b""
        if not data:
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    pass
            raise LinkError(self.describe_failure() or "QEMU closed the UART's connection")
        return data

    def describe_failure(self) -> str | None:
        if self.proc is None or self.proc.poll() is None:
            return None
        rc = self.proc.returncode
        how = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
        said = self._said()
        return f"QEMU ({self.board.qemu_machine}) ended ({how}{'; it said: ' + said if said else ''})"

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._kill()
        self._log.close()
