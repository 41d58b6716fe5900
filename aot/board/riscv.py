"""RISC-V boards: what an RV32 board file adds (ISA string, ABI, QEMU's -cpu, exit device) and
what follows from it: the C library's multilib, LLVM's target features, QEMU's arguments.

The ISA string is GCC's -march (``rv32imac_zicsr``, ``rv32imacv_zicsr``): single-letter
extensions after ``rv32``, then ``_``-separated multi-letter ones. Debian's picolibc for
riscv64-unknown-elf ships one library per multilib (rv32i, rv32im, rv32imac, ...), and the GCC
driver picks one only on an exact -march match, so a link names the largest multilib whose
extensions the board has (``rv32imacv_zicsr`` links against ``rv32imac``).
"""
from __future__ import annotations

import re
from typing import Any

from aot.errors import Error

# the functions below take an aot.board.boards.Board (which imports this module: typed Any here)

# cpu names a RISC-V board file may give (the core, for the reader; the ISA string decides the code)
RISCV_CPUS = ("rv32", "sifive-e31", "bumblebee", "esp32c3")
ABIS = ("ilp32", "ilp32e")
EXIT_DEVICES = ("sifive_test", "semihosting")
# the ilp32 multilibs of Debian's gcc-riscv64-unknown-elf / picolibc-riscv64-unknown-elf
ILP32_MULTILIBS = ("rv32imac", "rv32iac", "rv32im", "rv32ia", "rv32i")

_ISA = re.compile(r"^rv32([a-z]+)((?:_[a-z][a-z0-9]*)*)$")


def isa_extensions(isa: str) -> frozenset[str]:
    """The extensions of an ISA string: single letters and multi-letter names (``g`` expands)."""
    m = _ISA.match(isa)
    if m is None:
        raise Error(f"ISA string {isa!r} is not of the form rv32<letters>[_<extension>...], e.g. rv32imac_zicsr")
    letters = set(m.group(1).replace("g", "imafd"))
    multi = {x for x in m.group(2).split("_") if x}
    if "g" in m.group(1):
        multi |= {"zicsr", "zifencei"}
    return frozenset(letters | multi)


def multilib_isa(isa: str) -> str:
    """The -march of the largest C library multilib the board's core runs."""
    ext = isa_extensions(isa)
    for lib in ILP32_MULTILIBS:
        if set(lib[4:]) <= ext:
            return lib
    raise Error(f"ISA {isa!r} has no base integer extension (i)")


def llvm_features(isa: str) -> str:
    """LLVM target features for the ISA; V as the integer vector subset (Zve32x) at VLEN 128, so
    that no floating-point register file is assumed."""
    ext = isa_extensions(isa)
    features = [("+" if e in ext else "-") + e for e in ("m", "a", "c", "f", "d")]
    if "zicsr" in ext:
        features.append("+zicsr")
    if "v" in ext:
        features += ["+zve32x", "+zvl128b"]
    else:
        features.append("-v")
    features.append("+relax")
    return ",".join(features)


def riscv_qemu_args(board: Any) -> list[str]:
    """qemu-system-riscv32 arguments (without -kernel): the machine (and -cpu), the console on stdout
    (-nographic), no firmware (-bios none: the ELF's entry runs first), an exact instruction clock
    (-icount shift=0) and semihosting where the image exits through it."""
    args = ["-machine", str(board.qemu_machine)]
    if board.qemu_cpu:
        args += ["-cpu", board.qemu_cpu]
    args += ["-nographic", "-bios", "none", "-icount", "shift=0"]
    if board.exit_dict.get("device") == "semihosting":
        args += ["-semihosting-config", "enable=on,target=native"]
    return args


def exit_defines(board: Any) -> list[str]:
    """The startup code's exit device (emulated boards): the test finisher or semihosting."""
    ex = board.exit_dict
    if ex.get("device") == "sifive_test":
        return [f"AOT_EXIT_SIFIVE_TEST=0x{int(ex['base'], 0):08X}u"]
    if ex.get("device") == "semihosting":
        return ["AOT_EXIT_SEMIHOSTING=1"]
    return []


def validate_riscv(board: Any, source: str) -> None:
    if board.isa is None:
        raise Error(f"{source}: abi, qemu_cpu and exit belong to RISC-V boards, which need an isa string")
    ext = isa_extensions(board.isa)
    if "i" not in ext and "e" not in ext:
        raise Error(f"{source}: isa {board.isa!r} has no base integer extension (i or e)")
    if board.cpu not in RISCV_CPUS:
        raise Error(f"{source}: unknown RISC-V cpu {board.cpu!r}; known: {', '.join(RISCV_CPUS)}")
    if board.abi not in ABIS:
        raise Error(f"{source}: abi must be one of {ABIS}, got {board.abi!r}")
    if board.fpu != "none" or board.float_abi != "soft":
        raise Error(f"{source}: RISC-V boards take fpu \"none\" and float_abi \"soft\" (the ilp32 ABI)")
    ex = board.exit_dict
    if ex and ex.get("device") not in EXIT_DEVICES:
        raise Error(f"{source}: exit device must be one of {EXIT_DEVICES}, got {ex.get('device')!r}")
    if ex.get("device") == "sifive_test" and "base" not in ex:
        raise Error(f"{source}: the sifive_test exit device needs a base address")
    if board.emulated and not ex:
        raise Error(f"{source}: an emulated RISC-V board needs an exit device (sifive_test or semihosting)")
