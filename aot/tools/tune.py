"""`aot tune`: a search over each layer's schedule knobs, scored by QEMU instructions (or, with the
option optimize="cycles", which the default "auto" is on a board whose flash costs cycles, by the
estimated cycles of aot.timing on the board's memory system).

The knobs are those of aot.lower.tuning (per layer: `opt` speed/size, and `widen`, int8 weights
pre-widened to 16-bit pairs on DSP cores, or kept int8, instead of the default flash policy's choice). A candidate is a sparse config {layer: {knob: value}}
(the knobs that differ from the default build; {} is the default build itself); each is one task
(aot.execute.cells.tune_trial: board build, QEMU run, footprint) on the local pool or on Ray.

Search (seeded, so the same seed and the same measurements give the same candidates): the first
generation holds the default build and the all-widened one; each later generation of `parallel`
candidates is bred from the best feasible configs measured so far (tournament of the top few,
uniform crossover of two parents, one or two knob mutations), never measuring a config twice.
A candidate is feasible when its run is bit-exact with the host build and its flash and RAM stay
within the budgets. The number of candidates per generation does not depend on the executor,
so a Ray session and a local one measure the same candidates.

The tuning log is JSON lines, one record per measured candidate (appended as it is measured,
each line whole): model (name and sha256 of its file), board, options, config, figures. With
`--tuning-log FILE`, compile/project/run apply the best feasible record of that model
(best_schedules): the fewest instructions, ties broken by trial number, so the choice is
deterministic.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Mapping, Sequence

from aot.errors import Error
from aot.execute import Progress, Task, run_tasks
from aot.execute.cells import model_digest

LOG_VERSION = 1
SCHEDULED_OPS = ("conv2d", "fully_connected", "depthwise_conv2d")
WIDEN_OPS = ("conv2d", "fully_connected")  # int8 GEMM schedules that can pre-widen weights
DEFAULT_PARALLEL = 4

Config = dict[str, dict[str, Any]]


def layer_knobs(model_path: Path, board: str, options: Mapping[str, Any]) -> dict[str, dict[str, list]]:
    """The tunable layers of the model on this board: {layer: {knob: [choices, default first]}}
    (the first choice is the default build's: a config leaves it out)."""
    from aot.board.boards import load_board
    from aot.board.flow import board_options
    from aot.frontend import load
    from aot.pipeline.driver import compile_model

    o = board_options(load_board(board), {"source_bytes": Path(model_path).stat().st_size, **options})
    compiled = compile_model(load(model_path), o)
    base = o.opt
    opts = [base] + [x for x in ("speed", "size") if x != base]
    dsp = "dsp" in (o.cpu_features or ())
    out: dict[str, dict[str, list]] = {}
    for fn in compiled.fused.functions.values():
        if not fn.primitive:
            continue
        ops = {c.op_name for c in fn.body}
        if not ops & set(SCHEDULED_OPS):
            continue
        knobs: dict[str, list] = {"opt": opts}
        if dsp and ops & set(WIDEN_OPS):
            knobs["widen"] = [None, True, False]  # None: as the default build's flash policy decides
        out[fn.name] = knobs
    return out


def _canon(config: Mapping[str, Mapping[str, Any]], space: Mapping[str, Mapping[str, list]]) -> Config:
    """Only the knobs that differ from the default (the first choice), sorted."""
    out: Config = {}
    for layer in sorted(config):
        k = {n: v for n, v in sorted(config[layer].items()) if v != space[layer][n][0]}
        if k:
            out[layer] = k
    return out


def _key(config: Config) -> str:
    return json.dumps(config, sort_keys=True)


def _value(config: Config, space: Mapping[str, Mapping[str, list]], layer: str, knob: str) -> Any:
    return config.get(layer, {}).get(knob, space[layer][knob][0])


def _mutate(rng: random.Random, config: Config, space: Mapping[str, Mapping[str, list]]) -> Config:
    child = {layer: dict(k) for layer, k in config.items()}
    genes = [(layer, knob) for layer in sorted(space) for knob in sorted(space[layer])]
    for _ in range(rng.choice((1, 1, 2))):
        layer, knob = rng.choice(genes)
        cur = _value(child, space, layer, knob)
        others = [c for c in space[layer][knob] if c != cur]
        child.setdefault(layer, {})[knob] = rng.choice(others)
    return _canon(child, space)


def _crossover(rng: random.Random, a: Config, b: Config, space: Mapping[str, Mapping[str, list]]) -> Config:
    child: Config = {}
    for layer in sorted(space):
        for knob in sorted(space[layer]):
            child.setdefault(layer, {})[knob] = _value(a if rng.random() < 0.5 else b, space, layer, knob)
    return _canon(child, space)


def score(rec: Mapping[str, Any]) -> int:
    """What the search minimises: the estimated cycles (aot.timing) of a log made with
    `--optimize cycles`, else QEMU instructions."""
    if (rec.get("options") or {}).get("optimize") == "cycles" and rec.get("estimated_cycles") is not None:
        return int(rec["estimated_cycles"])
    return int(rec["instructions"])


def feasible(rec: Mapping[str, Any]) -> bool:
    if rec.get("error") or not rec.get("bit_exact_with_host") or rec.get("instructions") is None:
        return False
    bf, br = rec.get("budget_flash"), rec.get("budget_ram")
    return (bf is None or rec["flash_bytes"] <= bf) and (br is None or rec["ram_bytes"] <= br)


def _propose(rng: random.Random, n: int, space: Mapping[str, Mapping[str, list]], records: Sequence[dict],
             seen: set[str]) -> list[Config]:
    out: list[Config] = []
    if not records:
        first = [{}]
        widen = _canon({layer: {"widen": True} for layer in space if "widen" in space[layer]}, space)
        if widen:
            first.append(widen)
        for c in first:
            if _key(c) not in seen and len(out) < n:
                out.append(c)
                seen.add(_key(c))
    good = sorted((r for r in records if feasible(r)), key=lambda r: (score(r), r["trial"]))
    parents = [r["config"] for r in good[:3]] or [{}]
    attempts = 0
    genes = sum(len(k) for k in space.values())
    while len(out) < n and attempts < 200 and genes:
        attempts += 1
        a = min(rng.sample(range(len(parents)), min(2, len(parents))))  # tournament: the better of two
        if len(parents) > 1 and rng.random() < 0.3:
            child = _mutate(rng, _crossover(rng, parents[a], parents[rng.randrange(len(parents))], space), space) \
                if rng.random() < 0.5 else _crossover(rng, parents[a], parents[rng.randrange(len(parents))], space)
        else:
            child = _mutate(rng, parents[a], space)
        if _key(child) not in seen:
            seen.add(_key(child))
            out.append(child)
    if len(out) < n:  # the parents' neighbourhood is measured: unseen configs of the whole space
        for child in _unseen(rng, space, seen, n - len(out)):
            seen.add(_key(child))
            out.append(child)
    return out


def _unseen(rng: random.Random, space: Mapping[str, Mapping[str, list]], seen: set[str], n: int) -> list[Config]:
    genes = [(layer, knob) for layer in sorted(space) for knob in sorted(space[layer])]
    size = 1
    for layer, knob in genes:
        size *= len(space[layer][knob])
    if size <= 4096:  # small: every config, in a seeded order
        every = [_canon({}, space)]
        for layer, knob in genes:
            every = [_canon({**c, layer: {**c.get(layer, {}), knob: v}}, space)
                     for c in every for v in space[layer][knob]]
        rng.shuffle(every)
        return [c for c in every if _key(c) not in seen][:n]
    out: list[Config] = []
    keys = set(seen)
    for _ in range(50 * n):
        c = _canon({layer: {knob: rng.choice(choices) for knob, choices in sorted(space[layer].items())}
                    for layer in sorted(space)}, space)
        if _key(c) not in keys:
            keys.add(_key(c))
            out.append(c)
            if len(out) == n:
                break
    return out


def tune(model_path: Path, board: str, log_path: Path, trials: int = 16, budget_flash: int | None = None,
         budget_ram: int | None = None, seed: int = 0, jobs: int | None = None, ray: str | None = None,
         progress: bool = True, options: Mapping[str, Any] | None = None, parallel: int = DEFAULT_PARALLEL,
         backend: str = "c") -> dict[str, Any]:
    """Measure up to `trials` candidates (the default build first), append each record to the log;
    return {"default", "best", "measured", "records"}."""
    if trials < 1:
        raise Error("--trials must be at least 1")
    model_path = Path(model_path)
    data = model_path.read_bytes()
    options = dict(options or {})
    from aot.timing.placement import resolve_optimize
    options["optimize"] = resolve_optimize(options.get("optimize"), board)  # recorded resolved in the log
    space = layer_knobs(model_path, board, options)
    rng = random.Random(seed)
    seen: set[str] = set()
    records: list[dict[str, Any]] = []
    bar = Progress(trials, "tune", enabled=progress)
    base = {"version": LOG_VERSION, "tool": "aot tune", "model": model_path.stem, "model_sha256": model_digest(data),
            "board": board, "options": options, "backend": backend, "seed": seed, "budget_flash": budget_flash,
            "budget_ram": budget_ram}
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log_path, "a") as log:
            while len(records) < trials:
                batch = _propose(rng, min(parallel, trials - len(records)), space, records, seen)
                if not batch:
                    break  # the whole space is measured
                tasks = [Task("aot.execute.cells:tune_trial",
                              {"model_bytes": data, "model_file": model_path.name, "board": board, "options": options,
                               "config": c, "backend": backend}, f"trial {len(records) + k}")
                         for k, c in enumerate(batch)]
                results = run_tasks(tasks, jobs=jobs, ray=ray, progress=bar)
                for c, res in zip(batch, results):
                    rec = base | {"trial": len(records), "config": c} | res
                    rec["feasible"] = feasible(rec)
                    records.append(rec)
                    log.write(json.dumps(rec, sort_keys=True) + "\n")  # one write: a line is whole or absent
                    log.flush()
    finally:
        bar.close()
    default = records[0]
    good = [r for r in records if r["feasible"]]
    if not good:
        why = default.get("error") or "over the budgets or not bit-exact"
        raise Error(f"no candidate of {model_path.stem} on {board} is feasible in {len(records)} trials "
                    f"(the default build: {why}); the log {log_path} has every measurement")
    best = min(good, key=lambda r: (score(r), r["trial"]))
    return {"default": default, "best": best, "measured": len(records), "records": records}


def read_log(path: Path | str) -> list[dict[str, Any]]:
    out = []
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise Error(f"cannot read tuning log {path}: {e.strerror}") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise Error(f"tuning log {path}, line {n}: not JSON") from None
        if isinstance(rec, dict) and rec.get("tool") == "aot tune":
            out.append(rec)
    return out


def best_record(path: Path | str, model_path: Path | str, board: str | None = None) -> dict[str, Any]:
    """The record `--tuning-log` applies: of this model file (by its sha256) and board, feasible,
    the lowest score (fewest instructions, or estimated cycles in a `--optimize cycles` log), then
    lowest trial number."""
    sha = model_digest(Path(model_path).read_bytes())
    recs = [r for r in read_log(path) if r.get("model_sha256") == sha and feasible(r)]
    if board is not None:
        recs = [r for r in recs if r.get("board") == board]
    elif len({r.get("board") for r in recs}) > 1:
        raise Error(f"tuning log {path} holds records of {Path(model_path).name} for several boards "
                    f"({', '.join(sorted({str(r.get('board')) for r in recs}))}): give --board")
    if not recs:
        raise Error(f"tuning log {path} has no feasible record of {Path(model_path).name}"
                    + (f" on {board}" if board else "") + " (tune it with `aot tune`)")
    return min(recs, key=lambda r: (score(r), r["trial"], json.dumps(r["config"], sort_keys=True)))


def best_schedules(path: Path | str, model_path: Path | str, board: str | None = None
                   ) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """CompileOptions.schedules of the best record."""
    rec = best_record(path, model_path, board)
    return tuple((layer, tuple(sorted(k.items()))) for layer, k in sorted(rec["config"].items()))
