"""The validation firmware's protocol: frames with CRCs, NACK and resynchronisation on corrupted,
truncated and oversized requests, the model hash of HELLO, a killed QEMU, a bad line; every case
ends with the expected error within a deadline set in the test itself."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aot  # noqa: E402
from aot.board.boards import load_board  # noqa: E402
from aot.validate.firmware import build_firmware  # noqa: E402
from aot.validate.protocol import (CMD_HELLO, CMD_NACK, CMD_RUN, HEADER_BYTES, Client, FrameReader, LinkError,  # noqa: E402
                                   Nack, encode_frame)
from aot.validate.run import host_runner  # noqa: E402
from aot.validate.target import HashMismatch, Target  # noqa: E402
from aot.validate.transport import QemuTransport, SerialTransport  # noqa: E402
from conftest import shared_model  # noqa: E402

BOARD = "mps2-an386"
ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail the test (TimeoutError) if its body takes longer: no test here may hang."""
    def expired(signum, frame):  # noqa: ANN001, ANN202
        raise TimeoutError(f"no answer within the test's {seconds} s deadline")
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ---- frames without a board ------------------------------------------------------------------------
class FakeLine:
    """A transport that answers with canned bytes."""

    def __init__(self, replies: bytes = b"") -> None:
        self.incoming = bytearray(replies)
        self.sent = bytearray()

    def write(self, data: bytes) -> None:
        self.sent += data

    def read(self, size: int, timeout: float) -> bytes:
        out = bytes(self.incoming[:size])
        del self.incoming[:size]
        return out

    def close(self) -> None:
        pass

    def describe_failure(self) -> None:
        return None


def test_frame_layout_is_the_documented_one():
    frame = encode_frame(CMD_RUN, 7, b"\x01\x02\x03")
    assert frame[:4] == b"AOTV" and frame[4] == CMD_RUN and frame[5] == 7
    assert struct.unpack_from("<I", frame, 6)[0] == 3
    assert struct.unpack_from("<I", frame, 10)[0] == zlib.crc32(frame[4:10])
    assert frame[14:17] == b"\x01\x02\x03" and struct.unpack_from("<I", frame, 17)[0] == zlib.crc32(b"\x01\x02\x03")
    assert len(frame) == HEADER_BYTES + 3 + 4


def test_reader_skips_noise_and_reads_the_frame_after_it():
    line = FakeLine(b"boot banner AOT" + encode_frame(0x81, 1, b'{"protocol": 1}'))
    frame = FrameReader(line).read_frame(1.0)
    assert frame.command == 0x81 and frame.payload == b'{"protocol": 1}'


def test_garbage_on_the_line_is_one_clear_error():
    rng = np.random.default_rng(0)
    line = FakeLine(rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    with deadline(10), pytest.raises(LinkError, match="garbage on the line"):
        Client(line, timeout=0.5).hello()


def test_a_reset_mid_run_is_reported():
    line = FakeLine(encode_frame(0x80, 0))  # BOOT: the firmware started again
    with deadline(10), pytest.raises(LinkError, match="reset"):
        Client(line, timeout=1.0).run(b"\0" * 4, 4)


def test_the_serial_transport_carries_frames():
    line = SerialTransport("loop://", 921600)  # pyserial's loopback: what is written comes back
    try:
        line.write(b"noise" + encode_frame(0x81, 3, b"{}"))
        frame = FrameReader(line).read_frame(5.0)
        assert (frame.command, frame.seq, frame.payload) == (0x81, 3, b"{}")
        assert line.read(16, 0.05) == b""
    finally:
        line.close()


def test_a_port_that_does_not_exist_is_refused():
    with pytest.raises(LinkError, match="does not exist"):
        SerialTransport("/dev/ttyACM_no_such_port", 115200)


# ---- the firmware in QEMU --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kws() -> aot.ir.Model:
    return aot.load(str(shared_model("kws_int8.tflite")))


@pytest.fixture(scope="module")
def firmware(kws, tmp_path_factory, arm_toolchain):  # noqa: ANN001, ANN201
    path = shared_model("kws_int8.tflite")  # compiled as `aot validate` compiles a model file
    vb, elf = build_firmware(kws, BOARD, "c", build_dir=tmp_path_factory.mktemp("fw") / "kws",
                             source_bytes=path.stat().st_size)
    return vb, elf


@pytest.fixture()
def line(firmware):  # noqa: ANN001, ANN201
    vb, elf = firmware
    t = QemuTransport(elf, vb.board)
    yield t
    t.close()


def _sample(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (1, 49, 10, 1), dtype=np.int8)


def _host(vb, x):  # noqa: ANN001, ANN202
    return host_runner(vb.compiled)([x[None]])[0][0].tobytes()


def test_hello_describes_the_model_and_a_run_is_bit_exact(firmware, line):  # noqa: ANN001
    vb, _ = firmware
    with deadline(60):
        c = Client(line)
        info = c.hello()
        assert info["hash"] == vb.model_hash and info["model"] == "kws_int8"
        assert info["inputs"][0]["shape"] == [1, 49, 10, 1] and info["inputs"][0]["dtype"] == "int8"
        assert info["inputs"][0]["zero_point"] == vb.compiled.model.inputs[0].type.quant.zero_point[0]
        assert info["timer"] == "qemu-instructions"
        x = _sample(1)
        r = c.run(x.tobytes(), 12)
        assert r.status == 0 and r.outputs == _host(vb, x)
        assert r.count > 100_000  # QEMU instructions of one inference
        assert 64 < r.stack_bytes < vb.board.stack_bytes


def test_the_firmware_links_no_heap_and_no_semihosting(firmware):  # noqa: ANN001
    from elftools.elf.elffile import ELFFile
    _, elf = firmware
    with open(elf, "rb") as fh:
        names = {s.name for s in ELFFile(fh).get_section_by_name(".symtab").iter_symbols()}
    assert not names & {"malloc", "free", "_sbrk", "_malloc_r", "initialise_monitor_handles", "_swiwrite"}
    assert {"aot_console_read", "aot_console_write_raw"} <= names


def _raw_reply(line, frame: bytes):  # noqa: ANN001, ANN202
    line.write(frame)
    return FrameReader(line).read_frame(20.0)


def test_corrupted_frames_are_refused_and_the_next_request_is_answered(firmware, line):  # noqa: ANN001
    vb, _ = firmware
    x = _sample(2)
    with deadline(60):
        Client(line).hello()
        good = bytearray(encode_frame(CMD_RUN, 5, x.tobytes()))
        bad_header = bytearray(good)
        bad_header[7] ^= 0x01  # the length
        nack = _raw_reply(line, bytes(bad_header))
        assert nack.command == CMD_NACK and nack.payload[0] == 1  # bad header CRC
        bad_payload = bytearray(good)
        bad_payload[HEADER_BYTES + 100] ^= 0x40
        nack = _raw_reply(line, bytes(bad_payload))
        assert nack.command == CMD_NACK and nack.payload[0] == 2 and nack.seq == 5  # bad payload CRC
        unknown = _raw_reply(line, encode_frame(0x33, 6))
        assert unknown.command == CMD_NACK and unknown.payload[:2] == bytes([4, 0x33])
        r = Client(line).run(x.tobytes(), 12)  # resynchronised: the same sample, right this time
        assert r.outputs == _host(vb, x)


def test_a_truncated_frame_costs_one_nack_then_hello_goes_through(firmware, line):  # noqa: ANN001
    vb, _ = firmware
    with deadline(60):
        c = Client(line)
        c.hello()
        line.write(encode_frame(CMD_RUN, 9, _sample(3).tobytes())[:200])  # the host died mid-frame
        info = c.hello()  # its bytes complete the payload, fail the CRC (NACK), the retry is answered
        assert info["hash"] == vb.model_hash


def test_a_frame_that_stops_is_refused_after_the_quiet_time(firmware, line):  # noqa: ANN001
    """The firmware sleeps between bytes (WFI on the UART's receive interrupt): its quiet-time limit
    inside a frame still ends a frame whose host went silent, with NACK 6."""
    vb, _ = firmware
    assert vb.board.console.rx_irqs  # the sleeping receive loop is the one under test
    x = _sample(8)
    with deadline(60):
        Client(line).hello()
        t0 = time.monotonic()
        nack = _raw_reply(line, encode_frame(CMD_RUN, 21, x.tobytes())[:120])
        assert nack.command == CMD_NACK and nack.payload[:2] == bytes([6, CMD_RUN]) and nack.seq == 21
        assert 0.3 < time.monotonic() - t0 < 15
        assert Client(line).run(x.tobytes(), 12).outputs == _host(vb, x)


@pytest.mark.slow
def test_the_model_is_compiled_once(tmp_path, monkeypatch):  # noqa: ANN001
    import aot.validate.firmware as fw
    from aot.cli import main
    calls = []
    compile_for_board = fw._compile_for_board
    monkeypatch.setattr(fw, "_compile_for_board", lambda *a, **k: calls.append(1) or compile_for_board(*a, **k))
    np.save(tmp_path / "x.npy", np.zeros((2, 49, 10, 1), np.int8))
    with deadline(120):
        rc = main(["validate", str(shared_model("kws_int8.tflite")), "--board", BOARD, "--port",
                   "/dev/ttyACM_no_such_port", "--data", str(tmp_path / "x.npy")])
    assert rc == 2 and len(calls) == 1


def test_jobs_need_qemu(tmp_path, capsys):  # noqa: ANN001
    from aot.cli import main
    np.save(tmp_path / "x.npy", np.zeros((2, 49, 10, 1), np.int8))
    rc = main(["validate", str(shared_model("kws_int8.tflite")), "--board", BOARD, "--port", "/dev/ttyACM0",
               "--jobs", "2", "--data", str(tmp_path / "x.npy")])
    assert rc == 2 and "--jobs 2 needs --qemu" in capsys.readouterr().err


def test_an_oversized_request_is_refused_from_its_header(firmware, line):  # noqa: ANN001
    vb, _ = firmware
    x = _sample(4)
    with deadline(60):
        Client(line).hello()
        for length in (491, 1 << 20, 0xFFFFFFFF):
            head = struct.pack("<BBI", CMD_RUN, 11, length)
            nack = _raw_reply(line, b"AOTV" + head + struct.pack("<I", zlib.crc32(head)) + b"\x55" * 600)
            assert nack.command == CMD_NACK and nack.payload[:2] == bytes([3, CMD_RUN])
        nack = _raw_reply(line, encode_frame(CMD_RUN, 12, x.tobytes()[:100]))
        assert nack.payload[:2] == bytes([5, CMD_RUN])  # shorter than the input: wrong length
        nack = _raw_reply(line, encode_frame(CMD_HELLO, 13, b"xx"))
        assert nack.payload[:2] == bytes([3, CMD_HELLO])
        c = Client(line)
        assert c.run(x.tobytes(), 12).outputs == _host(vb, x)  # nothing was written past a buffer


def test_a_firmware_of_another_model_is_refused(kws, firmware):  # noqa: ANN001
    _, elf = firmware
    with deadline(120), pytest.raises(HashMismatch, match="another model"):
        Target(BOARD, qemu=True, model=kws, firmware=elf, opt="size")


def test_a_killed_qemu_ends_the_run_with_one_line(kws, firmware):  # noqa: ANN001
    vb, elf = firmware
    with deadline(60):
        with Target(BOARD, qemu=True, firmware=elf, timeout=20) as t:
            outs, count = t.run(_sample(5)[0])  # the batch dimension may be left out
            assert outs["Identity"].shape == (1, 12) and count > 0
            os.killpg(t._transport.proc.pid, signal.SIGKILL)
            with pytest.raises(LinkError, match=r"QEMU \(mps2-an386\) ended \(killed by signal 9"):
                t.run(_sample(6))


def test_validate_50_samples_bit_exact_and_the_json_report(firmware, tmp_path):  # noqa: ANN001
    _, elf = firmware
    x = np.random.default_rng(7).integers(-128, 128, (50, 49, 10, 1), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    labels = np.random.default_rng(8).integers(0, 12, 50)
    np.save(tmp_path / "y.npy", labels)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with deadline(240):
        p = subprocess.run([sys.executable, "-m", "aot", "validate", str(shared_model("kws_int8.tflite")),
                            "--board", BOARD, "--qemu", "--firmware", str(elf), "--data", str(tmp_path / "x.npy"),
                            "--labels", str(tmp_path / "y.npy"), "--reference", "tflm", "--json", str(tmp_path / "r.json"),
                            "--html", str(tmp_path / "r.html")], capture_output=True, text=True, env=env, timeout=230)
    assert p.returncode == 0, p.stderr
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["done"] == r["samples"] == r["bit_exact"] == 50 and r["complete"]
    assert r["cycles"]["min"] <= r["cycles"]["median"] <= r["cycles"]["max"] and len(r["per_sample_counts"]) == 50
    assert r["accuracy_device"] == r["accuracy_host"] is not None
    assert r["reference_bit_exact"] == 50 and r["agreement"] == 1.0  # TensorFlow Lite Micro gives the same bytes
    assert "bit-exact with the host build: 50 of 50" in p.stdout and "<table>" in (tmp_path / "r.html").read_text()


def test_data_of_the_wrong_shape_is_refused_before_connecting(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3, 49, 5, 1), np.int8))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with deadline(120):
        p = subprocess.run([sys.executable, "-m", "aot", "validate", str(shared_model("kws_int8.tflite")),
                            "--board", BOARD, "--port", "/dev/ttyACM_no_such_port", "--data", str(tmp_path / "x.npy")],
                           capture_output=True, text=True, env=env, timeout=110)
    assert p.returncode == 2
    assert "(3, 49, 5, 1)" in p.stderr and "(1, 49, 10, 1)" in p.stderr and "no_such_port" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_a_target_on_a_missing_port_is_one_error():
    with deadline(30), pytest.raises(LinkError, match="serial port /dev/ttyACM_no_such_port does not exist"):
        Target(BOARD, port="/dev/ttyACM_no_such_port")


def test_aot_project_validate_writes_the_validation_firmware(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with deadline(120):
        p = subprocess.run([sys.executable, "-m", "aot", "project", str(shared_model("kws_int8.tflite")), "--board",
                            "nucleo-l4r5zi", "--validate", "--baud", "921600", "-o", str(tmp_path / "fw")],
                           capture_output=True, text=True, env=env, timeout=110)
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "fw" / "project.json").read_text())
    assert meta["validate"]["timer"] == "dwt-cycles" and meta["validate"]["baud"] == 921600
    assert "AOT_CONSOLE_BAUD=921600u" in (tmp_path / "fw" / "Makefile").read_text()
    main = (tmp_path / "fw" / "main.c").read_text()
    assert "aot_val_request" in main and "AOT_VAL_INPUT_BYTES 490u" in main and "malloc" not in main


def test_a_riscv_board_is_refused_in_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with deadline(120):
        p = subprocess.run([sys.executable, "-m", "aot", "project", str(shared_model("micro_speech_quantized.tflite")),
                            "--board", "rv32-virt", "--validate", "-o", str(tmp_path / "fw")],
                           capture_output=True, text=True, env=env, timeout=110)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "is a RISC-V board" in p.stderr and "aot run MODEL --target qemu --board rv32-virt" in p.stderr
    assert not (tmp_path / "fw").exists()


def test_every_console_driver_can_receive():
    """The validation firmware reads the console: every Arm board's driver has the receive hooks."""
    from aot.board.boards import list_boards
    for b in list_boards():
        if b.is_riscv:
            continue  # refused with one line: test_a_riscv_board_is_refused_in_one_line
        src = (ROOT / "platform" / "cortex_m" / "console" / f"{b.console.driver}.c").read_text()
        for fn in ("aot_console_rx_init", "aot_console_read", "aot_console_write_raw"):
            assert f"{fn}(" in src, (b.name, fn)
    assert load_board("microbit").console.rx_pin == 25 and load_board("nrf52840-dk").console.rx_pin == 8


@pytest.mark.slow
def test_estimate_cycles_equals_aot_cycles_for_sample_0(firmware, tmp_path):  # noqa: ANN001
    """--estimate-cycles: the report's estimate is `aot cycles` of the same model, board and input
    (the first sample); without the flag the report's estimate is null."""
    _, elf = firmware
    x = np.random.default_rng(11).integers(-128, 128, (3, 49, 10, 1), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "x0.npy", x[0][None])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    model = str(shared_model("kws_int8.tflite"))
    common = ["validate", model, "--board", BOARD, "--qemu", "--jobs", "1", "--firmware", str(elf), "--data",
              str(tmp_path / "x.npy")]
    with deadline(300):
        p = subprocess.run([sys.executable, "-m", "aot", *common, "--estimate-cycles", "--json",
                            str(tmp_path / "e.json")], capture_output=True, text=True, env=env, timeout=290)
        assert p.returncode == 0, p.stderr
        q = subprocess.run([sys.executable, "-m", "aot", *common, "--json", str(tmp_path / "n.json")],
                           capture_output=True, text=True, env=env, timeout=290)
        assert q.returncode == 0, q.stderr
        c = subprocess.run([sys.executable, "-m", "aot", "cycles", model, "--board", BOARD, "--input",
                            str(tmp_path / "x0.npy"), "--json"], capture_output=True, text=True, env=env, timeout=290)
        assert c.returncode == 0, c.stderr
    est = json.loads((tmp_path / "e.json").read_text())["estimate"]
    ref = json.loads(c.stdout)
    assert est["label"] == "estimated" and est["optimize"] == "instructions"
    for k in ("cycles", "core_cycles", "fetch_stall_cycles", "data_stall_cycles", "instructions", "clock_hz"):
        assert est[k] == ref[k], k
    assert f"estimated (timing model, not measured): {ref['cycles']:,} cycles" in p.stdout
    assert json.loads((tmp_path / "n.json").read_text())["estimate"] is None
    assert "estimated" not in q.stdout
