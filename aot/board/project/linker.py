"""Linker scripts for board projects, and the placement of planned pools in board memory.

Pool convention (shared with the C and LLVM backends): a planned workspace pool named ``P``
is a static array in the input section ``.bss.aot_pool.P`` (``.aot_pool.P`` works too; the
``.bss.`` prefix keeps it zero-initialised NOBITS data in host builds without our script).
The generated script collects the pools placed in one memory region into one NOLOAD output
section: ``.aot_pool`` for the board's ram_region and ``.aot_pool_<region>`` for any other
RAM region. Pool input sections without a listed name (``.bss.aot_pool``, ``.aot_pool``, or
a name metadata.json does not list) land in ``.aot_pool``: placement in another region
needs the per-pool section name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from aot.board.boards import Board, MemoryRegion
from aot.errors import Error, FitError

from aot.board.project.render import render

_POOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Pool:
    """A planned workspace pool of a model library (metadata.json "pools")."""

    name: str
    size: int


def ld_region_name(region: MemoryRegion) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", region.name).upper()


def pool_section_name(board: Board, region_name: str) -> str:
    if region_name == board.ram_region:
        return ".aot_pool"
    return ".aot_pool_" + re.sub(r"[^A-Za-z0-9_]", "_", region_name)


def place_pools(
    board: Board,
    pools: list[Pool],
    placement: dict[str, str] | None,
    reserved_ram_bytes: int,
) -> dict[str, str]:
    """Region name for every pool: `placement` where given, else the first RAM region (in
    board order) that accepts the pool and still has room, largest pools first.

    `reserved_ram_bytes` (stack + heap) is kept free in the board's ram_region. Raises
    FitError when a pool fits nowhere, Error on an invalid explicit placement."""
    placement = dict(placement or {})
    names = {p.name for p in pools}
    for p in pools:
        if not _POOL_NAME.match(p.name):
            raise Error(f"pool name {p.name!r} is not a C identifier")
    unknown = sorted(set(placement) - names)
    if unknown:
        raise Error(f"pool_placement names unknown pools {unknown}; the model's pools: {sorted(names)}")

    if reserved_ram_bytes > board.ram.size:
        raise FitError(
            f"stack and heap ({reserved_ram_bytes} bytes) do not fit region {board.ram_region!r} "
            f"of board {board.name} ({board.ram.size} bytes)"
        )
    free = {r.name: r.size for r in board.memory if r.kind == "ram"}
    free[board.ram_region] -= reserved_ram_bytes
    result: dict[str, str] = {}
    for p in pools:
        if p.name not in placement:
            continue
        region_name = placement[p.name]
        region = board.region(region_name)
        if region.kind != "ram":
            raise Error(f"pool {p.name!r} cannot be placed in {region.kind} region {region_name!r}")
        if not region.accepts_pool(p.name):
            raise Error(
                f"board {board.name} does not allow pool {p.name!r} in region {region_name!r} "
                f"(it accepts {list(region.pools)})"
            )
        free[region_name] -= p.size
        result[p.name] = region_name

    for p in sorted((p for p in pools if p.name not in placement), key=lambda p: (-p.size, p.name)):
        for region in board.memory:
            if region.kind == "ram" and region.accepts_pool(p.name) and free[region.name] >= p.size:
                free[region.name] -= p.size
                result[p.name] = region.name
                break
        else:
            room = ", ".join(f"{name}: {max(n, 0)} bytes free" for name, n in free.items())
            raise FitError(
                f"pool {p.name!r} needs {p.size} bytes but no RAM region of board {board.name} "
                f"has room ({room}; {reserved_ram_bytes} bytes of {board.ram_region} kept for "
                f"stack and heap)"
            )

    for region_name, left in free.items():
        if left < 0:
            region = board.region(region_name)
            placed = sorted(p.name for p in pools if result.get(p.name) == region_name)
            need = sum(p.size for p in pools if result.get(p.name) == region_name)
            kept = reserved_ram_bytes if region_name == board.ram_region else 0
            raise FitError(
                f"pools {placed} need {need} bytes in region {region_name!r} of board "
                f"{board.name}, which has {region.size} bytes ({kept} kept for stack and heap)"
            )
    return {p.name: result[p.name] for p in pools}


def render_linker_script(
    board: Board,
    pools: list[Pool],
    placement: dict[str, str],
    *,
    stack_bytes: int,
    heap_bytes: int,
    const_ram: bool = False,
) -> str:
    """The linker script text for `board` with pools placed as `placement` says; `const_ram`:
    the model's constant tables (<prefix>_const_*) go to .data, copied to RAM at start."""
    regions = [
        {
            "ld_name": ld_region_name(r),
            "attrs": "rx" if r.kind == "flash" else "rwx",
            "origin": f"0x{r.origin:08X}",
            "size": f"0x{r.size:08X}",
        }
        for r in board.memory
    ]
    sections = []
    # Other regions first: the ram_region's catch-all pattern must not capture their pools.
    for region in sorted(
        (r for r in board.memory if r.kind == "ram"), key=lambda r: r.name == board.ram_region
    ):
        in_region = [p.name for p in pools if placement.get(p.name) == region.name]
        is_main = region.name == board.ram_region
        if not in_region and not is_main:
            continue
        section = pool_section_name(board, region.name)
        ident = section.lstrip(".")
        sections.append(
            {
                "region": region.name,
                "region_ld": ld_region_name(region),
                "section": section,
                "pools": in_region,
                "catch_all": is_main,
                "start_symbol": f"__{ident}_start",
                "end_symbol": f"__{ident}_end",
            }
        )
    return render(
        "linker_riscv.ld.j2" if board.is_riscv else "linker.ld.j2",
        board=board,
        regions=regions,
        flash={"ld_name": ld_region_name(board.flash)},
        const={"ld_name": ld_region_name(board.region(board.const_region))}
        if board.const_region and not const_ram else None,
        const_ram=const_ram,
        ram={"ld_name": ld_region_name(board.ram)},
        boot_reserved_bytes=board.boot_reserved_bytes,
        stack_bytes=stack_bytes,
        heap_bytes=heap_bytes,
        pool_sections=sections,
    )
