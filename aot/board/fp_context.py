"""Whether a Cortex-M image can ever create a floating-point context, which decides the size of
the frame the hardware stacks on exception entry: 32 bytes, or 104 with the FP registers (FPv4/
FPv5 with lazy stacking still reserves the space). The extended frame is used only when
CONTROL.FPCA is set, and only an instruction of the coprocessor space (VFP, MVE, CDE: the first
halfword 111x 11xx ...) executed in thread mode sets it. An image without one, decoded from
its code ranges (the ARM mapping symbols $t / $d tell code from literal pools), never stacks
the FP context, even on a hard-float build; an int8 model built for an M4F is such an image.
Conservative: with no mapping symbols, MVE in the build attributes (its low-overhead loops with
tail predication touch the FP context from the branch space), or anything undecodable, the
image counts as using the FP context."""
from __future__ import annotations

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from aot.board.thumb_frames import is_wide, thumb_instructions


def _is_coprocessor(hw1: int) -> bool:
    return hw1 & 0xEC00 == 0xEC00


def thumb_uses_coprocessor(code: bytes) -> bool:
    """A coprocessor-space instruction in the Thumb code `code` (decoded from its first halfword)."""
    return any(is_wide(hw) and _is_coprocessor(hw) for hw, _ in thumb_instructions(code))


def arm_attributes(elf: ELFFile) -> list[tuple[object, object]]:
    """(tag, value) of every build attribute in .ARM.attributes; ValueError when malformed."""
    section = elf.get_section_by_name(".ARM.attributes")
    if section is None:
        return []
    try:
        return [(attr.tag, attr.value) for sub in section.iter_subsections()
                for subsub in sub.iter_subsubsections() for attr in subsub.iter_attributes()]
    except Exception as e:  # noqa: BLE001 - pyelftools raises several kinds on bad data
        raise ValueError(f"malformed .ARM.attributes: {e}") from None


def _has_mve(elf: ELFFile) -> bool:
    try:
        return any(tag in ("TAG_MVE_ARCH", 48) and value for tag, value in arm_attributes(elf))
    except ValueError:  # malformed attributes: assume the worst
        return True


def _code_ranges(elf: ELFFile) -> list[tuple[int, bytes]] | None:
    """(address, bytes) of the Thumb code of every executable section, literal pools cut out
    by the mapping symbols; None when a section with code has no mapping symbols."""
    symtab = elf.get_section_by_name(".symtab")
    marks: dict[int, list[tuple[int, str]]] = {}
    if symtab is not None:
        for sym in symtab.iter_symbols():
            name = sym.name
            if name[:2] in ("$t", "$d", "$a") and (len(name) == 2 or name[2] == "."):
                shndx = sym["st_shndx"]
                if isinstance(shndx, int):
                    marks.setdefault(shndx, []).append((sym["st_value"], name[1]))
    out: list[tuple[int, bytes]] = []
    for index, sec in enumerate(elf.iter_sections()):
        if not sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR or sec["sh_type"] == "SHT_NOBITS" or not sec["sh_size"]:
            continue
        base, data = sec["sh_addr"], sec.data()
        ms = sorted(marks.get(index, []))
        if not ms:
            return None
        for k, (addr, kind) in enumerate(ms):
            end = ms[k + 1][0] if k + 1 < len(ms) else base + len(data)
            if kind != "d":  # "$a" cannot occur on M-profile; decoded as Thumb, conservatively
                out.append((addr, data[addr - base:end - base]))
    return out


def image_uses_fp_context(elf: ELFFile) -> bool:
    """True unless the image provably never executes a floating-point or vector instruction."""
    if _has_mve(elf):
        return True
    ranges = _code_ranges(elf)
    if ranges is None:
        return True
    return any(thumb_uses_coprocessor(code) for _, code in ranges)
