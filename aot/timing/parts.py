"""Timing-only parts: boards the product has no firmware support for (no start-up code, no
console), described only by their core, clock and memory system so that published
measurements on them can be set beside an estimate (`aot cycles MODEL --board PART`).

The code runs on the emulated machine of the part's core, exactly as for a real board.
"""
from __future__ import annotations

from typing import Any

from aot.board.boards import Board, _board_from_dict, load_board
from aot.errors import Error

PARTS: dict[str, dict[str, Any]] = {
    "nucleo-u575zi-q": {
        "description": "ST NUCLEO-U575ZI-Q: STM32U575ZI, Cortex-M33 at 160 MHz (timing only)",
        "cpu": "cortex-m33", "fpu": "fpv5-sp-d16", "float_abi": "hard", "dsp": True, "clock_hz": 160_000_000,
        "flash_bytes": 2 * 1024 * 1024, "ram_bytes": 786_432,
        "memory_system": {
            "flash": {"wait_states": 4, "read_bytes": 16, "prefetch": True,
                      "note": "4 wait states at 160 MHz (voltage range 1); 128-bit flash reads"},
            "caches": [{"name": "ICACHE", "serves": "both", "bytes": 8192, "line_bytes": 16, "ways": 2,
                        "enabled": True,
                        "note": "8 KiB, 2-way, 16-byte lines on the fast C-bus (code and constants in flash)"}],
            "ram_wait_states": 0, "tcm": [],
            "source": "STM32U575 reference manual RM0456 (flash latency, ICACHE); values as recalled, to check",
            "note": "a timing-only part: the ICACHE on, as ST's benchmark firmware runs it"},
    },
    "nucleo-h7a3zi-q": {
        "description": "ST NUCLEO-H7A3ZI-Q: STM32H7A3ZI, Cortex-M7 at 280 MHz (timing only)",
        "cpu": "cortex-m7", "fpu": "fpv5-d16", "float_abi": "hard", "dsp": True, "clock_hz": 280_000_000,
        "flash_bytes": 2 * 1024 * 1024, "ram_bytes": 1_114_112,
        "memory_system": {
            "flash": {"wait_states": 6, "read_bytes": 16, "prefetch": True,
                      "note": "ASSUMED 6 wait states at 280 MHz (VOS0) on the AXI flash; 128-bit reads"},
            "caches": [
                {"name": "L1 instruction cache", "serves": "instruction", "bytes": 16384, "line_bytes": 32,
                 "ways": 2, "enabled": True, "note": "Cortex-M7 L1 I-cache, 16 KiB on the H7A3"},
                {"name": "L1 data cache", "serves": "data", "bytes": 16384, "line_bytes": 32, "ways": 4,
                 "enabled": True, "note": "Cortex-M7 L1 D-cache, 16 KiB on the H7A3"}],
            "ram_wait_states": 0, "tcm": ["dtcm"],
            "source": "STM32H7A3 reference manual RM0455 (flash latency), Cortex-M7 TRM (L1 caches); "
                      "wait states assumed",
            "note": "a timing-only part: L1 caches on, as ST's benchmark firmware runs it"},
    },
}


def part_names() -> list[str]:
    return sorted(PARTS)


def load_part(name: str) -> Board:
    """A timing-only part as a Board (not emulated, no console driver of its own)."""
    if name not in PARTS:
        raise Error(f"unknown timing part {name!r}; known: {', '.join(part_names())}")
    p = PARTS[name]
    emu = load_board({"cortex-m33": "mps2-an505", "cortex-m7": "mps2-an500"}[p["cpu"]])
    data = emu.to_dict()
    data.update(name=name, description=p["description"], cpu=p["cpu"], fpu=p["fpu"], float_abi=p["float_abi"],
                dsp=p["dsp"], clock_hz=p["clock_hz"], memory_system=p["memory_system"], qemu_machine=None,
                qemu_clock_hz=None, flash_tool=None, notes="timing only: no firmware support")
    for region in data["memory"]:
        region["size"] = min(region["size"], p["flash_bytes"] if region["kind"] == "flash" else p["ram_bytes"])
    return _board_from_dict(data, f"part {name}")


def resolve_board(name: str | Board) -> Board:
    """A board by name or path, or a timing-only part."""
    if isinstance(name, Board):
        return name
    if str(name) in PARTS:
        return load_part(str(name))
    try:
        return load_board(name)
    except Error as e:
        if str(e).startswith("unknown board"):
            raise Error(f"{e}; timing-only parts: {', '.join(part_names())}") from None
        raise
