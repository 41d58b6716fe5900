"""The Cortex-M55 board (mps3-an547) with the memories QEMU's AN547 image maps: code in the 512 KiB ITCM,
the model's constant tables in the 2 MiB FPGA SRAM (the board's const_region; past it the 8 MiB QSPI flash), the stack and the first
activation pool in the 512 KiB DTCM, activations beyond it in the 4 MiB SSE-300 SRAM."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aot
from aot.board.boards import load_board
from aot.errors import Error, FitError
from aot.ir import Quant

pytestmark = pytest.mark.usefixtures("arm_toolchain")


def _fc(n_in: int, n_out: int):  # noqa: ANN202
    rng = np.random.default_rng(0)
    g = aot.GraphBuilder("wide_fc")
    x = g.input("x", (1, n_in), "int8", Quant((0.05,), (3,)))
    w = g.constant(rng.integers(-127, 128, (n_out, n_in), dtype=np.int8), "w", quant=Quant((0.002,), (0,)))
    g.output(g.fully_connected(x, w, out_quant=Quant((0.5,), (-2,))), "y")
    return g.finish()


def test_board_file_names_the_memories() -> None:
    b = load_board("mps3-an547")
    assert b.const_region == "sram" and b.region("sram").kind == "flash" and b.region("sram").size == 2 << 20
    assert b.region("isram").origin == 0x21000000 and b.region("isram").size == 4 << 20
    assert b.flash.size == 512 << 10 and b.ram.size == 512 << 10


def test_const_region_must_be_a_flash_region() -> None:
    from aot.board.boards import _board_from_dict
    data = load_board("mps3-an547").to_dict()
    data["const_region"] = "dtcm"
    with pytest.raises(Error, match="const_region 'dtcm' is not a flash region"):
        _board_from_dict(data, "test")


def test_llvm_object_puts_each_constant_table_in_its_own_section() -> None:
    """As the C backend's -fdata-sections: .rodata.<prefix>_const_*, which the board's linker script
    sends to the const region (else the LLVM build of a model with more weights than the ITCM fails to link)."""
    from elftools.elf.elffile import ELFFile
    import io
    from aot.llvm import LLVMTarget, emit_object
    km = aot.compile_model(_fc(64, 32), aot.CompileOptions()).module
    names = [c.buffer.name for c in km.consts]
    assert names and all("_const_" in n for n in names)
    obj = ELFFile(io.BytesIO(emit_object(km, LLVMTarget("thumbv8.1m.main-none-eabihf", "cortex-m55", "", "hard"))))
    sections = {s.name for s in obj.iter_sections()}
    assert {f".rodata.{n}" for n in names} <= sections


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_weights_past_the_itcm_run_from_the_sram(tmp_path: Path, backend: str) -> None:
    """768 KiB of weights: more than the ITCM, bit-exact on the M55, the tables placed in the SRAM."""
    from aot.board.flow import run_on_board
    model = _fc(1024, 768)
    x = np.random.default_rng(1).integers(-128, 128, (1, 1024), dtype=np.int8)
    outs, extra = run_on_board(model, {"x": x}, "mps3-an547", backend=backend, keep_dir=tmp_path)
    np.testing.assert_array_equal(outs["y"], aot.build(model).run({"x": x})["y"])
    assert extra["match_host"] is True
    from elftools.elf.elffile import ELFFile
    with (tmp_path / "project" / "build" / "firmware.elf").open("rb") as fh:
        sec = ELFFile(fh).get_section_by_name(".aot_const")
        assert sec is not None and sec["sh_addr"] == 0x01000000 and sec["sh_size"] >= 768 << 10


@pytest.mark.slow
def test_activations_past_the_dtcm_go_to_the_sse_sram(tmp_path: Path) -> None:
    """A 640 KiB activation peak (a 1x1 conv from 4 to 16 channels at 160x160): past the DTCM, the
    planner's second pool lands in the SSE-300 SRAM; bit-exact."""
    from aot.board.flow import run_on_board
    rng = np.random.default_rng(2)
    g = aot.GraphBuilder("wide_map")
    x = g.input("x", (1, 160, 160, 4), "int8", Quant((0.05,), (1,)))
    w = g.constant(rng.integers(-127, 128, (16, 1, 1, 4), dtype=np.int8), "w", quant=Quant((0.01,), (0,)))
    g.output(g.conv2d(x, w, out_quant=Quant((0.1,), (-3,))), "y")
    model = g.finish()
    x = rng.integers(-128, 128, (1, 160, 160, 4), dtype=np.int8)
    outs, extra = run_on_board(model, {"x": x}, "mps3-an547", keep_dir=tmp_path)
    np.testing.assert_array_equal(outs["y"], aot.build(model).run({"x": x})["y"])
    text = (tmp_path / "project" / "linker.ld").read_text()
    assert "> ISRAM" in text


def test_constants_past_the_sram_go_to_the_qspi_flash() -> None:
    """The smallest flash region (not the code's) that holds the tables: the SRAM up to 2 MiB,
    then the 8 MiB QSPI flash; past that the largest, and check_fit refuses."""
    from aot.board.flow import const_home
    b = load_board("mps3-an547")
    assert b.region("qspi").origin == 0x28000000 and b.region("qspi").kind == "flash"
    assert const_home(b, 2 << 20) == "sram"
    assert const_home(b, (2 << 20) + 1) == "qspi"
    assert const_home(b, 9 << 20) == "qspi"
    assert const_home(load_board("mps2-an386"), 9 << 20) is None


@pytest.mark.slow
def test_weights_past_the_sram_run_from_the_qspi_flash(tmp_path: Path) -> None:
    """2.2 MB of weights (more than the 2 MiB SRAM): linked into the QSPI flash, bit-exact on the M55."""
    from aot.board.flow import run_on_board
    model = _fc(2048, 1100)
    x = np.random.default_rng(3).integers(-128, 128, (1, 2048), dtype=np.int8)
    outs, extra = run_on_board(model, {"x": x}, "mps3-an547", keep_dir=tmp_path)
    np.testing.assert_array_equal(outs["y"], aot.build(model).run({"x": x})["y"])
    assert extra["match_host"] is True
    from elftools.elf.elffile import ELFFile
    with (tmp_path / "project" / "build" / "firmware.elf").open("rb") as fh:
        sec = ELFFile(fh).get_section_by_name(".aot_const")
        assert sec is not None and sec["sh_addr"] == 0x28000000 and sec["sh_size"] >= 2048 * 1100


def test_weights_beyond_the_const_regions_are_refused(tmp_path: Path) -> None:
    from aot.board.flow import make_project
    model = _fc(4096, 2100)  # 8.6 MB of weights, 8 MiB of QSPI flash
    with pytest.raises(FitError, match=r"bytes of weights but 8,388,608 bytes in qspi"):
        make_project(model, "mps3-an547", tmp_path / "p", {"x": np.zeros((1, 4096), np.int8)})
    assert not (tmp_path / "p").exists()
