"""Build a generated board project with make and run its ELF in QEMU.

The ELF (see aot/board/project/templates/main.c.j2) prints one result per line:

    AOT_STATUS <rc>            AOT_TIMER <kind>            AOT_INSTRUCTIONS <n>   AOT_TICKS <n>
    AOT_CYCLES <n>             (hardware builds: DWT or SysTick cycles instead of instructions)
    AOT_OUTPUT <index> <hex>   AOT_MATCH 1|0               (only with expected outputs)
    AOT_FAULT <what>           (a HardFault ended the run; the exit code is 3)
    AOT_EXIT <code>            (console builds: main's return value)

By default the image prints through the board's console UART, which QEMU connects to its
stdout (-nographic), and ends QEMU with a reset request (-no-reboot): the exit code is then
the one the image printed on its AOT_EXIT line. `--io semihosting` images print through
semihosting and QEMU's own exit code is the image's. QEMU runs with `-icount shift=0`, so
AOT_INSTRUCTIONS is deterministic: SysTick ticks once per 1e9 / (machine clock) guest
instructions (40 on the 25 MHz MPS2 boards).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from aot.board.boards import Board
from aot.errors import Error, FitError, ToolchainError

QEMU_BINARY = "qemu-system-arm"
_LINE = re.compile(r"^(AOT_[A-Z_]+)(?: (.*))?$")
_OVERFLOW = re.compile(r"region `?([A-Za-z0-9_]+)'? overflowed by (\d+) bytes|region ([A-Za-z0-9_]+) overflowed")


@dataclass(frozen=True)
class QemuResult:
    """What one QEMU run of a project ELF reported."""

    exit_code: int
    stdout: str
    instructions: int | None
    outputs: list[bytes] = field(default_factory=list)
    status: int | None = None
    match: bool | None = None
    ticks: int | None = None
    stderr: str = ""
    fault: str | None = None
    cycles: int | None = None
    timer: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.status == 0 and self.match is not False and self.fault is None


def parse_output(text: str) -> dict:
    """The AOT_* lines of a run as {"status", "instructions", "ticks", "outputs", "match", "fault",
    "cycles", "timer", "exit"}."""
    status = instructions = ticks = cycles = exit_code = None
    timer = None
    match = None
    fault = None
    outputs: dict[int, bytes] = {}
    for raw in text.splitlines():
        m = _LINE.match(raw.strip())
        if not m:
            continue
        tag, rest = m.group(1), (m.group(2) or "").strip()
        try:
            if tag == "AOT_STATUS":
                status = int(rest)
            elif tag == "AOT_INSTRUCTIONS":
                instructions = int(rest)
            elif tag == "AOT_TICKS":
                ticks = int(rest)
            elif tag == "AOT_CYCLES":
                cycles = int(rest)
            elif tag == "AOT_TIMER":
                timer = rest
            elif tag == "AOT_EXIT":
                exit_code = int(rest)
            elif tag == "AOT_FAULT":
                fault = rest or "fault"
            elif tag == "AOT_MATCH":
                match = rest == "1"
            elif tag == "AOT_OUTPUT":
                index, _, hex_bytes = rest.partition(" ")
                outputs[int(index)] = bytes.fromhex(hex_bytes.strip())
        except ValueError as exc:
            raise ToolchainError(f"malformed result line {raw!r} from the device: {exc}") from None
    if outputs and sorted(outputs) != list(range(len(outputs))):
        raise ToolchainError(f"device printed outputs {sorted(outputs)}, expected 0..{len(outputs) - 1}")
    return {
        "status": status,
        "instructions": instructions,
        "ticks": ticks,
        "outputs": [outputs[i] for i in range(len(outputs))],
        "match": match,
        "fault": fault,
        "cycles": cycles,
        "timer": timer,
        "exit": exit_code,
    }


def qemu_command(elf: Path, board: Board) -> list[str]:
    if not board.emulated:
        raise ToolchainError(
            f"board {board.name!r} is not emulated (no QEMU machine); build its project and "
            f"flash the ELF on hardware instead"
        )
    binary = board.qemu_binary
    qemu = shutil.which(binary)
    if qemu is None:
        package = "qemu-system-misc" if board.is_riscv else "qemu-system-arm"
        raise ToolchainError(f"{binary} not found on PATH; install QEMU (Debian: {package})")
    return [qemu, *board.qemu_args(), "-kernel", str(elf)]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_elf(elf: Path, board: Board, timeout_s: float = 120) -> QemuResult:
    """Run `elf` on `board`'s QEMU machine and parse its result lines."""
    elf = Path(elf)
    cmd = qemu_command(elf, board)
    if not elf.is_file():
        raise ToolchainError(f"ELF {elf} does not exist; build the project first")
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        stdout, stderr = proc.communicate()
        tail = (stdout or "")[-2000:]
        raise ToolchainError(
            f"QEMU ({board.qemu_machine}) did not finish {elf.name} within {timeout_s} s and was "
            f"killed (a hang in startup, a fault loop, or a very long model). Output so far:\n{tail}"
        ) from None
    parsed = parse_output(stdout)
    exit_code = proc.returncode
    if exit_code == 0 and parsed["exit"] is not None:
        exit_code = parsed["exit"]  # a console image ended QEMU by a reset request
    return QemuResult(
        exit_code=exit_code,
        stdout=stdout,
        instructions=parsed["instructions"],
        outputs=parsed["outputs"],
        status=parsed["status"],
        match=parsed["match"],
        ticks=parsed["ticks"],
        stderr=stderr,
        fault=parsed["fault"],
        cycles=parsed["cycles"],
        timer=parsed["timer"],
    )


def _elf_of(project_dir: Path) -> Path:
    meta = project_dir / "project.json"
    if meta.is_file():
        return project_dir / json.loads(meta.read_text())["elf"]
    return project_dir / "build" / "firmware.elf"


def _is_riscv_project(project_dir: Path) -> bool:
    """The generated project targets a RISC-V board (its board.json has an ISA string)."""
    try:
        return json.loads((project_dir / "board.json").read_text()).get("isa") is not None
    except (OSError, json.JSONDecodeError):
        return False


def build_project(project_dir: Path, jobs: int = 2, timeout_s: float = 600) -> Path:
    """Build a generated project with make; return the ELF's path.

    Raises ToolchainError with the tail of the compiler's output when the build fails,
    FitError when the linker reports that a memory region overflowed."""
    project_dir = Path(project_dir)
    if not (project_dir / "Makefile").is_file():
        raise Error(f"{project_dir} is not a generated project (no Makefile)")
    make = shutil.which("make")
    if make is None:
        raise ToolchainError("make not found on PATH; install make (Debian: make)")
    if _is_riscv_project(project_dir):
        if shutil.which("riscv64-unknown-elf-gcc") is None:
            raise ToolchainError(
                "riscv64-unknown-elf-gcc not found on PATH; install the RISC-V toolchain "
                "(Debian: gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf)"
            )
    elif shutil.which("arm-none-eabi-gcc") is None:
        raise ToolchainError(
            "arm-none-eabi-gcc not found on PATH; install the GNU Arm Embedded toolchain "
            "(Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi)"
        )
    try:
        proc = subprocess.run(
            [make, "-C", str(project_dir), f"-j{max(1, int(jobs))}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"building {project_dir} took longer than {timeout_s} s") from None
    if proc.returncode != 0:
        log = (proc.stdout + proc.stderr).strip()
        errors = proc.stderr.strip() or proc.stdout.strip()
        tail = "\n".join(errors.splitlines()[-30:])
        overflow = _OVERFLOW.search(log)
        if overflow:
            raise FitError(f"the image does not fit the board's memory ({overflow.group(0)}):\n{tail}")
        if "overflowed:" in log:
            raise FitError(f"the image does not fit the board's memory:\n{tail}")
        raise ToolchainError(f"building {project_dir} failed (make exit code {proc.returncode}):\n{tail}")
    elf = _elf_of(project_dir)
    if not elf.is_file():
        raise ToolchainError(f"make succeeded but {elf} was not produced")
    return elf
