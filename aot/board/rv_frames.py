"""Stack frames of leaf library functions read from their RV32 code (picolibc's memcpy, memset,
strlen and libgcc's helpers come without .su data): the sum of every stack-pointer decrement in
the function (``addi sp,sp,-N``, ``c.addi sp,-N``, ``c.addi16sp -N``), an upper bound whatever
path runs. A function that calls another (``jal``/``jalr`` linking ra or t0, ``c.jal``,
``c.jalr``) or writes SP any other way is not a leaf with a static frame: None."""
from __future__ import annotations

from typing import Iterator

from elftools.elf.elffile import ELFFile

from aot.board.thumb_frames import static_leaf_frames

SP = 2
_LINK = (1, 5)  # ra and t0: the registers a call links (jal/jalr with another rd are jumps)


def rv_instructions(code: bytes) -> Iterator[tuple[int, bool]]:
    """The instructions of RV32 code (with C) as (encoding, is 32-bit); a 32-bit instruction cut
    off by the end comes as its first halfword."""
    i, n = 0, len(code) - len(code) % 2
    while i < n:
        hw = int.from_bytes(code[i:i + 2], "little")
        if hw & 3 == 3 and i + 4 <= n:
            yield int.from_bytes(code[i:i + 4], "little"), True
            i += 4
        else:
            yield hw, False
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
    for ins, wide in rv_instructions(code):
        frame = _frame_32(ins) if wide else _frame_16(ins)
        if frame is None:
            return None
        total += frame
    return total


def leaf_frames(ef: ELFFile, names: set[str]) -> dict[str, int]:
    """Frames of the functions `names` of an RV32 ELF that are leaves with static frames."""
    return static_leaf_frames(ef, names, "EM_RISCV", rv_leaf_frame)


VLENB_CSR = 0xC22


def rv_stack_bytes(code: bytes, vlenb: int) -> int:
    """Every stack-pointer decrement of a function, calls or not: ``addi sp, sp, -N`` (and its
    compressed forms), ``sub sp, sp, rX`` with rX a constant (``lui``/``li``) and the area LLVM
    reserves for spilled vector registers, ``sub sp, sp, rX`` where rX = vlenb x k (``csrr rX,
    vlenb``, then ``slli``, ``li`` + ``mul``, ``add``), a size no frame-size figure includes.
    `vlenb` is VLEN / 8 of the core (at least: a longer VLEN takes proportionally more)."""
    regs: dict[int, tuple[str, int]] = {}  # register -> ("vl", k): k x vlenb, or ("k", constant)
    total = 0

    def get(r: int) -> tuple[str, int] | None:
        return ("k", 0) if r == 0 else regs.get(r)

    for ins, wide in rv_instructions(code):
        rd = (ins >> 7) & 0x1F
        if wide:
            opcode, funct3 = ins & 0x7F, (ins >> 12) & 7
            rs1, rs2, funct7 = (ins >> 15) & 0x1F, (ins >> 20) & 0x1F, ins >> 25
            value: tuple[str, int] | None = None
            if opcode == 0x73 and funct3 == 2 and rs1 == 0 and ins >> 20 == VLENB_CSR:
                value = ("vl", 1)
            elif opcode == 0x13 and funct3 == 1 and get(rs1) is not None:  # slli
                kind, v = get(rs1)  # type: ignore[misc]
                value = (kind, v << ((ins >> 20) & 0x1F))
            elif opcode == 0x13 and funct3 == 0 and get(rs1) is not None and get(rs1)[0] == "k":  # addi / li
                value = ("k", get(rs1)[1] + _sext(ins >> 20, 12))  # type: ignore[index]
            elif opcode == 0x37:  # lui
                value = ("k", _sext(ins >> 12, 20) << 12)
            elif opcode == 0x33 and funct3 == 0 and funct7 in (0, 1) and get(rs1) and get(rs2):
                (ka, a), (kb, b) = get(rs1), get(rs2)  # type: ignore[misc]
                if funct7 == 1 and "k" in (ka, kb):  # mul
                    value = ("vl" if "vl" in (ka, kb) else "k", a * b)
                elif funct7 == 0 and ka == kb:  # add
                    value = (ka, a + b)
            elif opcode == 0x33 and funct3 == 0 and funct7 == 0x20 and rd == SP and rs1 == SP:  # sub sp, sp, rs2
                v = get(rs2)
                if v is not None and v[1] > 0:
                    total += v[1] * (vlenb if v[0] == "vl" else 1)
                continue
            elif opcode == 0x13 and funct3 == 0 and rd == SP and rs1 == SP:  # addi sp, sp, imm
                total += max(-_sext(ins >> 20, 12), 0)
                continue
            if rd:
                if value is None:
                    regs.pop(rd, None)
                else:
                    regs[rd] = value
            continue
        op, funct3 = ins & 3, ins >> 13
        if op == 1 and funct3 in (0, 3) and rd == SP:  # c.addi sp / c.addi16sp
            total += _frame_16(ins) or 0
            continue
        if op == 2 and funct3 == 0 and rd and get(rd) is not None:  # c.slli
            kind, v = get(rd)  # type: ignore[misc]
            regs[rd] = (kind, v << (((ins >> 12) & 1) << 5 | (ins >> 2) & 0x1F))
        elif op == 1 and funct3 == 2 and rd:  # c.li
            regs[rd] = ("k", _sext(((ins >> 12) & 1) << 5 | (ins >> 2) & 0x1F, 6))
        elif op == 2 and funct3 == 4 and (ins >> 2) & 0x1F and rd:  # c.mv / c.add
            rs2 = (ins >> 2) & 0x1F
            if (ins >> 12) & 1 == 0:
                if get(rs2) is None:
                    regs.pop(rd, None)
                else:
                    regs[rd] = get(rs2)  # type: ignore[assignment]
            elif get(rd) and get(rs2) and get(rd)[0] == get(rs2)[0]:  # type: ignore[index]
                regs[rd] = (get(rd)[0], get(rd)[1] + get(rs2)[1])  # type: ignore[index]
            else:
                regs.pop(rd, None)
        elif op in (1, 2) and rd and funct3 in (0, 3, 4) and not (op == 2 and funct3 == 4):
            regs.pop(rd, None)  # c.addi / c.lui / arithmetic: no longer a known value
        elif op == 0 or (op == 1 and funct3 == 4):
            regs.pop(8 + ((ins >> 7) & 7) if op == 1 else 8 + ((ins >> 2) & 7), None)
    return total


def object_stack_bytes(obj: bytes, vlenb: int) -> dict[str, int]:
    """rv_stack_bytes of every function of an RV32 object file (nonzero ones only)."""
    import io

    ef = ELFFile(io.BytesIO(obj))
    symtab = ef.get_section_by_name(".symtab")
    out: dict[str, int] = {}
    if ef["e_machine"] != "EM_RISCV" or symtab is None:
        return out
    for sym in symtab.iter_symbols():
        if sym["st_info"]["type"] != "STT_FUNC" or not sym["st_size"] or not isinstance(sym["st_shndx"], int):
            continue
        data = ef.get_section(sym["st_shndx"]).data()
        n = rv_stack_bytes(data[sym["st_value"]:sym["st_value"] + sym["st_size"]], vlenb)
        if n:
            out[sym.name] = n
    return out
