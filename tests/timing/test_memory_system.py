"""Board files' memory systems and the cache model."""
from __future__ import annotations

import pytest

from aot.board.boards import list_boards, load_board
from aot.errors import Error
from aot.timing.memsys import CacheSpec, LruCache, memory_system_from_dict

REAL_WITH_MEMORY = ["nucleo-l4r5zi", "stm32f746g-disco", "nrf52840-dk", "rpi-pico"]


@pytest.mark.parametrize("name", REAL_WITH_MEMORY)
def test_real_boards_describe_their_memory_system(name: str) -> None:
    board = load_board(name)
    ms = memory_system_from_dict(board.memory_system, name)
    assert ms.source and (ms.wait_states > 0 or ms.miss_cycles)
    assert ms.caches


def test_the_l4r5_runs_with_five_wait_states_and_the_art_caches() -> None:
    ms = memory_system_from_dict(load_board("nucleo-l4r5zi").memory_system)
    assert ms.wait_states == 5 and ms.read_bytes == 8
    assert {c.serves for c in ms.caches if c.enabled} == {"instruction", "data"}
    assert ms.with_caches_enabled().prefetch


def test_every_board_file_still_loads() -> None:
    assert {b.name for b in list_boards()} >= set(REAL_WITH_MEMORY)


@pytest.mark.parametrize("raw, words", [
    ({"flash": {"wait_states": -1}}, "non-negative"),
    ({"flash": {"speed": 3}}, "memory_system.flash keys"),
    ({"caches": [{"serves": "code", "bytes": 64, "line_bytes": 8}]}, "serves must be"),
    ({"caches": [{"serves": "data", "bytes": 48, "line_bytes": 8, "ways": 4}]}, "whole sets"),
    ({"cache": []}, "memory_system keys"),
])
def test_bad_memory_systems_are_refused(raw: dict, words: str) -> None:
    with pytest.raises(Error, match=words):
        memory_system_from_dict(raw, "b.json")


def test_a_bad_memory_system_in_a_board_file_is_refused(tmp_path) -> None:  # noqa: ANN001
    import json
    data = load_board("nucleo-l4r5zi").to_dict()
    data["memory_system"] = {"flash": {"wait_states": "five"}}
    p = tmp_path / "b.json"
    p.write_text(json.dumps(data))
    with pytest.raises(Error, match="wait_states"):
        load_board(p)


def test_lru_cache_two_ways() -> None:
    c = LruCache(CacheSpec("c", "data", 32, 8, ways=2))  # 4 lines, 2 sets of 2 ways
    # lines 0, 2, 4 map to set 0: the third evicts the least recently used
    assert [c.access(a) for a in (0, 16, 0, 32, 16, 0)] == [False, False, True, False, False, False]
    assert (c.hits, c.misses) == (1, 5)
    full = LruCache(CacheSpec("f", "data", 32, 8))  # fully associative: 4 lines
    assert [full.access(a) for a in (0, 8, 16, 24, 0, 32, 8)] == [False] * 4 + [True, False, False]


@pytest.mark.parametrize("name, cpu, machine", [("nucleo-u575zi-q", "cortex-m33", "mps2-an505"),
                                                ("nucleo-h7a3zi-q", "cortex-m7", "mps2-an500")])
def test_timing_only_parts_run_on_the_machine_of_their_core(name: str, cpu: str, machine: str) -> None:
    from aot.timing.estimate import emulator_for
    from aot.timing.parts import resolve_board
    part = resolve_board(name)
    assert part.cpu == cpu and not part.emulated and part.memory_system
    assert memory_system_from_dict(part.memory_system, name).caches
    assert emulator_for(part).name == machine



def test_a_board_survives_its_dict_round_trip() -> None:
    """Board.to_dict, as it is and through JSON, loads back to the same board: the console's receive
    interrupts included (a board with them and one without)."""
    import json
    from aot.board.boards import _board_from_dict
    for name in ("mps2-an386", "nucleo-l4r5zi"):
        b = load_board(name)
        for data in (b.to_dict(), json.loads(json.dumps(b.to_dict()))):
            assert _board_from_dict(data, name).console == b.console
    assert load_board("mps2-an386").console.rx_irqs
    assert not load_board("nucleo-l4r5zi").console.rx_irqs
