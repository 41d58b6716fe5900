"""Boards: the data files under boards/ as frozen dataclasses.

A board file (``boards/<name>.json``) names the CPU, its FPU and float ABI, the clock, the
memory regions and, for emulated boards, the QEMU machine:

```json
{"name": "mps2-an386", "description": "...", "cpu": "cortex-m4", "fpu": "fpv4-sp-d16",
 "float_abi": "hard", "dsp": true, "clock_hz": 25000000,
 "memory": [{"name": "code", "origin": "0x00000000", "size": 4194304, "kind": "flash",
             "pools": []},
            {"name": "data", "origin": "0x20000000", "size": 4194304, "kind": "ram",
             "pools": ["*"]}],
 "flash_region": "code", "ram_region": "data", "qemu_machine": "mps2-an386",
 "boot_reserved_bytes": 0, "notes": "..."}
```

- ``fpu`` is ``"none"`` or a GCC ``-mfpu`` name (``"auto"`` lets GCC derive it from -mcpu).
- A region's ``pools`` lists glob patterns (fnmatch) of the planned workspace pools that may
  be placed there; flash regions list none.
- ``flash_region`` receives the vector table, code, read-only data and the .data image;
  ``ram_region`` receives .data, .bss, the heap (if any) and the stack (at its top).
- ``const_region`` (optional) names a second flash region that receives the model's constant
  tables (weights, biases, quantization tables: the read-only data named ``<prefix>_const_*``),
  where the code region is small (the Cortex-M55's 512 KiB ITCM beside 2 MiB of SRAM).
- ``boot_reserved_bytes`` are kept free at the start of the flash region (RP2040's boot2).
- ``origin`` and ``size`` may be JSON integers or strings such as ``"0x20000000"``.
- ``console`` is the UART the firmware prints through: ``{"driver": "cmsdk_uart",
  "base": "0x40004000", "baud": 115200, "clock_hz": 25000000}`` (``clock_hz``: the UART's
  input clock after the board's init; ``tx_pin`` and ``rx_pin`` for Nordic parts; ``"lpuart": true`` for an
  STM32 LPUART). The driver is ``platform/cortex_m/console/<driver>.c``.
- ``soc`` names ``platform/cortex_m/soc/<soc>.c``: clocks and console pins, run before main
  (null: the reset state is enough).
- ``stack_bytes``: the default stack of the board's projects (16 KiB unless it says).
- ``memory_system`` (optional): flash wait states at ``clock_hz``, the flash accelerator and
  caches, TCMs: the memory the firmware runs from, for the cycle estimates (aot.timing.memsys).
- ``flash_tool``: how ``make flash`` programs a real board: ``{"tool": "pyocd", "target":
  "stm32l4r5zitx"}`` or ``{"tool": "uf2", "family": "0xe48bff56"}``; RISC-V boards also
  ``{"tool": "dfu-util", "device": "28e9:0189"}``, ``{"tool": "esptool", "chip": "esp32c3"}`` or
  ``{"tool": "openocd", "config": "board/sifive-hifive1-revb.cfg"}``.

RISC-V boards (aot.board.riscv) add ``isa`` (the GCC -march string, e.g. ``"rv32imac_zicsr"``;
its presence makes the board RISC-V), ``abi`` (``"ilp32"``), optionally ``qemu_cpu`` (QEMU's
-cpu, e.g. ``"rv32,v=true,vlen=128"``) and ``exit``, the emulated machine's way to end QEMU:
``{"device": "sifive_test", "base": "0x100000"}`` or ``{"device": "semihosting"}``. Their
``cpu`` is one of aot.board.riscv.RISCV_CPUS, ``fpu`` is ``"none"`` and ``float_abi`` ``"soft"``.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aot.assets import asset_dir
from aot.errors import Error

REGION_KINDS = ("flash", "ram")
FLOAT_ABIS = ("soft", "softfp", "hard")

# cpu -> (LLVM triple without the float-ABI suffix, architecture family)
_CPUS: dict[str, tuple[str, str]] = {
    "cortex-m0": ("thumbv6m-none-eabi", "armv6-m"),
    "cortex-m0plus": ("thumbv6m-none-eabi", "armv6-m"),
    "cortex-m3": ("thumbv7m-none-eabi", "armv7-m"),
    "cortex-m4": ("thumbv7em-none-eabi", "armv7e-m"),
    "cortex-m7": ("thumbv7em-none-eabi", "armv7e-m"),
    "cortex-m33": ("thumbv8m.main-none-eabi", "armv8-m.main"),
    "cortex-m55": ("thumbv8.1m.main-none-eabi", "armv8.1-m.main"),
}

# GCC -mfpu name -> LLVM target features
_FPU_LLVM_FEATURES: dict[str, tuple[str, ...]] = {
    "fpv4-sp-d16": ("+vfp4d16sp", "-fp64"),
    "fpv5-sp-d16": ("+fp-armv8d16sp", "-fp64"),
    "fpv5-d16": ("+fp-armv8d16", "+fp64"),
}

_BOARD_KEYS = {
    "name", "description", "cpu", "fpu", "float_abi", "dsp", "clock_hz", "memory",
    "flash_region", "ram_region", "qemu_machine", "boot_reserved_bytes", "notes",
    "console", "soc", "stack_bytes", "flash_tool", "qemu_clock_hz", "const_region", "memory_system",
    "isa", "abi", "qemu_cpu", "exit",
}
_OPTIONAL_KEYS = {"description", "qemu_machine", "boot_reserved_bytes", "notes", "soc", "stack_bytes",
                  "flash_tool", "qemu_clock_hz", "const_region", "memory_system",
                  "isa", "abi", "qemu_cpu", "exit"}
CONSOLE_DRIVERS = ("cmsdk_uart", "stm32_usart_f4", "stm32_usart", "nrf_uart", "nrf_uarte", "pl011_uart",
                   "ns16550", "sifive_uart", "gd32v_usart", "esp32c3_uart")
_CONSOLE_KEYS = {"driver", "base", "baud", "clock_hz", "tx_pin", "rx_pin", "rx_irqs", "lpuart", "note"}
FLASH_TOOLS = ("pyocd", "uf2", "dfu-util", "esptool", "openocd")
# cores with a DWT cycle counter (CYCCNT); ARMv6-M cores have none
DWT_CPUS = ("cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
DEFAULT_STACK_BYTES = 16384


@dataclass(frozen=True)
class Console:
    """The UART a board's firmware prints through."""

    driver: str
    base: int
    baud: int
    clock_hz: int
    tx_pin: int | None = None
    lpuart: bool = False
    note: str = ""
    rx_pin: int | None = None  # Nordic parts: the receive pin (the validation firmware reads the console)
    # NVIC lines the console's receive interrupt may come on (one 32-line word): the validation
    # firmware sleeps (WFI, interrupts masked, no handler) until a byte arrives instead of polling
    rx_irqs: tuple[int, ...] = ()

    def defines(self) -> list[str]:
        out = [f"AOT_CONSOLE_BASE=0x{self.base:08X}u", f"AOT_CONSOLE_BAUD={self.baud}u",
               f"AOT_CONSOLE_CLOCK_HZ={self.clock_hz}u"]
        if self.tx_pin is not None:
            out.append(f"AOT_CONSOLE_TX_PIN={self.tx_pin}u")
        if self.rx_pin is not None:
            out.append(f"AOT_CONSOLE_RX_PIN={self.rx_pin}u")
        if self.lpuart:
            out.append("AOT_CONSOLE_LPUART=1")
        if self.rx_irqs:
            mask = sum(1 << (n % 32) for n in self.rx_irqs)
            out += [f"AOT_CONSOLE_RX_IRQ_WORD={self.rx_irqs[0] // 32}u", f"AOT_CONSOLE_RX_IRQ_MASK=0x{mask:08X}u"]
        return out
_REGION_KEYS = {"name", "origin", "size", "kind", "pools", "note"}


@dataclass(frozen=True)
class MemoryRegion:
    """One contiguous memory range of a board."""

    name: str
    origin: int
    size: int
    kind: str  # "flash" | "ram"
    pools: tuple[str, ...] = ()
    note: str = ""

    @property
    def end(self) -> int:
        return self.origin + self.size

    def accepts_pool(self, pool_name: str) -> bool:
        """True when a planned pool of this name may be placed in this region."""
        return any(fnmatch.fnmatchcase(pool_name, pattern) for pattern in self.pools)


@dataclass(frozen=True)
class Board:
    """A target board: CPU, FPU, clock, memory map and (if emulated) QEMU machine."""

    name: str
    description: str
    cpu: str
    fpu: str
    float_abi: str
    dsp: bool
    clock_hz: int
    memory: tuple[MemoryRegion, ...]
    flash_region: str
    ram_region: str
    qemu_machine: str | None = None
    boot_reserved_bytes: int = 0
    notes: str = ""
    console: Console | None = None
    soc: str | None = None
    stack_bytes: int = DEFAULT_STACK_BYTES
    flash_tool: tuple[tuple[str, str], ...] = ()
    # the clock QEMU gives SysTick (the emulated machine's, when it differs from clock_hz)
    qemu_clock_hz: int | None = None
    # a flash region for the model's constant tables (None: the flash region)
    const_region: str | None = None
    # flash wait states, caches and TCMs at clock_hz, as plain data (aot.timing.memsys reads it)
    memory_system: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # RISC-V: the GCC -march string (None: an Arm board), the ABI, QEMU's -cpu, the exit device
    isa: str | None = None
    abi: str = ""
    qemu_cpu: str | None = None
    exit: tuple[tuple[str, str], ...] = ()

    @property
    def arch(self) -> str:
        """"riscv" for a board with an ISA string, else "arm"."""
        return "riscv" if self.isa is not None else "arm"

    @property
    def is_riscv(self) -> bool:
        return self.isa is not None

    @property
    def has_vector(self) -> bool:
        """The core has the RISC-V V extension (RVV 1.0)."""
        from aot.board.riscv import isa_extensions
        return self.isa is not None and "v" in isa_extensions(self.isa)

    @property
    def cross_prefix(self) -> str:
        """The GNU toolchain's prefix: arm-none-eabi- or riscv64-unknown-elf-."""
        return "riscv64-unknown-elf-" if self.is_riscv else "arm-none-eabi-"

    @property
    def qemu_binary(self) -> str:
        return "qemu-system-riscv32" if self.is_riscv else "qemu-system-arm"

    @property
    def exit_dict(self) -> dict[str, str]:
        return dict(self.exit)

    @property
    def has_dwt(self) -> bool:
        """The core has a DWT cycle counter (QEMU does not model it: emulated runs use SysTick)."""
        return self.cpu in DWT_CPUS

    @property
    def flash_tool_dict(self) -> dict[str, str]:
        return dict(self.flash_tool)

    # ---- memory ------------------------------------------------------------------------
    def region(self, name: str) -> MemoryRegion:
        for r in self.memory:
            if r.name == name:
                return r
        known = ", ".join(r.name for r in self.memory)
        raise Error(f"board {self.name!r} has no memory region {name!r} (regions: {known})")

    @property
    def flash(self) -> MemoryRegion:
        return self.region(self.flash_region)

    @property
    def ram(self) -> MemoryRegion:
        return self.region(self.ram_region)

    @property
    def flash_bytes(self) -> int:
        """Total bytes of every flash region (boot-reserved bytes included)."""
        return sum(r.size for r in self.memory if r.kind == "flash")

    @property
    def ram_bytes(self) -> int:
        """Total bytes of every RAM region."""
        return sum(r.size for r in self.memory if r.kind == "ram")

    # ---- emulation -----------------------------------------------------------------------
    @property
    def emulated(self) -> bool:
        return self.qemu_machine is not None

    def qemu_args(self) -> list[str]:
        """qemu-system-arm arguments (without -kernel) that run this board's images with a
        deterministic instruction clock (-icount shift=0): the console UART on stdout
        (-nographic), -no-reboot so that the image's reset request ends QEMU, and semihosting
        enabled for `--io semihosting` images."""
        if self.qemu_machine is None:
            raise Error(f"board {self.name!r} is not emulated (no qemu_machine)")
        if self.is_riscv:
            from aot.board.riscv import riscv_qemu_args
            return riscv_qemu_args(self)
        return [
            "-machine", self.qemu_machine, "-nographic", "-no-reboot",
            "-semihosting-config", "enable=on,target=native", "-icount", "shift=0",
        ]

    @property
    def timer_clock_hz(self) -> int:
        """The SysTick clock of the image: QEMU's machine clock when emulated."""
        return self.qemu_clock_hz or self.clock_hz

    @property
    def qemu_instructions_per_tick(self) -> float:
        """Under QEMU -icount shift=0 an instruction is 1 ns; SysTick runs at the machine clock."""
        return 1e9 / self.timer_clock_hz

    # ---- toolchains ----------------------------------------------------------------------
    @property
    def has_fpu(self) -> bool:
        return self.fpu != "none"

    def gcc_flags(self) -> list[str]:
        """CPU flags for arm-none-eabi-gcc (compile and link) or riscv64-unknown-elf-gcc (compile)."""
        if self.isa is not None:
            return [f"-march={self.isa}", f"-mabi={self.abi}"]
        flags = [f"-mcpu={self.cpu}", "-mthumb"]
        if self.has_fpu:
            flags.append(f"-mfpu={self.fpu}")
        flags.append(f"-mfloat-abi={self.float_abi}")
        return flags

    def link_flags(self) -> list[str]:
        """CPU flags of the link: RISC-V links name the C library's multilib (aot.board.riscv)."""
        if self.isa is not None:
            from aot.board.riscv import multilib_isa
            return [f"-march={multilib_isa(self.isa)}", f"-mabi={self.abi}"]
        return self.gcc_flags()

    def llvm_triple(self) -> str:
        if self.isa is not None:
            return "riscv32-unknown-elf"
        triple = _CPUS[self.cpu][0]
        return triple + "hf" if self.float_abi == "hard" else triple

    def llvm_cpu(self) -> str:
        return "generic-rv32" if self.isa is not None else self.cpu

    def llvm_features(self) -> str:
        """LLVM target features matching gcc_flags() (DSP and FPU explicit)."""
        if self.isa is not None:
            from aot.board.riscv import llvm_features
            return llvm_features(self.isa)
        features: list[str] = ["+dsp" if self.dsp else "-dsp"]
        if self.cpu == "cortex-m55":
            if self.has_fpu:
                features += ["+fp-armv8d16", "+fp64", "+mve.fp"]
            else:
                features += ["-fpregs", "+mve"]
        elif self.has_fpu:
            features += list(_FPU_LLVM_FEATURES[self.fpu])
        elif self.cpu not in ("cortex-m0", "cortex-m0plus", "cortex-m3"):
            features.append("-fpregs")
        if self.float_abi == "soft" and self.has_fpu:
            features.append("+soft-float")
        return ",".join(features)

    def to_dict(self) -> dict[str, Any]:
        """The board as a JSON-ready dict (the file format, with integer addresses)."""
        data = asdict(self)
        data["memory"] = [asdict(r) | {"pools": list(r.pools)} for r in self.memory]
        data["flash_tool"] = dict(self.flash_tool) or None
        data["exit"] = dict(self.exit) or None
        if self.isa is None:
            for key in ("isa", "abi", "qemu_cpu", "exit"):
                data.pop(key)
        return data


# ---- loading -----------------------------------------------------------------------------
def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise Error(f"{what}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            pass
    raise Error(f"{what}: expected an integer or a string like '0x20000000', got {value!r}")


def _board_from_dict(data: dict[str, Any], source: str) -> Board:
    if not isinstance(data, dict):
        raise Error(f"{source}: a board file holds a JSON object")
    unknown = set(data) - _BOARD_KEYS
    if unknown:
        raise Error(f"{source}: unknown board keys {sorted(unknown)}")
    required = _BOARD_KEYS - _OPTIONAL_KEYS
    missing = required - set(data)
    if missing:
        raise Error(f"{source}: missing board keys {sorted(missing)}")

    regions = []
    for i, raw in enumerate(data["memory"]):
        where = f"{source}: memory[{i}]"
        if not isinstance(raw, dict) or set(raw) - _REGION_KEYS:
            raise Error(f"{where}: expected keys among {sorted(_REGION_KEYS)}")
        kind = raw.get("kind")
        if kind not in REGION_KINDS:
            raise Error(f"{where}: kind must be one of {REGION_KINDS}, got {kind!r}")
        region = MemoryRegion(
            name=str(raw["name"]),
            origin=_as_int(raw["origin"], f"{where}.origin"),
            size=_as_int(raw["size"], f"{where}.size"),
            kind=kind,
            pools=tuple(str(p) for p in raw.get("pools", ())),
            note=str(raw.get("note", "")),
        )
        if region.size <= 0 or region.origin < 0 or region.end > 1 << 32:
            raise Error(f"{where}: region {region.name!r} is outside the 32-bit address space")
        regions.append(region)

    board = Board(
        name=str(data["name"]),
        description=str(data.get("description", "")),
        cpu=str(data["cpu"]),
        fpu=str(data["fpu"]),
        float_abi=str(data["float_abi"]),
        dsp=bool(data["dsp"]),
        clock_hz=_as_int(data["clock_hz"], f"{source}: clock_hz"),
        memory=tuple(regions),
        flash_region=str(data["flash_region"]),
        ram_region=str(data["ram_region"]),
        qemu_machine=data.get("qemu_machine"),
        boot_reserved_bytes=_as_int(data.get("boot_reserved_bytes", 0), f"{source}: boot_reserved_bytes"),
        notes=str(data.get("notes", "")),
        console=_console_from_dict(data["console"], source),
        soc=data.get("soc"),
        stack_bytes=_as_int(data.get("stack_bytes", DEFAULT_STACK_BYTES), f"{source}: stack_bytes"),
        flash_tool=_flash_tool(data.get("flash_tool"), source),
        qemu_clock_hz=(_as_int(data["qemu_clock_hz"], f"{source}: qemu_clock_hz")
                       if data.get("qemu_clock_hz") is not None else None),
        const_region=str(data["const_region"]) if data.get("const_region") is not None else None,
        memory_system=data.get("memory_system"),
        isa=str(data["isa"]) if data.get("isa") is not None else None,
        abi=str(data.get("abi", "")),
        qemu_cpu=str(data["qemu_cpu"]) if data.get("qemu_cpu") is not None else None,
        exit=tuple(sorted((str(k), str(v)) for k, v in (data.get("exit") or {}).items())),
    )
    _validate(board, source)
    if board.memory_system is not None:
        from aot.timing.memsys import memory_system_from_dict
        memory_system_from_dict(board.memory_system, source)
    return board


def _console_from_dict(raw: Any, source: str) -> Console:
    if isinstance(raw, Console):
        return raw
    if not isinstance(raw, dict) or set(raw) - _CONSOLE_KEYS or not {"driver", "base", "baud", "clock_hz"} <= set(raw):
        raise Error(f"{source}: console needs driver, base, baud, clock_hz (keys among {sorted(_CONSOLE_KEYS)})")
    if raw["driver"] not in CONSOLE_DRIVERS:
        raise Error(f"{source}: unknown console driver {raw['driver']!r}; known: {', '.join(CONSOLE_DRIVERS)}")
    return Console(
        driver=str(raw["driver"]),
        base=_as_int(raw["base"], f"{source}: console.base"),
        baud=_as_int(raw["baud"], f"{source}: console.baud"),
        clock_hz=_as_int(raw["clock_hz"], f"{source}: console.clock_hz"),
        tx_pin=_as_int(raw["tx_pin"], f"{source}: console.tx_pin") if raw.get("tx_pin") is not None else None,
        lpuart=bool(raw.get("lpuart", False)),
        note=str(raw.get("note", "")),
        rx_pin=_as_int(raw["rx_pin"], f"{source}: console.rx_pin") if raw.get("rx_pin") is not None else None,
        rx_irqs=_rx_irqs(raw.get("rx_irqs"), source),
    )


def _rx_irqs(raw: Any, source: str) -> tuple[int, ...]:
    if raw is None or (isinstance(raw, (list, tuple)) and not raw):  # none (Board.to_dict writes ())
        return ()
    if not isinstance(raw, (list, tuple)):
        raise Error(f"{source}: console.rx_irqs must be a list of NVIC interrupt numbers, e.g. [0, 1]")
    irqs = tuple(_as_int(n, f"{source}: console.rx_irqs") for n in raw)
    if len({n // 32 for n in irqs}) != 1 or min(irqs) < 0:
        raise Error(f"{source}: console.rx_irqs {list(irqs)} must lie in one group of 32 (0-31, 32-63, ...)")
    return irqs


def _flash_tool(raw: Any, source: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict) or raw.get("tool") not in FLASH_TOOLS:
        raise Error(f"{source}: flash_tool needs a tool among {FLASH_TOOLS}")
    return tuple(sorted((str(k), str(v)) for k, v in raw.items()))


def _validate(board: Board, source: str) -> None:
    if board.isa is not None or board.abi or board.qemu_cpu or board.exit:
        from aot.board.riscv import validate_riscv
        validate_riscv(board, source)
    elif board.cpu not in _CPUS:
        raise Error(f"{source}: unknown cpu {board.cpu!r}; known: {sorted(_CPUS)}")
    if board.float_abi not in FLOAT_ABIS:
        raise Error(f"{source}: float_abi must be one of {FLOAT_ABIS}, got {board.float_abi!r}")
    if board.float_abi != "soft" and not board.has_fpu:
        raise Error(f"{source}: float_abi {board.float_abi!r} needs an fpu")
    if board.has_fpu and board.fpu != "auto" and board.fpu not in _FPU_LLVM_FEATURES:
        raise Error(f"{source}: unknown fpu {board.fpu!r}; known: none, auto, {sorted(_FPU_LLVM_FEATURES)}")
    if board.clock_hz <= 0:
        raise Error(f"{source}: clock_hz must be positive")
    names = [r.name for r in board.memory]
    if len(set(names)) != len(names):
        raise Error(f"{source}: duplicate memory region names {names}")
    ordered = sorted(board.memory, key=lambda r: r.origin)
    for a, b in zip(ordered, ordered[1:]):
        if a.end > b.origin:
            raise Error(f"{source}: memory regions {a.name!r} and {b.name!r} overlap")
    if board.region(board.flash_region).kind != "flash":
        raise Error(f"{source}: flash_region {board.flash_region!r} is not a flash region")
    if board.region(board.ram_region).kind != "ram":
        raise Error(f"{source}: ram_region {board.ram_region!r} is not a ram region")
    if board.const_region is not None and board.region(board.const_region).kind != "flash":
        raise Error(f"{source}: const_region {board.const_region!r} is not a flash region")
    if not 0 <= board.boot_reserved_bytes < board.flash.size:
        raise Error(f"{source}: boot_reserved_bytes does not fit the flash region")
    if not 0 < board.stack_bytes < board.ram.size:
        raise Error(f"{source}: stack_bytes must be positive and smaller than the ram region")
    if board.soc is not None and not board.soc.replace("_", "").isalnum():
        raise Error(f"{source}: soc {board.soc!r} is not a plain name")


def _board_files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(asset_dir("boards").glob("*.json"))}


def load_board(name_or_path: str | Path) -> Board:
    """A board by name (``"mps2-an385"``) or by path to a board JSON file."""
    path = Path(name_or_path)
    if not (path.suffix == ".json" or path.is_file()):
        files = _board_files()
        if str(name_or_path) not in files:
            known = ", ".join(files)
            raise Error(f"unknown board {str(name_or_path)!r}; known boards: {known}")
        path = files[str(name_or_path)]
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise Error(f"board file {path} does not exist; known boards: {', '.join(_board_files())}") from None
    except json.JSONDecodeError as exc:
        raise Error(f"board file {path} is not valid JSON: {exc}") from None
    return _board_from_dict(data, path.name)


def list_boards() -> list[Board]:
    """Every board shipped in boards/, sorted by name."""
    return [load_board(path) for path in _board_files().values()]
