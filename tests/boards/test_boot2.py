"""The Pico boots. boot2 (platform/cortex_m/boot2/w25q080.S) fits before its checksum,
the shipped binary is what the source assembles to, and the 256 bytes in the built image carry
the CRC32 the RP2040 boot ROM computes (recomputed here bit by bit, independently of aot)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.assets import asset_dir  # noqa: E402
from aot.board.boards import load_board  # noqa: E402
from aot.board.boot2 import boot2_code, boot2_image, rp2040_crc32  # noqa: E402
from aot.board.project import generate_project  # noqa: E402
from aot.errors import Error  # noqa: E402
from aot.runners.qemu import build_project  # noqa: E402
from test_boards_project import EXPECTED, INPUT, write_library  # noqa: E402


def boot_rom_crc(data: bytes) -> int:
    """The boot ROM's CRC32: polynomial 0x04C11DB7, MSB first, initial 0xFFFFFFFF, no final XOR;
    written from the definition with a 256-entry table (a different route than aot's)."""
    table = []
    for i in range(256):
        c = i << 24
        for _ in range(8):
            c = (c << 1) ^ 0x04C11DB7 if c & 0x80000000 else c << 1
        table.append(c & 0xFFFFFFFF)
    crc = 0xFFFFFFFF
    for b in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ table[(crc >> 24) ^ b]
    return crc


def test_crc_matches_the_standard_check_value():
    # CRC-32/MPEG-2 (this parameter set) of "123456789" is 0x0376E6E7
    assert boot_rom_crc(b"123456789") == 0x0376E6E7 == rp2040_crc32(b"123456789")


def test_image_is_padded_code_plus_crc():
    code = boot2_code("w25q080")
    assert 64 < len(code) <= 252
    image = boot2_image(code)
    assert len(image) == 256 and image[:len(code)] == code and image[len(code):252] == bytes(252 - len(code))
    assert int.from_bytes(image[252:], "little") == boot_rom_crc(image[:252])
    with pytest.raises(Error, match="252"):
        boot2_image(bytes(253))
    with pytest.raises(Error, match="no boot2"):
        boot2_code("at25sf081")


@pytest.mark.usefixtures("arm_toolchain")
def test_shipped_binary_is_the_assembled_source(tmp_path):
    src = asset_dir("platform") / "cortex_m" / "boot2" / "w25q080.S"
    obj, elf, binary = tmp_path / "b.o", tmp_path / "b.elf", tmp_path / "b.bin"
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m0plus", "-mthumb", "-c", str(src), "-o", str(obj)], check=True)
    subprocess.run(["arm-none-eabi-ld", "-Ttext=0x20041f00", "--no-warn-rwx-segments", "-e", "aot_boot2_entry",
                    str(obj), "-o", str(elf)], check=True)
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", str(elf), str(binary)], check=True)
    assert binary.read_bytes() == boot2_code("w25q080")
    # position independent: nothing but PC-relative branches and literal loads (no relocations left)
    dump = subprocess.run(["arm-none-eabi-objdump", "-r", str(obj)], capture_output=True, text=True, check=True).stdout
    assert "R_ARM_ABS32" not in dump


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_pico_image_starts_with_a_valid_boot2_and_vectors_after_it(tmp_path):
    assert shutil.which("arm-none-eabi-gcc")
    board = load_board("rpi-pico")
    lib = write_library(tmp_path / "lib")
    project = generate_project(lib, board, tmp_path / "p", prefix="net", input_bytes=[INPUT],
                               expected_output_bytes=[EXPECTED])
    elf = build_project(project)
    assert not (project / "platform" / "aot_boot2_placeholder.c").exists()
    with elf.open("rb") as fh:
        ef = ELFFile(fh)
        boot2 = ef.get_section_by_name(".boot2")
        vectors = ef.get_section_by_name(".isr_vector")
        assert (boot2["sh_addr"], boot2["sh_size"]) == (0x10000000, 256)
        assert vectors["sh_addr"] == 0x10000100
        data = boot2.data()
        vector_words = vectors.data()[:8]
        reset = int.from_bytes(vector_words[4:8], "little")
        symbols = {s.name: s["st_value"] for s in ef.get_section_by_name(".symtab").iter_symbols()}
    assert int.from_bytes(data[252:], "little") == boot_rom_crc(data[:252])
    assert data[:len(boot2_code())] == boot2_code()
    assert reset == symbols["Reset_Handler"] | 1  # Thumb bit: boot2 jumps through this entry
    flat = elf.with_suffix(".bin").read_bytes()
    assert flat[:256] == data and flat[256:264] == vector_words
