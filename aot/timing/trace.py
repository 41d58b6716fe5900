"""The executed trace of one function call in QEMU, without changing the firmware.

A small QEMU TCG plugin (trace_plugin.c, built here with the host C compiler on first use)
records every instruction executed from the first instruction of the entry function until
execution returns to its caller, with the address and size of every data access. QEMU runs
the ELF exactly as `aot run` does (-icount shift=0), so the recorded run is the measured one.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from aot.errors import Error, ToolchainError
from aot.timing.decode import Insn
from aot.timing.model import Access, Executed

PLUGIN_SOURCE = Path(__file__).with_name("trace_plugin.c")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "microaot"


def build_plugin() -> Path:
    """The compiled plugin (cached by the hash of its source)."""
    src = PLUGIN_SOURCE.read_bytes()
    digest = hashlib.sha256(src).hexdigest()[:16]
    out = _cache_dir() / f"trace_plugin_{digest}.so"
    if out.is_file():
        return out
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ToolchainError("a host C compiler (cc or gcc) is needed to build the QEMU trace plugin")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable home: a per-user directory under the temporary directory
        out = Path(tempfile.gettempdir()) / f"microaot-{os.getuid()}" / out.name
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.is_file():
            return out
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
                           "-o", str(tmp), str(PLUGIN_SOURCE)], capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ToolchainError(f"building the QEMU trace plugin failed: {proc.stderr.strip()[:500]}")
    os.replace(tmp, out)
    return out


@dataclass(frozen=True)
class RawTrace:
    """The plugin's words: even = an executed PC; odd = a data access (then its address)."""

    words: np.ndarray
    stdout: str

    @property
    def empty(self) -> bool:
        return self.words.size == 0


def record(elf: Path, qemu_args: list[str], entry: int, timeout_s: float = 600) -> RawTrace:
    """Run `elf` in QEMU with the trace plugin, recording one call of the function at `entry`."""
    qemu = shutil.which("qemu-system-arm")
    if qemu is None:
        raise ToolchainError("qemu-system-arm not found on PATH; install QEMU (Debian: qemu-system-arm)")
    plugin = build_plugin()
    with tempfile.TemporaryDirectory(prefix="aot_trace_") as tmp:
        out = Path(tmp) / "trace.bin"
        cmd = [qemu, *qemu_args, "-plugin", f"{plugin},entry=0x{entry & ~1:x},out={out}", "-kernel", str(elf)]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"QEMU did not finish {elf} within {timeout_s} s while tracing") from None
        if not out.is_file():
            raise ToolchainError(f"QEMU wrote no trace (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
        words = np.fromfile(out, dtype="<u4")
    return RawTrace(words, proc.stdout)


def _words(raw: RawTrace, chunk: int = 1 << 20) -> Iterator[int]:
    for start in range(0, raw.words.size, chunk):
        yield from raw.words[start:start + chunk].tolist()


def executed(raw: RawTrace, insns: dict[int, Insn]) -> Iterator[Executed]:
    """The executed instructions of a raw trace, decoded with the ELF's disassembly."""
    words = _words(raw)
    cur: Insn | None = None
    acc: list[Access] = []
    for w in words:
        if w & 1:
            address = next(words, None)
            if address is None:
                break
            acc.append(Access(address, 1 << ((w >> 1) & 3), bool(w & 8)))
            continue
        insn = insns.get(w)
        if insn is None:
            raise Error(f"the trace executed 0x{w:08x}, which the ELF's disassembly does not hold "
                        f"(code outside the ELF's sections?)")
        if cur is not None:
            yield Executed(cur, w, tuple(acc))
        cur, acc = insn, []
    if cur is not None:
        yield Executed(cur, None, tuple(acc))
