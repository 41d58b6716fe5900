"""Tests of the static memory planner (aot.memory): every planner's output is checked for
overlap and alignment by a checker written here, independently of aot.memory.check_plan."""
from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aot.errors import Error, FitError
from aot.memory import (
    PLANNERS,
    BufferRequest,
    MemoryPlan,
    check_plan,
    default_iterations,
    lower_bound,
    plan,
    plan_greedy_conflicts,
    plan_greedy_size,
    plan_search,
    require_fit,
)

ALL_PLANNERS = (*PLANNERS, "best")
FAST_SEARCH = dict(max_iters=60)  # a small iteration budget (the search never reads the clock)


# ---------------------------------------------------------------------------------------
# Independent oracles.


def overlapping_pairs(requests, offsets) -> list[tuple[str, str]]:
    """Every pair of nonzero buffers live at a common step whose byte ranges intersect."""
    bad = []
    for a, b in itertools.combinations(requests, 2):
        if a.size == 0 or b.size == 0:
            continue
        live_together = a.first_use <= b.last_use and b.first_use <= a.last_use
        oa, ob = offsets[a.name], offsets[b.name]
        share_bytes = oa < ob + b.size and ob < oa + a.size
        if live_together and share_bytes:
            bad.append((a.name, b.name))
    return bad


def live_bytes_bound(requests) -> int:
    steps = {s for r in requests for s in range(r.first_use, r.last_use + 1)}
    return max(
        (sum(r.size for r in requests if r.first_use <= s <= r.last_use) for s in steps),
        default=0,
    )


def assert_valid(requests, p: MemoryPlan) -> None:
    assert set(p.offsets) == {r.name for r in requests}
    assert overlapping_pairs(requests, p.offsets) == []
    for r in requests:
        assert p.offsets[r.name] >= 0
        assert p.offsets[r.name] % r.alignment == 0, (r, p.offsets[r.name])
        if r.size == 0:
            assert p.offsets[r.name] == 0
    assert p.peak_bytes == max((p.offsets[r.name] + r.size for r in requests), default=0)
    assert p.lower_bound_bytes == live_bytes_bound(requests)
    assert p.peak_bytes >= p.lower_bound_bytes


def reference_first_fit_peak(requests, order) -> int:
    """Place `order` one at a time at the lowest aligned offset clearing live buffers.

    That offset is 0 or the end of a blocking buffer rounded up to the alignment (if x is
    the lowest and x - alignment is blocked by q, then x - alignment < q's end <= x).
    """
    placed: dict[str, int] = {}

    def clashes(r, off):
        return any(
            q.size > 0
            and q.first_use <= r.last_use
            and r.first_use <= q.last_use
            and placed[q.name] < off + r.size
            and off < placed[q.name] + q.size
            for q in requests
            if q.name in placed
        )

    for r in order:
        ends = [placed[q.name] + q.size for q in requests if q.name in placed]
        candidates = sorted({0} | {-(-e // r.alignment) * r.alignment for e in ends})
        placed[r.name] = 0 if r.size == 0 else next(x for x in candidates if not clashes(r, x))
    return max((placed[r.name] + r.size for r in requests), default=0)


def random_requests(rng: random.Random, n: int, steps: int, max_len: int, alignments=(16,)):
    out = []
    for i in range(n):
        first = rng.randrange(steps)
        last = min(steps - 1, first + rng.randrange(max_len))
        size = rng.choice([0, rng.randrange(1, 64), rng.randrange(1, 4096), 16 * rng.randrange(1, 256)])
        out.append(BufferRequest(f"t{i}", size, first, last, rng.choice(alignments)))
    return out


@st.composite
def request_sets(draw, max_buffers=24):
    n = draw(st.integers(0, max_buffers))
    reqs = []
    for i in range(n):
        first = draw(st.integers(0, 12))
        reqs.append(
            BufferRequest(
                name=f"b{i}",
                size=draw(st.one_of(st.just(0), st.integers(1, 300), st.integers(1, 5000))),
                first_use=first,
                last_use=first + draw(st.integers(0, 6)),
                alignment=draw(st.sampled_from([1, 4, 16, 64])),
            )
        )
    return reqs


def run(requests, planner: str) -> MemoryPlan:
    return plan(requests, planner, seed=0, **FAST_SEARCH)


# ---------------------------------------------------------------------------------------
# The oracle itself can fail.


def test_overlap_oracle_flags_a_known_overlap():
    a = BufferRequest("a", 32, 0, 2)
    b = BufferRequest("b", 32, 2, 3)
    c = BufferRequest("c", 32, 3, 4)  # not live with a
    assert overlapping_pairs([a, b, c], {"a": 0, "b": 16, "c": 0}) == [("a", "b"), ("b", "c")]
    assert overlapping_pairs([a, b, c], {"a": 0, "b": 32, "c": 0}) == []


# ---------------------------------------------------------------------------------------
# Properties over random interval sets.


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_sets())
def test_every_planner_gives_a_valid_plan(requests):
    peaks = {}
    for name in ALL_PLANNERS:
        p = run(requests, name)
        assert_valid(requests, p)
        check_plan(requests, p)  # and the library's own checker agrees
        peaks[name] = p.peak_bytes
        assert p.planner == name if name != "best" else p.planner in PLANNERS
    assert peaks["best"] == min(peaks[n] for n in PLANNERS)
    assert peaks["search"] <= min(peaks["greedy-size"], peaks["greedy-conflicts"])


@pytest.mark.parametrize("alignment", [1, 4, 16, 64])
def test_offsets_aligned_on_seeded_sets(alignment):
    rng = random.Random(alignment)
    for _ in range(5):
        reqs = random_requests(rng, 50, 30, 8, alignments=(alignment,))
        for name in ALL_PLANNERS:
            p = run(reqs, name)
            assert_valid(reqs, p)
            assert all(off % alignment == 0 for off in p.offsets.values())


def test_mixed_alignments_on_seeded_sets():
    rng = random.Random(7)
    for _ in range(5):
        reqs = random_requests(rng, 80, 40, 10, alignments=(1, 2, 4, 8, 16, 32, 64))
        for name in ALL_PLANNERS:
            assert_valid(reqs, run(reqs, name))


def test_single_planner_functions_match_plan():
    reqs = random_requests(random.Random(3), 40, 25, 6)
    assert plan_greedy_size(reqs) == plan(reqs, "greedy-size")
    assert plan_greedy_conflicts(reqs) == plan(reqs, "greedy-conflicts")
    assert plan_search(reqs, seed=5, **FAST_SEARCH) == plan(reqs, "search", seed=5, **FAST_SEARCH)


def test_search_reaches_the_optimum_over_all_orders_on_small_sets():
    # Some order placed first fit is optimal, so brute force over orders gives the optimum.
    rng = random.Random(11)
    for _ in range(80):
        reqs = random_requests(rng, rng.randrange(2, 7), 6, 4, alignments=(1, 4, 16))
        optimum = min(reference_first_fit_peak(reqs, order) for order in itertools.permutations(reqs))
        p = plan_search(reqs, max_iters=300)
        assert_valid(reqs, p)
        assert p.peak_bytes == optimum, reqs


# ---------------------------------------------------------------------------------------
# A case greedy-size gets wrong.

#  D (32 B) lives over steps 0-2 and A (64 B) at step 1; C (16 B) lives over steps 2-4 and
#  B (80 B) at step 3. At most 96 B are live at once. Largest first puts B and A at 0, then
#  D above A (64) and C above both D and B (96): 112 B. Optimal: D 0, A 32, B 0, C 80.
SUBOPTIMAL_FOR_GREEDY_SIZE = [
    BufferRequest("A", 64, 1, 1),
    BufferRequest("B", 80, 3, 3),
    BufferRequest("C", 16, 2, 4),
    BufferRequest("D", 32, 0, 2),
]


def test_greedy_size_is_suboptimal_and_search_finds_the_optimum():
    reqs = SUBOPTIMAL_FOR_GREEDY_SIZE
    assert lower_bound(reqs) == 96
    greedy = plan_greedy_size(reqs)
    assert greedy.offsets == {"A": 0, "B": 0, "C": 96, "D": 64}
    assert greedy.peak_bytes == 112
    searched = plan_search(reqs, seed=0, max_iters=200)
    assert_valid(reqs, searched)
    assert searched.peak_bytes == 96 == searched.lower_bound_bytes
    best = plan(reqs, "best", max_iters=200)
    assert best.peak_bytes == 96
    assert best.planner in ("greedy-conflicts", "search")


def test_greedy_conflicts_orders_by_size_times_conflicts():
    # Live bytes: step 0 B+D = 80, step 1 A+B = 48, step 2 A+C = 80.
    # size x conflicts: C 64x1 = 64, B 32x2 = 64, D 48x1 = 48, A 16x2 = 32 -> C B D A:
    # C 0, B 0, D above B (32), A above C (64): 80 B. Largest first (C D B A) needs 96 B;
    # most conflicts first (B A C D) would need 112 B.
    reqs = [
        BufferRequest("A", 16, 1, 2),
        BufferRequest("B", 32, 0, 1),
        BufferRequest("C", 64, 2, 2),
        BufferRequest("D", 48, 0, 0),
    ]
    p = plan_greedy_conflicts(reqs)
    assert p.offsets == {"A": 64, "B": 0, "C": 0, "D": 32}
    assert p.peak_bytes == 80 == p.lower_bound_bytes
    assert plan_greedy_size(reqs).peak_bytes == 96
    assert plan(reqs).planner == "greedy-conflicts"


def test_first_fit_fills_an_exact_gap():
    # Largest first: P and Q at 0, R above P (100); S fits exactly between Q and R.
    reqs = [
        BufferRequest("P", 100, 0, 0, alignment=1),
        BufferRequest("Q", 60, 1, 1, alignment=1),
        BufferRequest("R", 40, 0, 1, alignment=1),
        BufferRequest("S", 40, 1, 1, alignment=1),
    ]
    p = plan_greedy_size(reqs)
    assert p.offsets == {"P": 0, "Q": 0, "R": 100, "S": 60}
    assert p.peak_bytes == 140 == p.lower_bound_bytes


# ---------------------------------------------------------------------------------------
# Determinism.


def test_same_input_same_output():
    reqs = random_requests(random.Random(21), 60, 40, 10)
    for name in ALL_PLANNERS:
        first = plan(reqs, name, seed=3, max_iters=400)
        again = plan(list(reqs), name, seed=3, max_iters=400)
        assert first == again
        assert list(first.offsets) == list(again.offsets)


def test_output_does_not_depend_on_request_order():
    reqs = random_requests(random.Random(22), 60, 40, 10)
    shuffled = list(reqs)
    random.Random(0).shuffle(shuffled)
    for name in ALL_PLANNERS:
        assert run(reqs, name) == run(shuffled, name)


def test_default_search_is_deterministic():
    # max_iters=None picks an iteration count from the problem size, not from the clock
    # (tests/test_reproducible.py runs it under CPU load).
    reqs = random_requests(random.Random(23), 40, 30, 8)
    assert plan_search(reqs) == plan_search(reqs)
    assert plan_search(reqs) == plan_search(reqs, max_iters=default_iterations(reqs))


def test_seed_and_budget_change_the_search_deterministically():
    # A problem the search cannot solve to the lower bound: each (seed, budget) gives one
    # plan, never worse than the greedy start; a zero budget is that start.
    reqs = random_requests(random.Random(42), 100, 100, 20)
    zero = plan_search(reqs, max_iters=0)
    greedy = min(plan_greedy_size(reqs).peak_bytes, plan_greedy_conflicts(reqs).peak_bytes)
    assert zero.peak_bytes == greedy > zero.lower_bound_bytes
    runs = {seed: plan_search(reqs, seed=seed, max_iters=300) for seed in (0, 1)}
    for seed, p in runs.items():
        assert plan_search(reqs, seed=seed, max_iters=300) == p
        assert p.peak_bytes <= greedy
        check_plan(reqs, p)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_bad_iteration_budget_rejected(bad):
    with pytest.raises(ValueError, match="max_iters"):
        plan_search([BufferRequest("a", 4, 0, 0)], max_iters=bad)
    with pytest.raises(ValueError, match="max_iters"):
        plan([BufferRequest("a", 4, 0, 0)], "best", max_iters=bad)


# ---------------------------------------------------------------------------------------
# Edge cases and inputs.


def test_empty_and_zero_size():
    for name in ALL_PLANNERS:
        empty = run([], name)
        assert (empty.offsets, empty.peak_bytes, empty.lower_bound_bytes) == ({}, 0, 0)
    reqs = [
        BufferRequest("z", 0, 0, 5, alignment=64),
        BufferRequest("a", 48, 0, 5, alignment=64),
        BufferRequest("z2", 0, 1, 1),
    ]
    for name in ALL_PLANNERS:
        p = run(reqs, name)
        assert p.offsets == {"a": 0, "z": 0, "z2": 0}
        assert p.peak_bytes == 48 == p.lower_bound_bytes


def test_disjoint_lifetimes_share_memory():
    reqs = [BufferRequest(f"t{i}", 100 + i, i, i) for i in range(10)]
    for name in ALL_PLANNERS:
        p = run(reqs, name)
        assert set(p.offsets.values()) == {0}
        assert p.peak_bytes == 109 == p.lower_bound_bytes


def test_alignment_padding():
    reqs = [BufferRequest("a", 5, 0, 1, alignment=1), BufferRequest("b", 4, 0, 1, alignment=64)]
    peaks = {}
    for name in ALL_PLANNERS:
        p = run(reqs, name)
        assert_valid(reqs, p)
        assert p.lower_bound_bytes == 9
        peaks[name] = p.peak_bytes
    assert peaks["greedy-size"] == 68  # a (larger) at 0, b rounded up to 64
    assert peaks["search"] == peaks["best"] == 9  # b at 0, a at 4


def test_lower_bound():
    assert lower_bound([]) == 0
    reqs = [
        BufferRequest("a", 10, 0, 1),
        BufferRequest("b", 20, 1, 2),
        BufferRequest("c", 40, 2, 2),
        BufferRequest("d", 1000, 5, 5),
    ]
    assert lower_bound(reqs) == 1000
    assert lower_bound(reqs[:3]) == 60  # step 2: b + c; a ended at step 1 inclusive
    assert lower_bound(reqs[:2]) == 30


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(name="x", size=-1, first_use=0, last_use=0),
        dict(name="x", size=4, first_use=3, last_use=2),
        dict(name="x", size=4, first_use=-1, last_use=2),
        dict(name="x", size=4, first_use=0, last_use=0, alignment=0),
        dict(name="", size=4, first_use=0, last_use=0),
        dict(name="x", size=4.0, first_use=0, last_use=0),
    ],
)
def test_bad_request_rejected(kwargs):
    with pytest.raises(ValueError):
        BufferRequest(**kwargs)


def test_duplicate_names_rejected():
    with pytest.raises(ValueError, match="duplicate"):
        plan_greedy_size([BufferRequest("a", 4, 0, 0), BufferRequest("a", 8, 1, 1)])


def test_unknown_planner_raises_product_error_naming_valid_ones():
    with pytest.raises(Error) as info:
        plan([BufferRequest("a", 4, 0, 0)], "tflm")
    message = str(info.value)
    assert "tflm" in message
    for name in ALL_PLANNERS:
        assert name in message


# ---------------------------------------------------------------------------------------
# check_plan.


def test_check_plan_catches_corrupted_plans():
    reqs = random_requests(random.Random(31), 30, 15, 6)
    good = plan_greedy_size(reqs)
    check_plan(reqs, good)

    # Move one live buffer onto another one live at the same time.
    a, b = next(
        (a, b)
        for a, b in itertools.combinations(reqs, 2)
        if a.size and b.size and a.first_use <= b.last_use and b.first_use <= a.last_use
    )
    overlapped = dict(good.offsets, **{b.name: good.offsets[a.name]})
    with pytest.raises(ValueError, match="overlap"):
        check_plan(reqs, MemoryPlan(overlapped, good.peak_bytes, good.lower_bound_bytes, "x"))

    victim = next(r for r in reqs if r.alignment > 1 and r.size)
    misaligned = dict(good.offsets, **{victim.name: good.offsets[victim.name] + 1})
    with pytest.raises(ValueError):
        check_plan(reqs, MemoryPlan(misaligned, good.peak_bytes + 1, good.lower_bound_bytes, "x"))

    with pytest.raises(ValueError, match="peak"):
        check_plan(reqs, MemoryPlan(good.offsets, good.peak_bytes - 1, good.lower_bound_bytes, "x"))

    missing = {k: v for k, v in good.offsets.items() if k != reqs[0].name}
    with pytest.raises(ValueError, match="missing"):
        check_plan(reqs, MemoryPlan(missing, good.peak_bytes, good.lower_bound_bytes, "x"))

    with pytest.raises(ValueError):
        check_plan(reqs, MemoryPlan(dict(good.offsets, **{a.name: -16}), good.peak_bytes,
                                    good.lower_bound_bytes, "x"))


def test_check_plan_misalignment_message():
    reqs = [BufferRequest("a", 8, 0, 0, alignment=16)]
    with pytest.raises(ValueError, match="not aligned"):
        check_plan(reqs, MemoryPlan({"a": 8}, 16, 8, "x"))


# ---------------------------------------------------------------------------------------
# Fit against a pool.


def test_require_fit():
    reqs = SUBOPTIMAL_FOR_GREEDY_SIZE
    p = plan_greedy_size(reqs)
    require_fit(reqs, p, pool_size=112, pool_name="SRAM")
    with pytest.raises(FitError) as info:
        require_fit(reqs, p, pool_size=100, pool_name="SRAM")
    message = str(info.value)
    assert "112" in message and "100" in message and "SRAM" in message
    assert "B (80 B" in message  # the largest buffer is named first


# ---------------------------------------------------------------------------------------
# Work bound (an iteration count from the problem size; no wall-clock assertions).


def test_greedy_planners_on_1000_buffers():
    reqs = random_requests(random.Random(41), 1000, 1000, 40)
    for fn in (plan_greedy_size, plan_greedy_conflicts):
        check_plan(reqs, fn(reqs))


def test_default_budget_shrinks_as_the_problem_grows():
    # The default budget keeps iterations x (buffers + conflicting pairs) about constant, so
    # the search's work (not its time) is bounded whatever the model's size.
    rng = random.Random(44)
    small = default_iterations(random_requests(rng, 12, 12, 3))
    medium = default_iterations(random_requests(rng, 100, 100, 20))
    large = default_iterations(random_requests(rng, 1000, 1000, 40))
    huge = default_iterations(random_requests(rng, 2000, 200, 100))
    assert small == 5000 >= medium > large > huge == 10
    assert default_iterations([]) == 5000


def test_search_on_300_buffers_never_loses_to_greedy():
    reqs = random_requests(random.Random(43), 300, 200, 40)
    p = plan_search(reqs)
    check_plan(reqs, p)
    assert p.peak_bytes <= min(plan_greedy_size(reqs).peak_bytes,
                               plan_greedy_conflicts(reqs).peak_bytes)


# ---------------------------------------------------------------------------------------
# Plot.


def test_draw_plan_writes_png(tmp_path):
    import matplotlib  # noqa: F401  (a test dependency)
    from aot.memory.plot import draw_plan

    reqs = random_requests(random.Random(51), 30, 20, 6)
    p = plan(reqs, **FAST_SEARCH)
    out = tmp_path / "plan.png"
    draw_plan(reqs, p, str(out), title="30 buffers")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 1000
    empty = tmp_path / "empty.png"
    draw_plan([], run([], "best"), str(empty))
    assert empty.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
