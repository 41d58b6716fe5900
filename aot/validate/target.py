"""`aot.Target`: a board running the validation firmware, driven from Python.

    with aot.Target("mps2-an386", qemu=True, model="kws_int8.tflite") as t:
        outputs, cycles = t.run(x)          # outputs: {name: array}; cycles: the firmware's count

    with aot.Target("nucleo-l4r5zi", port="/dev/ttyACM0", model="kws_int8.tflite") as t: ...

With `qemu=True` the validation firmware of `model` is built (or reused) and one QEMU process
serves every run; with `port=` the board must already run the firmware (`aot project --validate`,
then `make flash`). When `model` is given its compiled library's hash must equal the one the
firmware announces (HELLO), else a firmware of another model would be validated.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from aot.errors import Error, ShapeError
from aot.validate.protocol import Client, LinkError, RunReply

NP_DTYPES = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16, "int32": np.int32,
             "uint32": np.int32, "int64": np.int64, "uint64": np.int64, "float32": np.float32,
             "float64": np.float64, "bool": np.uint8}


class HashMismatch(LinkError):
    """The board runs the validation firmware of another model (or other options)."""


def _load_model(model: Any) -> Any:
    from aot.frontend import load
    from aot.ir import Model
    if model is None or isinstance(model, Model):
        return model
    return load(str(model))


class Target:
    """A board running the validation firmware: `run(inputs) -> (outputs, cycles)`."""

    def __init__(self, board: str, port: str | None = None, qemu: bool = False, model: Any = None, *,
                 baud: int | None = None, backend: str = "c", firmware: "str | Path | None" = None,
                 build_dir: "str | Path | None" = None, timeout: float = 10.0, build: Any = None,
                 **options: Any) -> None:
        from aot.board.boards import load_board
        from aot.validate.firmware import board_with_baud, build_firmware, build_prepared, compile_for_validation
        from aot.validate.transport import QemuTransport, SerialTransport

        if (port is None) == (not qemu):
            raise Error("aot.Target needs one of port=DEVICE (a board running the validation firmware) or qemu=True")
        self.board = board_with_baud(load_board(board), baud)
        if qemu and not self.board.emulated:
            raise Error(f"board {self.board.name} has no emulator: validate it over its serial port (port=...)")
        if isinstance(model, (str, Path)) and Path(model).is_file():
            options.setdefault("source_bytes", Path(model).stat().st_size)  # as `aot validate MODEL` compiles it
        self.model = _load_model(model)
        self.build: Any = build  # a ValidationBuild of the model already compiled: not compiled again
        self.timeout = timeout
        self._transport: Any = None
        self.stack_bytes = 0  # the stack high-water mark the firmware reported last (bytes)
        self.last: RunReply | None = None
        if qemu:
            if firmware is not None:
                elf = Path(firmware)
                if not elf.is_file():
                    raise Error(f"firmware {elf} does not exist")
                if self.model is not None and self.build is None:
                    self.build = compile_for_validation(self.model, self.board, backend, **options)
            elif self.build is not None and self.build.project_dir is not None:
                elf = build_prepared(self.build)
            elif self.model is None:
                raise Error("aot.Target(qemu=True) needs model= (the firmware is built for it) or firmware=ELF")
            else:
                self.build, elf = build_firmware(self.model, self.board, backend, build_dir=build_dir, **options)
            self._transport = QemuTransport(elf, self.board)
        else:
            if self.model is not None and self.build is None:
                self.build = compile_for_validation(self.model, self.board, backend, **options)
            self._transport = SerialTransport(str(port), self.board.console.baud if self.board.console else 115200)
        try:
            self.client = Client(self._transport, timeout)
            self.info = self.client.hello()
            if self.build is not None and self.info.get("hash") != self.build.model_hash:
                raise HashMismatch(
                    f"the board runs the validation firmware of another model: it announces "
                    f"{self.info.get('model')!r} with hash {str(self.info.get('hash'))[:16]}, the model compiled here "
                    f"({self.build.hello['model']!r}, {backend}) has hash {self.build.model_hash[:16]}; rebuild and "
                    f"flash it (aot project MODEL --board {self.board.name} --validate)")
        except BaseException:
            self.close()
            raise
        self.inputs = self.info["inputs"]
        self.outputs = self.info["outputs"]
        self.timer = str(self.info.get("timer", "cycles"))
        self._out_bytes = sum(int(o["bytes"]) for o in self.outputs)

    # ---- runs ----------------------------------------------------------------------------------
    def payload(self, inputs: "np.ndarray | Mapping[str, np.ndarray] | list[np.ndarray]") -> bytes:
        """The RUN request's bytes for one sample; shape and dtype checked (a batch dimension of
        1 may be left out)."""
        if isinstance(inputs, Mapping):
            missing = [t["name"] for t in self.inputs if t["name"] not in inputs]
            if missing:
                raise Error(f"missing input {missing[0]!r}; the model takes {[t['name'] for t in self.inputs]}")
            arrays = [inputs[t["name"]] for t in self.inputs]
        elif isinstance(inputs, (list, tuple)):
            arrays = list(inputs)
        else:
            arrays = [inputs]
        if len(arrays) != len(self.inputs):
            raise Error(f"the model takes {len(self.inputs)} inputs, got {len(arrays)}")
        parts = []
        for t, a in zip(self.inputs, arrays):
            a = np.asarray(a)
            shape = tuple(t["shape"])
            dtype = np.dtype(NP_DTYPES[t["dtype"]])
            if a.shape != shape and not (shape[:1] == (1,) and a.shape == shape[1:]):
                raise ShapeError(f"input {t['name']!r} has shape {a.shape}, the model expects {shape}")
            if a.dtype != dtype:
                raise ShapeError(f"input {t['name']!r} has dtype {a.dtype}, the model expects {t['dtype']}")
            parts.append(np.ascontiguousarray(a).tobytes())
        return b"".join(parts)

    def run_raw(self, payload: bytes, timeout: float | None = None) -> RunReply:
        return self.receive(self.send(payload), timeout)

    def send(self, payload: bytes) -> int:
        """Queue one RUN request (its sequence number for `receive`); a second one in flight lets
        the firmware read it while the host handles the first reply."""
        return self.client.send_run(payload)

    def receive(self, seq: int, timeout: float | None = None) -> RunReply:
        reply = self.client.receive_run(seq, self._out_bytes, timeout)
        self.last = reply
        self.stack_bytes = max(self.stack_bytes, reply.stack_bytes)
        if reply.status != 0:
            raise Error(f"the model returned error {reply.status} on {self.board.name}")
        return reply

    def decode(self, raw: bytes) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        at = 0
        for t in self.outputs:
            n = int(t["bytes"])
            out[t["name"]] = np.frombuffer(raw[at:at + n], dtype=NP_DTYPES[t["dtype"]]).reshape(t["shape"]).copy()
            at += n
        return out

    def run(self, inputs: "np.ndarray | Mapping[str, np.ndarray] | list[np.ndarray]") -> tuple[dict[str, np.ndarray], int]:
        """One inference on the board: (outputs by name, the firmware's count: QEMU instructions
        under QEMU, CPU cycles on hardware; `timer` says which)."""
        reply = self.run_raw(self.payload(inputs))
        return self.decode(reply.outputs), reply.count

    # ---- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def __enter__(self) -> "Target":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
