"""Assemble tiny Thumb snippets with arm-none-eabi-as and decode them as the timing model does."""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from aot.timing.decode import Insn, decode_elf


def assemble(source: str, cpu: str = "cortex-m4") -> list[Insn]:
    """The instructions of `source` (unified syntax, Thumb), in address order from 0."""
    with tempfile.TemporaryDirectory(prefix="aot_snippet_") as tmp:
        s = Path(tmp) / "s.s"
        o = Path(tmp) / "s.o"
        s.write_text(f".syntax unified\n.thumb\n.text\n{source}\n")
        flags = {"cortex-m4": ["-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16"],
                 "cortex-m55": ["-march=armv8.1-m.main+mve"]}.get(cpu, [f"-mcpu={cpu}"])
        subprocess.run(["arm-none-eabi-as", *flags, "-o", str(o), str(s)], check=True,
                       capture_output=True)
        insns = decode_elf(o)
    return [insns[pc] for pc in sorted(insns)]
