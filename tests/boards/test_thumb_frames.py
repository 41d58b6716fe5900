"""Static frames of leaf Thumb functions (aot.board.thumb_frames), decoded from code that the
Cortex-M assembler makes: every stack-pointer decrement counts, a call or a computed SP is None;
fp_context's coprocessor scan walks the same instruction stream."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from aot.board.fp_context import thumb_uses_coprocessor
from aot.board.thumb_frames import thumb_instructions, thumb_leaf_frame

CASES = {  # assembly body -> the frame (None: not a leaf with a static frame)
    "push {r4, r5, lr}\n sub sp, #16\n add sp, #16\n pop {r4, r5, pc}": 12 + 16,
    "stmdb sp!, {r4-r11, lr}\n sub.w sp, sp, #1024\n add.w sp, sp, #1024\n ldmia sp!, {r4-r11, pc}": 36 + 1024,
    "str r4, [sp, #-4]!\n vpush {d8-d9}\n subw sp, sp, #1000\n bx lr": 4 + 16 + 1000,
    "mov r0, r1\n adds r0, #1\n bx lr": 0,
    "push {r4, lr}\n bl other\n pop {r4, pc}": None,
    "push {r4, lr}\n blx r3\n pop {r4, pc}": None,
    "push {r4, lr}\n mov sp, r4\n pop {r4, pc}": None,
    "push {r4, lr}\n sub.w sp, sp, r2\n pop {r4, pc}": None,
}


def _assemble(body: str, tmp: Path) -> bytes:
    src = tmp / "f.s"
    src.write_text(f".syntax unified\n.thumb\n.text\n.global f\n.thumb_func\nf:\n {body}\nother:\n bx lr\n")
    obj = tmp / "f.o"
    bin_ = tmp / "f.bin"
    subprocess.run(["arm-none-eabi-as", "-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", str(src), "-o", str(obj)], check=True)
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".text", str(obj), str(bin_)], check=True)
    code = bin_.read_bytes()
    return code[:-2]  # without `other`'s bx lr


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("body", sorted(CASES))
def test_leaf_frames_of_assembled_code(body: str, tmp_path: Path) -> None:
    code = _assemble(body, tmp_path)
    assert thumb_leaf_frame(code) == CASES[body]
    assert sum(2 if hw2 is None else 4 for _, hw2 in thumb_instructions(code)) == len(code)
    assert thumb_uses_coprocessor(code) == ("vpush" in body)


def test_a_wide_instruction_cut_off_by_the_end() -> None:
    code = (0xE92D).to_bytes(2, "little")  # the first halfword of STMDB SP!, {...} alone
    assert list(thumb_instructions(code)) == [(0xE92D, None)]
    assert thumb_leaf_frame(code) == 0
