"""Stack frames of leaf library functions read from their Thumb code (newlib's memcpy, memset,
strlen... come without .su data): the sum of every stack-pointer decrement in the function
(PUSH, STMDB SP!, STR Rt,[SP,#-4]!, VPUSH, SUB SP,#imm), an upper bound whatever path runs.
A function that calls another (BL/BLX) or moves SP any other way is not a leaf with a static
frame: None."""
from __future__ import annotations

from typing import Callable, Iterator

from elftools.elf.elffile import ELFFile


def is_wide(hw: int) -> bool:
    """`hw` is the first halfword of a 32-bit Thumb-2 instruction (top five bits 11101, 11110, 11111)."""
    return hw >> 11 in (0b11101, 0b11110, 0b11111)


def thumb_instructions(code: bytes) -> Iterator[tuple[int, int | None]]:
    """The instructions of Thumb code as (first halfword, second halfword or None for 16-bit ones);
    a 32-bit instruction cut off by the end comes as (first halfword, None)."""
    i, n = 0, len(code) - len(code) % 2
    while i < n:
        hw = int.from_bytes(code[i:i + 2], "little")
        if is_wide(hw) and i + 4 <= n:
            yield hw, int.from_bytes(code[i + 2:i + 4], "little")
            i += 4
        else:
            yield hw, None
            i += 2


def _expand_imm(imm12: int) -> int:
    """ThumbExpandImm (modified immediate of 32-bit data-processing instructions)."""
    if imm12 >> 10 == 0:
        b = imm12 & 0xFF
        return [b, b | b << 16, b << 8 | b << 24, b | b << 8 | b << 16 | b << 24][(imm12 >> 8) & 3]
    value = 0x80 | (imm12 & 0x7F)
    rot = imm12 >> 7
    return ((value >> rot) | (value << (32 - rot))) & 0xFFFFFFFF


def thumb_leaf_frame(code: bytes) -> int | None:
    """Bytes of stack the Thumb function `code` can take at most, or None (not a leaf, or SP
    changed by something else than a constant decrement)."""
    total = 0
    for hw, hw2 in thumb_instructions(code):
        if hw2 is not None:  # 32-bit
            if hw >> 11 == 0b11110 and hw2 & 0xD000 in (0xD000, 0xC000):
                return None  # BL / BLX: calls something
            if hw == 0xE92D:  # STMDB SP!, {...}
                total += 4 * bin(hw2 & 0x5FFF).count("1")
            elif hw == 0xF84D and hw2 & 0x0FFF == 0x0D04:  # STR Rt, [SP, #-4]!
                total += 4
            elif hw & 0xFFBF == 0xED2D and hw2 & 0x0E00 == 0x0A00:  # VPUSH
                total += 4 * (hw2 & 0xFF)
            elif hw & 0xFBEF == 0xF1AD and hw2 & 0x8F00 == 0x0D00:  # SUB.W SP, SP, #const
                total += _expand_imm(((hw >> 10) & 1) << 11 | ((hw2 >> 12) & 7) << 8 | (hw2 & 0xFF))
            elif hw & 0xFBFF == 0xF2AD and hw2 & 0x8F00 == 0x0D00:  # SUBW SP, SP, #imm12
                total += ((hw >> 10) & 1) << 11 | ((hw2 >> 12) & 7) << 8 | (hw2 & 0xFF)
            elif hw & 0xFE00 == 0xEA00 and (hw2 >> 8) & 0xF == 0xD:
                return None  # a data-processing (register) result into SP: MOV.W / ADD.W / SUB.W SP, ...
            continue
        if hw & 0xFE00 == 0xB400:  # PUSH {...}
            total += 4 * (bin(hw & 0xFF).count("1") + ((hw >> 8) & 1))
        elif hw & 0xFF80 == 0xB080:  # SUB SP, #imm7*4
            total += 4 * (hw & 0x7F)
        elif hw & 0xFF87 in (0x4685, 0x4485):  # MOV SP, Rm / ADD SP, Rm
            return None
        elif hw & 0xFF80 == 0x4780:  # BLX Rm
            return None
    return total


def static_leaf_frames(ef: ELFFile, names: set[str], machine: str, frame_of: Callable[[bytes], int | None],
                       address_mask: int = ~0) -> dict[str, int]:
    """Frames of the functions `names` of an ELF for `machine` ("EM_ARM", "EM_RISCV") that are leaves
    with static frames, each function's code measured by `frame_of` (None: not a static leaf)."""
    if ef["e_machine"] != machine:
        return {}
    symtab = ef.get_section_by_name(".symtab")
    if symtab is None:
        return {}
    out: dict[str, int] = {}
    for sym in symtab.iter_symbols():
        if sym.name not in names or sym["st_info"]["type"] != "STT_FUNC" or not sym["st_size"] \
                or not isinstance(sym["st_shndx"], int):
            continue
        sec = ef.get_section(sym["st_shndx"])
        start = (sym["st_value"] & address_mask) - sec["sh_addr"]
        frame = frame_of(sec.data()[start:start + sym["st_size"]])
        if frame is not None:
            out[sym.name] = max(out.get(sym.name, 0), frame)
    return out


def leaf_frames(ef: ELFFile, names: set[str]) -> dict[str, int]:
    """Frames of the functions `names` of a Thumb ELF that are leaves with static frames."""
    return static_leaf_frames(ef, names, "EM_ARM", thumb_leaf_frame, address_mask=~1)
