"""aot.board.fp_context: which Thumb code can create a floating-point context (and so makes
the hardware stack 104-byte exception frames). Encodings from the Armv7-M ARM."""
from __future__ import annotations

import struct

from aot.board.fp_context import thumb_uses_coprocessor


def _code(*halfwords: int) -> bytes:
    return struct.pack(f"<{len(halfwords)}H", *halfwords)


def test_integer_dsp_code_uses_no_coprocessor() -> None:
    # push {r4, lr}; smlad r0, r1, r2, r0; sxtb16 r1, r2; ldrd r2, r3, [r0]; ssat r0, #8, r0; bx lr
    code = _code(0xB510, 0xFB21, 0x0002, 0xFA2F, 0xF182, 0xE9D0, 0x2300, 0xF300, 0x0007, 0x4770)
    assert not thumb_uses_coprocessor(code)


def test_vfp_instructions_are_found() -> None:
    assert thumb_uses_coprocessor(_code(0xB510, 0xEE30, 0x0A20))  # vadd.f32 s0, s0, s1
    assert thumb_uses_coprocessor(_code(0xED9F, 0x0A01))  # vldr s0, [pc, #4]
    assert thumb_uses_coprocessor(_code(0xEEF1, 0xFA10))  # vmrs APSR_nzcv, fpscr
    assert thumb_uses_coprocessor(_code(0xED2D, 0x8B02))  # vpush {d8}


def test_second_halfword_of_a_wide_instruction_is_not_decoded_alone() -> None:
    # ldr.w r0, [r1, #0xeeb] : its second halfword 0x0EEB is no instruction start; and a 32-bit
    # instruction whose second halfword looks like a VFP first halfword (movw r0, #0xee30 style)
    assert not thumb_uses_coprocessor(_code(0xF8D1, 0x0EEB))
    assert not thumb_uses_coprocessor(_code(0xF64E, 0xEE30))
