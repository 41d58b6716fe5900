"""Stack frames of leaf library functions read from their RV32 code (picolibc's memcpy, memset,
strlen and libgcc's helpers come without .su data): the sum of every stack-pointer decrement in
the function (``addi sp,sp,-N``, ``c.addi sp,-N``, ``c.addi16sp -N``), an upper bound whatever
path runs. A function that calls another (``jal``/``jalr`` linking ra or t0, ``c.jal``,
``c.jalr``) or writes SP any other way is not a leaf with a static frame: None."""
from __future__ import annotations

from typing import Iterator

from elftools.elf.elffile import ELFFile

SP = 2
_LINK = (1, 5)  # ra and t0: the registers a call links (jal/jalr with another rd are jumps)


def rv_instructions(code: bytes) -> Iterator[int]:
    """The instructions of RV32 code (with C): 32-bit words and 16-bit halfwords as integers; a
    32-bit instruction cut off by the end comes as its first halfword."""
    i, n = 0, len(code) - len(code) % 2
    while i < n:
        hw = int.from_bytes(code[i:i + 2], "little")
        if hw & 3 == 3 and i + 4 <= n:
            yield int.from_bytes(code[i:i + 4], "little")
            i += 4
        else:
            yield hw
            i += 2


def _sext(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


def _frame_32(ins: int) -> int | None:
    """Bytes a 32-bit instruction takes from the stack; None: it calls or moves SP dynamically."""
    opcode, rd = ins & 0x7F, (ins >> 7) & 0x1F
    funct3, rs1 = (ins >> 12) & 7, (ins >> 15) & 0x1F
    if opcode == 0x6F and rd in _LINK:  # jal ra/t0
        return None
    if opcode == 0x67 and rd in _LINK:  # jalr ra/t0
        return None
    if rd != SP or opcode in (0x23, 0x63, 0x27):  # stores and branches have no rd
        return 0
    if opcode == 0x13 and funct3 == 0 and rs1 == SP:  # addi sp, sp, imm
        imm = _sext(ins >> 20, 12)
        return -imm if imm < 0 else 0
    return None  # any other write of sp


def _frame_16(hw: int) -> int | None:
    op, funct3 = hw & 3, hw >> 13
    if op == 1 and funct3 == 1:  # c.jal (RV32)
        return None
    if op == 2 and funct3 == 4:
        rs1, rs2, bit12 = (hw >> 7) & 0x1F, (hw >> 2) & 0x1F, (hw >> 12) & 1
        if bit12 and rs2 == 0 and rs1 != 0:  # c.jalr
            return None
        if rs1 == SP and rs2 != 0:  # c.mv sp, rs2 / c.add sp, rs2
            return None
        return 0
    if op == 1 and funct3 == 3 and (hw >> 7) & 0x1F == SP:  # c.addi16sp
        imm = ((hw >> 12) & 1) << 9 | ((hw >> 6) & 1) << 4 | ((hw >> 5) & 1) << 6 \
            | ((hw >> 3) & 3) << 7 | ((hw >> 2) & 1) << 5
        imm = _sext(imm, 10)
        return -imm if imm < 0 else 0
    if op == 1 and funct3 == 0 and (hw >> 7) & 0x1F == SP:  # c.addi sp, imm
        imm = _sext(((hw >> 12) & 1) << 5 | (hw >> 2) & 0x1F, 6)
        return -imm if imm < 0 else 0
    if op == 1 and funct3 == 2 and (hw >> 7) & 0x1F == SP:  # c.li sp
        return None
    if op == 2 and funct3 == 2 and (hw >> 7) & 0x1F == SP:  # c.lwsp sp
        return None
    return 0


def rv_leaf_frame(code: bytes) -> int | None:
    """Bytes of stack the RV32 function `code` can take at most, or None (not a leaf, or SP
    changed by something else than a constant adjustment)."""
    total = 0
    for ins in rv_instructions(code):
        frame = _frame_32(ins) if ins & 3 == 3 and ins > 0xFFFF else _frame_16(ins)
        if frame is None:
            return None
        total += frame
    return total


def leaf_frames(ef: ELFFile, names: set[str]) -> dict[str, int]:
    """Frames of the functions `names` of an RV32 ELF that are leaves with static frames."""
    if ef["e_machine"] != "EM_RISCV":
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
        start = sym["st_value"] - sec["sh_addr"]
        frame = rv_leaf_frame(sec.data()[start:start + sym["st_size"]])
        if frame is not None:
            out[sym.name] = max(out.get(sym.name, 0), frame)
    return out
