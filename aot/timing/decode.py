"""Decode the instructions of an ELF into timing classes (arm-none-eabi-objdump -d).

Each instruction of the executable sections becomes an `Insn`: its address, size, mnemonic,
the timing class the core tables price (`cores.py`), the registers it writes and reads, the
base register of a load or store, and the register count of a load/store multiple. Literal
pools are data to objdump (mapping symbols) and never become instructions.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from aot.errors import Error, ToolchainError

OBJDUMP = "arm-none-eabi-objdump"

# condition-code suffixes a mnemonic may carry (after the base name, before .w/.n/type)
_CONDS = ("eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le", "al")
_LINE = re.compile(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{4}\s?){1,2})\s+(\S+)\s*(.*)$")
_REG = re.compile(r"\b(r1[0-5]|r[0-9]|sp|lr|pc|ip|fp|sl|sb)\b")
_ALIAS = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12", "sp": "r13", "lr": "r14", "pc": "r15"}

# base mnemonic -> timing class (after the condition and width suffixes are removed)
_CLASSES: dict[str, str] = {}
for _names, _cls in (
    ("mov movw movt mvn add adc adr sub sbc rsb rsc and orr orn eor bic cmp cmn tst teq lsl lsr asr ror rrx "
     "neg cpy sxtb sxth uxtb uxth sxtab sxtah uxtab uxtah sxtb16 uxtb16 sxtab16 uxtab16 rev rev16 revsh rbit "
     "clz bfi bfc ubfx sbfx ssat usat ssat16 usat16 sel pkhbt pkhtb qadd qsub qdadd qdsub qadd8 qadd16 qsub8 "
     "qsub16 qasx qsax sadd8 sadd16 ssub8 ssub16 uadd8 uadd16 usub8 usub16 sasx ssax uasx usax shadd8 shadd16 "
     "shsub8 shsub16 uhadd8 uhadd16 uhsub8 uhsub16 uqadd8 uqadd16 uqsub8 uqsub16 usad8 usada8 mrs msr cps "
     "sev wfe wfi yield", "alu"),
    ("nop", "nop"),
    ("it", "it"),
    ("mul", "mul"),
    ("mla mls", "mla"),
    ("smull umull", "mull"),
    ("smlal umlal umaal smlalbb smlalbt smlaltb smlaltt smlald smlaldx smlsld smlsldx", "mlal"),
    ("smulbb smulbt smultb smultt smulwb smulwt smuad smuadx smusd smusdx smmul smmulr", "dspmul"),
    ("smlabb smlabt smlatb smlatt smlawb smlawt smlad smladx smlsd smlsdx smmla smmlar smmls smmlsr", "dspmac"),
    ("sdiv udiv", "div"),
    ("ldr ldrb ldrh ldrsb ldrsh ldrt ldrbt ldrht ldrsbt ldrsht ldrex ldrexb ldrexh lda ldab ldah", "ld"),
    ("str strb strh strt strbt strht strex strexb strexh stl stlb stlh", "st"),
    ("ldrd", "ldd"),
    ("strd", "std"),
    ("ldm ldmia ldmfd ldmdb ldmea pop", "ldm"),
    ("stm stmia stmea stmdb stmfd push", "stm"),
    ("b", "b"),
    ("bl blx", "bl"),
    ("bx", "bx"),
    ("cbz cbnz", "cbz"),
    ("le letp wls wlstp", "lob"),
    ("dls dlstp", "alu"),
    ("tbb tbh", "tb"),
    ("dmb dsb isb", "barrier"),
    ("svc bkpt udf", "other"),
    ("vadd vsub vmul vnmul vabs vneg vcmp vcmpe vcvt vcvtr vcvta vcvtn vcvtp vcvtm vrinta vrintn vrintp vrintm "
     "vrintr vrintx vrintz vsel vmaxnm vminnm vmrs vmsr", "fp"),
    ("vmla vmls vnmla vnmls vfma vfms vfnma vfnms", "fpmac"),
    ("vdiv vsqrt", "fpdiv"),
    ("vldr", "fpld"),
    ("vstr", "fpst"),
    ("vldm vldmia vldmdb vpop", "fpldm"),
    ("vstm vstmia vstmdb vpush", "fpstm"),
    ("vmov", "fpmov"),
):
    for _n in _names.split():
        _CLASSES[_n] = _cls

# MVE (Armv8.1-M) mnemonics the approximated Cortex-M55 table prices (with a vector data type)
_MVE_LOADS = ("vldrb", "vldrh", "vldrw", "vldrd", "vld2", "vld4")
_MVE_STORES = ("vstrb", "vstrh", "vstrw", "vstrd", "vst2", "vst4")
_MVE_MACS = ("vmla", "vmlas", "vmlav", "vmlava", "vmladav", "vmladava", "vmlaldav", "vmlaldava", "vmul", "vmulh",
             "vqdmulh", "vqrdmulh", "vrmulh", "vfma", "vmullb", "vmullt", "vqdmladh", "vqrdmladh")


@dataclass(frozen=True)
class Insn:
    """One decoded instruction."""

    pc: int
    size: int  # bytes: 2 or 4
    mnemonic: str  # as objdump prints it, e.g. "ldr.w", "smlad", "popeq"
    operands: str
    cls: str  # the timing class (see _CLASSES; "mve_ld", "mve_st", "mve_mac", "mve" for MVE)
    writes: tuple[str, ...] = ()  # registers written (r0..r15)
    reads: tuple[str, ...] = ()  # registers read
    base: str | None = None  # the address register of a load or store
    nregs: int = 0  # registers moved by LDM/STM/PUSH/POP/VLDM/VSTM (S registers count one each, D two)
    writes_pc: bool = False  # a load multiple/pop of pc, an ldr/mov/add into pc
    literal: bool = False  # a PC-relative load (a literal pool in the code)
    conditional: bool = False  # a conditional branch (b<cond>, cbz, cbnz)


def _regs(text: str) -> list[str]:
    return [_ALIAS.get(r, r) for r in _REG.findall(text)]


def _reglist_count(text: str) -> int:
    m = re.search(r"\{([^}]*)\}", text)
    if not m:
        return 0
    n = 0
    for part in m.group(1).split(","):
        part = part.strip()
        if "-" in part:  # d8-d15 / s16-s31 / r4-r7
            a, b = part.split("-")
            width = 2 if a.strip().startswith("d") else 1
            n += (int(b.strip()[1:]) - int(a.strip()[1:]) + 1) * width
        elif part:
            n += 2 if part.startswith("d") else 1
    return n


def _strip(mnemonic: str) -> tuple[str, bool]:
    """The base mnemonic without width (.w/.n), data type (.f32, .s8) and condition suffixes, and
    whether a condition was removed."""
    base = mnemonic.split(".")[0]
    if base in _CLASSES or base in ("bl", "blx", "bx", "b"):
        return base, False
    for cond in _CONDS:
        if base.endswith(cond) and base[: -len(cond)] in _CLASSES:
            return base[: -len(cond)], True
    if base.endswith("s") and base[:-1] in _CLASSES:  # flag-setting forms: adds, movs, muls
        return base[:-1], False
    for cond in _CONDS:  # flag-setting and conditional: addseq
        if base.endswith(cond) and base[: -len(cond)].endswith("s") and base[: -len(cond) - 1] in _CLASSES:
            return base[: -len(cond) - 1], True
    return base, False


def classify(pc: int, size: int, mnemonic: str, operands: str) -> Insn:
    """One instruction from objdump's mnemonic and operand text."""
    ops = operands.split(";")[0].split("@")[0].strip()
    base, conditional = _strip(mnemonic)
    is_mve = bool(re.search(r"\bq[0-7]\b", ops)) or base in _MVE_LOADS + _MVE_STORES
    if base.startswith("it") and set(base[2:]) <= {"t", "e"}:
        base = "it"
    cls = _CLASSES.get(base, "alu")
    if is_mve:
        if base in _MVE_LOADS:
            cls = "mve_ld"
        elif base in _MVE_STORES:
            cls = "mve_st"
        elif base in _MVE_MACS:
            cls = "mve_mac"
        else:
            cls = "mve"
    regs = _regs(ops)
    writes: tuple[str, ...] = ()
    reads: tuple[str, ...] = tuple(regs)
    base_reg = None
    nregs = 0
    literal = False
    if cls in ("ld", "st", "ldd", "std", "fpld", "fpst", "mve_ld", "mve_st"):
        m = re.search(r"\[\s*([a-z0-9]+)", ops)
        base_reg = _ALIAS.get(m.group(1), m.group(1)) if m else None
        literal = base_reg == "r15" or (cls in ("ld", "ldd", "fpld") and "[" not in ops)
        if cls in ("ld", "ldd"):
            nd = 2 if cls == "ldd" else 1
            writes = tuple(regs[:nd])
            reads = tuple(regs[nd:])
    elif cls in ("ldm", "stm", "fpldm", "fpstm"):
        nregs = _reglist_count(ops)
        inside = re.search(r"\{([^}]*)\}", ops)
        listed = _regs(inside.group(1)) if inside else []
        if base in ("push", "pop", "vpush", "vpop"):
            base_reg = "r13"
        else:
            head = ops.split("{")[0]
            hr = _regs(head)
            base_reg = hr[0] if hr else None
        if cls == "ldm":
            writes = tuple(listed)
            reads = (base_reg,) if base_reg else ()
    elif cls not in ("b", "bl", "cbz", "it", "nop", "barrier", "tb") and regs:
        if cls in ("mull", "mlal"):
            writes = tuple(regs[:2])
        elif not base.startswith(("cmp", "cmn", "tst", "teq")) and cls not in ("bx",):
            writes = (regs[0],)
        reads = tuple(regs[1:]) if writes else tuple(regs)
        if cls == "mlal":
            reads = tuple(regs)
    writes_pc = "r15" in writes and cls not in ("b", "bl", "bx", "cbz")
    cond_branch = (cls == "b" and conditional) or cls == "cbz"
    return Insn(pc, size, mnemonic, ops, cls, writes, reads, base_reg, nregs, writes_pc, literal, cond_branch)


def _branch_class_fix(mnemonic: str) -> tuple[str, bool] | None:
    """b<cond>, bl, blx, bx: the plain condition strip above handles them except the 'b' forms
    whose condition reads like another mnemonic (bls = b + ls, not bl + s)."""
    base = mnemonic.split(".")[0]
    if base in ("b", "bl", "blx", "bx"):
        return base, False
    if base.startswith("b") and base[1:] in _CONDS:
        return "b", True
    if base.startswith("bx") and base[2:] in _CONDS:
        return "bx", True
    return None


def decode_text(text: str) -> dict[int, Insn]:
    """Parse `objdump -d` output into {address: Insn}."""
    out: dict[int, Insn] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        addr, hexes, mnem, ops = m.groups()
        if mnem.startswith("."):  # .word / .short: literal pool data
            continue
        size = 2 * len(hexes.split())
        fixed = _branch_class_fix(mnem)
        insn = classify(int(addr, 16), size, mnem, ops)
        if fixed is not None:
            base, cond = fixed
            cls = {"b": "b", "bl": "bl", "blx": "bl", "bx": "bx"}[base]
            if base == "blx" and _regs(ops):
                cls = "bl"
            insn = Insn(insn.pc, size, mnem, insn.operands, cls, (), tuple(_regs(ops)), None, 0, False, False,
                        cond and cls == "b")
        out[insn.pc] = insn
    return out


def _arch_option(elf: Path) -> list[str]:
    """objdump's -m for Armv8.1-M code: without it objdump prints MVE (Helium) instructions as
    coprocessor instructions (ldc, cdp2), whatever the ELF's build attributes say."""
    readelf = shutil.which("arm-none-eabi-readelf")
    if readelf is None:
        return []
    attrs = subprocess.run([readelf, "-A", str(elf)], capture_output=True, text=True).stdout
    return ["-m", "armv8.1-m.main"] if "v8.1-M" in attrs else []


def decode_elf(elf: Path) -> dict[int, Insn]:
    """Disassemble every executable section of `elf`."""
    objdump = shutil.which(OBJDUMP)
    if objdump is None:
        raise ToolchainError(f"{OBJDUMP} not found on PATH; install the GNU Arm Embedded toolchain")
    if not Path(elf).is_file():
        raise Error(f"{elf}: no such ELF file")
    proc = subprocess.run([objdump, "-d", *_arch_option(elf), str(elf)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise Error(f"{elf}: {OBJDUMP} failed: {proc.stderr.strip()[:300]}")
    return decode_text(proc.stdout)
