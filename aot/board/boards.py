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
- ``boot_reserved_bytes`` are kept free at the start of the flash region (RP2040's boot2).
- ``origin`` and ``size`` may be JSON integers or strings such as ``"0x20000000"``.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aot.assets import asset_dir
from aot.errors import Error

REGION_KINDS = ("flash", "ram")
FLOAT_ABIS = ("soft", "softfp", "hard")

# cpu -> (LLVM triple without the float-ABI suffix, architecture family)
_CPUS: dict[str, tuple[str, str]] = {
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
}
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
        """qemu-system-arm arguments (without -kernel) that run this board's images with
        semihosting and a deterministic instruction clock (-icount shift=0)."""
        if self.qemu_machine is None:
            raise Error(f"board {self.name!r} is not emulated (no qemu_machine)")
        return [
            "-machine", self.qemu_machine, "-nographic",
            "-semihosting-config", "enable=on,target=native", "-icount", "shift=0",
        ]

    @property
    def qemu_instructions_per_tick(self) -> float:
        """Under QEMU -icount shift=0 an instruction is 1 ns; SysTick runs at clock_hz."""
        return 1e9 / self.clock_hz

    # ---- toolchains ----------------------------------------------------------------------
    @property
    def has_fpu(self) -> bool:
        return self.fpu != "none"

    def gcc_flags(self) -> list[str]:
        """CPU flags for arm-none-eabi-gcc (compile and link)."""
        flags = [f"-mcpu={self.cpu}", "-mthumb"]
        if self.has_fpu:
            flags.append(f"-mfpu={self.fpu}")
        flags.append(f"-mfloat-abi={self.float_abi}")
        return flags

    def llvm_triple(self) -> str:
        triple = _CPUS[self.cpu][0]
        return triple + "hf" if self.float_abi == "hard" else triple

    def llvm_cpu(self) -> str:
        return self.cpu

    def llvm_features(self) -> str:
        """LLVM target features matching gcc_flags() (DSP and FPU explicit)."""
        features: list[str] = ["+dsp" if self.dsp else "-dsp"]
        if self.cpu == "cortex-m55":
            if self.has_fpu:
                features += ["+fp-armv8d16", "+fp64", "+mve.fp"]
            else:
                features += ["-fpregs", "+mve"]
        elif self.has_fpu:
            features += list(_FPU_LLVM_FEATURES[self.fpu])
        elif self.cpu != "cortex-m0plus" and self.cpu != "cortex-m3":
            features.append("-fpregs")
        if self.float_abi == "soft" and self.has_fpu:
            features.append("+soft-float")
        return ",".join(features)

    def to_dict(self) -> dict[str, Any]:
        """The board as a JSON-ready dict (the file format, with integer addresses)."""
        data = asdict(self)
        data["memory"] = [asdict(r) | {"pools": list(r.pools)} for r in self.memory]
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
    required = _BOARD_KEYS - {"description", "qemu_machine", "boot_reserved_bytes", "notes"}
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
    )
    _validate(board, source)
    return board


def _validate(board: Board, source: str) -> None:
    if board.cpu not in _CPUS:
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
    if not 0 <= board.boot_reserved_bytes < board.flash.size:
        raise Error(f"{source}: boot_reserved_bytes does not fit the flash region")


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
