"""`aot report`: one self-contained HTML page about a model on a board (inline SVG, no script or
style from the network): the memory plan over time, flash by section, by group and by layer, RAM
by pool, static data and stack, per-layer MACs, QEMU instructions (`aot profile`) and TFLM's where known, the
summary figures of an `aot bench` row and, optionally, an `aot sweep` table. A build that runs its first
stage patch by patch (`--ram-budget`) adds the patch stages (cut, grid, halo, counted instruction overhead,
shaded on the memory plan) and the unpatched build's pool, RAM and QEMU instructions beside its own.

Every figure is measured by the run (one board build run in QEMU, the footprint of its ELF, the
compiler's memory plan); build_report returns the page and those figures as a dict, and each
number in the page carries a data-key naming its place in that dict (the test compares them).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from html import escape
from pathlib import Path
from typing import Any, Sequence

from aot.errors import Error
from aot.tools.report_svg import bars_svg, fmt, fmt_pct, plan_svg, stacked_svg

PROFILE_NOTE = ("Per-layer QEMU instructions need `aot profile` (aot.tools.profile), which this "
                "installation does not have.")


def _buffer_names(node: Any, seen: set[int], out: set[str]) -> None:
    from aot.kernel import ir as K
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, K.Buffer):
        out.add(node.name)
    if isinstance(node, (list, tuple)):
        for x in node:
            _buffer_names(x, seen, out)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            _buffer_names(getattr(node, f.name), seen, out)


def _layer_macs(fused: Any) -> dict[str, int]:
    from aot.ir import FunctionRef
    from aot.ops import REGISTRY
    out = {}
    for fn in fused.functions.values():
        if not fn.primitive:
            continue
        total = 0
        for c in fn.body:
            if isinstance(c.op, FunctionRef):
                continue
            op = REGISTRY.get(c.op)
            if op.macs is not None:
                total += op.macs([a.type for a in c.args], c.out.type, c.attrs)
        out[fn.name] = total
    return out


def step_weights(module: Any) -> list[tuple[str, int]]:
    """(kernel, weight bytes) per call step of the executor, in call order. A step's weights are the
    constants it reads: those its call passes (a kernel shared by several layers takes each layer's
    weights as arguments) and those its kernel's body names. Each constant counts once, at the first
    step that reads it, so the column sums to the model's weights."""
    from aot.kernel import ir as K
    consts = {c.buffer.name: int(c.buffer.nbytes) for c in module.consts}
    entry = module.func(module.entry)
    body = entry.body.body if isinstance(entry.body, K.Seq) else (entry.body,)
    counted: set[str] = set()
    out = []
    for stmt in body:
        if not isinstance(stmt, K.CallKernel):
            continue
        names: set[str] = {a.name for a in stmt.args if isinstance(a, K.Buffer)}
        _buffer_names(module.func(stmt.callee).body, set(), names)
        mine = sorted(n for n in names if n in consts and n not in counted)
        counted.update(mine)
        out.append((stmt.callee, sum(consts[n] for n in mine)))
    return out


def _layers(compiled: Any, fp: dict) -> list[dict[str, Any]]:
    """Per call step, in call order: its kernel, op, MACs, code bytes (its function symbol in the
    ELF; a kernel that several layers share counts at its first step, the others name that step)
    and the bytes of the constant tables it reads (step_weights)."""
    macs = _layer_macs(compiled.fused)
    code = {s["name"]: s["size"] for s in fp["symbols"] if s["kind"] == "function"}
    prefix = compiled.options.prefix + "_"
    ops = {fn.name: "+".join(c.op_name for c in fn.body) for fn in compiled.fused.functions.values() if fn.primitive}
    rows: list[dict[str, Any]] = []
    first: dict[str, int] = {}
    for kname, weights in step_weights(compiled.module):
        fname = kname[len(prefix):] if kname.startswith(prefix) else kname
        shared = first.get(kname)
        first.setdefault(kname, len(rows))
        rows.append({"kernel": kname, "op": ops.get(fname, fname), "macs": macs.get(fname, 0),
                     "code_bytes": code.get(kname) if shared is None else 0, "code_shared_with": shared,
                     "weights_bytes": weights, "instructions": None, "tflm_instructions": None})
    return rows


RAM_SECTIONS = (".bss", ".aot_pool", ".heap", ".noinit", ".stack")


def _flash_groups(symbols: Sequence[dict]) -> dict[str, int]:
    """The ELF's symbols in flash (not in .bss, a pool, the heap or the stack) by group."""
    out: dict[str, int] = {}
    for s in symbols:
        if not s["section"].startswith(RAM_SECTIONS):
            out[s["group"]] = out.get(s["group"], 0) + s["size"]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _anchors_file() -> Path | None:
    """../shared/anchors.json beside the checkout (TFLM per-operator counts), when present."""
    from aot.assets import asset_dir
    for base in (Path.cwd(), asset_dir("boards").parent):
        p = base.parent / "shared" / "anchors.json"
        if p.is_file():
            return p
    return None


def _profile(model_path: Path, board: str, options: dict) -> list[dict] | str:
    """Per-layer instructions from `aot profile` (aot.tools.profile), beside TFLM's per-operator
    counts where ../shared/anchors.json has them; a string says why there are none."""
    try:
        from aot.tools.profile import compare_anchors, profile_model
    except ImportError:
        return PROFILE_NOTE
    try:
        prof = profile_model(model_path, board, plain=False, **options)
    except Error as e:
        return f"aot profile failed on this board: {' '.join(str(e).split())[:300]}"
    anchors = _anchors_file()
    if anchors is not None:
        try:
            compare_anchors(prof, json.loads(anchors.read_text()), model_path.stem)
        except Error:
            pass  # no TFLM row for this model and board: the TFLM column stays empty
    return [dataclasses.asdict(layer) for layer in prof.layers]


def _ram(extra: dict[str, Any]) -> dict[str, int]:
    """Firmware RAM of a run_on_board build: its pools, other static data, worst-case stack, total."""
    ram = extra["footprint"]["ram"]
    stack = ram["stack"] or 0
    pools = ram["pools"]
    total = ram["total"] if ram["total"] is not None else ram["static"] + stack
    return {"pools": pools, "static": ram["static"] - pools, "stack": stack, "total": total}


def _patch(model: Any, inputs: dict, board: str, options: dict[str, Any], lcg: bool, compiled: Any,
           summary: dict[str, Any], say: Any) -> dict[str, Any] | None:
    """Patch-based execution (`--ram-budget`): the stages the build runs patch by patch (their
    PatchChoice records and call steps) and the same firmware with the unpatched plan (`--ram-budget
    off`: one more build and QEMU run) beside the patched one; None when the build is not patched."""
    from aot.tools.patch_view import patch_records, stage_spans
    records = patch_records(compiled.patch)
    if not records:
        return None
    stages = [{**r, "steps": [first, end]} for r, (first, end, _) in zip(records, stage_spans(compiled))]
    keys = ("pool_bytes", "ram_bytes", "instructions", "estimated_cycles", "lower_bound_bytes", "bit_exact_with_host")
    patched = {k: summary[k] for k in keys}
    say("building the unpatched plan (--ram-budget off) and running it in QEMU")
    from aot.errors import FitError
    from aot.timing.estimate import run_and_estimate
    try:
        _, extra, est = run_and_estimate(model, inputs, board, **{**options, "ram_budget": "off"}, input_lcg=lcg)
    except FitError as e:  # the unpatched plan does not fit the board's RAM: its pool, planned without a size
        from aot.board.boards import load_board
        from aot.board.flow import board_options
        from aot.pipeline.driver import compile_model
        plain = compile_model(model, board_options(load_board(board), {**options, "ram_budget": "off",
                                                                        "pool_size": None}))
        unpatched = {k: None for k in keys}
        unpatched.update(pool_bytes=plain.plan.activation_bytes, lower_bound_bytes=plain.plan.lower_bound_bytes,
                         fits=False, error=" ".join(str(e).split())[:300])
    else:
        unpatched = {"pool_bytes": _ram(extra)["pools"], "ram_bytes": _ram(extra)["total"],
                     "instructions": int(extra["instructions"] or 0),
                     "estimated_cycles": est.cycles if est else None,
                     "lower_bound_bytes": extra["lower_bound_bytes"],
                     "bit_exact_with_host": bool(extra["match_host"]), "fits": True, "error": None}

    def ratio(key: str) -> float | None:
        a, b = patched.get(key), unpatched.get(key)
        return round(a / b, 4) if a and b else None
    counted = sum(r["instruction_overhead"] for r in records)
    measured = ratio("instructions")
    return {"stages": stages, "patched": patched, "unpatched": unpatched,
            "pool_ratio": ratio("pool_bytes"), "ram_ratio": ratio("ram_bytes"),
            "estimated_cycles_ratio": ratio("estimated_cycles"),
            # instruction overhead: the compiler's (counted on the lowered kernels, or estimated from MACs;
            # the stages' sum) and QEMU's (patched vs unpatched firmware)
            "counted_instruction_overhead": round(counted, 4),
            "counted_overhead_source": "+".join(sorted({r["overhead_source"] for r in records})),
            "measured_instruction_overhead": round(measured - 1, 4) if measured is not None else None}


def collect(model_path: Path, board: str, opt: str = "speed", progress: bool = True,
            profile: bool = True, ram_budget: "int | str | None" = None) -> dict[str, Any]:
    from aot.board.boards import load_board
    from aot.board.flow import board_options
    from aot.frontend import load
    from aot.ir.boundary import random_inputs
    from aot.pipeline.driver import compile_model
    from aot.tools.bench import model_macs

    def say(msg: str) -> None:
        if progress:
            print(f"report: {msg}", file=sys.stderr, flush=True)

    model = load(model_path)  # first: its errors name the file and the fix
    options: dict[str, Any] = {"opt": opt, "source_bytes": model_path.stat().st_size}  # as bench and the CLI
    if ram_budget is not None:
        from aot.pipeline.patching import parse_budget
        options["ram_budget"] = parse_budget(ram_budget)
    say(f"compiling {model_path.name} for {board}")
    compiled = compile_model(model, board_options(load_board(board), options))
    say("building the project and running it in QEMU")
    from aot.board.lcg import lcg_applies, lcg_inputs
    lcg = lcg_applies(model)  # the input generated on the device, as `aot bench` builds it
    inputs = lcg_inputs(model) if lcg else random_inputs(model, 0)
    from aot.timing.estimate import run_and_estimate
    _, extra, est = run_and_estimate(model, inputs, board, **options, input_lcg=lcg)
    fp = extra["footprint"]
    ram = _ram(extra)
    stack, pools, ram_total = ram["stack"], ram["pools"], ram["total"]
    instr = int(extra["instructions"] or 0)
    macs = model_macs(model)
    fig = fp["figures"]
    p = compiled.plan
    summary = {
        "instructions": instr, "macs": macs, "macs_per_instruction": round(macs / instr, 3) if instr else 0.0,
        "model_flash_bytes": fig["model_flash"], "model_ram_bytes": fig["model_ram"],
        "flash_bytes": fig["firmware_flash"], "code_bytes": fig["kernels"], "weights_bytes": fig["weights"],
        "test_data_bytes": fig["test_data"], "runtime_bytes": fig["support_flash"],
        "ram_bytes": ram_total, "pool_bytes": pools, "static_bytes": ram["static"], "stack_bytes": stack,
        "lower_bound_bytes": p.lower_bound_bytes, "bit_exact_with_host": bool(extra["match_host"]),
        # aot.timing's estimate of the same call on the board's core and memory system (not a measurement)
        "estimated_cycles": est.cycles if est else None, "estimated_ms": round(est.ms, 3) if est else None,
        "clock_hz": est.clock_hz if est else None,
    }
    patch = _patch(model, inputs, board, options, lcg, compiled, summary, say)
    layers = _layers(compiled, fp)
    prof = _profile(model_path, board, options) if profile else "aot report ran with --no-profile."
    if not isinstance(prof, str):
        say("profiled the layers (aot profile)")
        by_name = {r["kernel"]: r for r in prof}
        for row in layers:
            r = by_name.get(row["kernel"], {})
            row["instructions"] = r.get("instructions")
            row["tflm_instructions"] = r.get("tflm_instructions")
    return {
        "model": model_path.stem, "board": board, "opt": opt, "summary": summary,
        "ram_budget": options.get("ram_budget", "auto"), "patch": patch,
        "plan": {"planner": p.planner, "steps": list(p.step_kernels),
                 "pools": [{"name": pl.name, "size": int(pl.size)} for pl in compiled.module.pools],
                 "buffers": [dataclasses.asdict(b) for b in p.buffers]},
        "flash": {"sections": {k: fp["flash"][k] for k in ("text", "rodata", "data")},
                  "groups": _flash_groups(fp["symbols"])},
        "ram": {"pools": pools, "static": ram["static"], "stack": stack, "total": ram_total,
                "stack_path": list(fp["stack"].get("path", []))},
        "layers": layers, "profile": not isinstance(prof, str),
        "profile_note": prof if isinstance(prof, str) else None,
    }


def _num(key: str, value: Any, pct: bool = False) -> str:
    """A figure of the data dict, named by its key (pct: a fraction shown as a percentage)."""
    kind = ' data-format="pct"' if pct else ""
    return (f'<span class="num" data-key="{escape(key)}" data-value="{escape(json.dumps(value))}"{kind}>'
            f'{fmt_pct(value) if pct else fmt(value)}</span>')


def _patch_html(data: dict[str, Any]) -> list[str]:
    """The patch-based execution section: one line when the build is not patched; else the stages
    (cut, grid, halo, counted overhead) and the unpatched build beside the patched one."""
    pt, budget = data["patch"], escape(str(data["ram_budget"]))
    if pt is None:
        return [f'<p class="note">Patch-based execution: not used (--ram-budget {budget}); every layer runs on '
                f'whole tensors.</p>']
    parts = [f"<h2>Patch-based execution (--ram-budget {budget})</h2>",
             '<p class="note">The first layers run patch by patch: each stage below computes its cut tensor in a '
             'grid of patches, recomputing the halo rows and columns the patches share, so the stage\'s '
             'full-resolution maps are never stored whole (shaded on the memory plan). Unpatched: the same '
             'firmware built with --ram-budget off and run in QEMU.</p>']
    head = ("<tr><th>stage</th><th>cut tensor</th><th>cut shape</th><th>grid</th><th>downsample</th>"
            "<th>call steps</th><th>stage MACs</th><th>patched MACs</th><th>halo MACs</th><th>halo</th>"
            "<th>instruction overhead</th></tr>")
    trs = []
    for k, st in enumerate(pt["stages"]):
        key = f"patch.stages.{k}"
        trs.append(f"<tr><td>{k}</td><td>{_num(key + '.cut', st['cut'])}</td>"
                   f"<td>{escape('x'.join(map(str, st['cut_shape'][1:])))}</td>"
                   f"<td>{escape('x'.join(map(str, st['grid'])))}</td>"
                   f'<td class="n">{_num(key + ".downsample", st["downsample"])}</td>'
                   f"<td>{st['steps'][0]}-{st['steps'][1] - 1}</td>"
                   f'<td class="n">{_num(key + ".stage_macs", st["stage_macs"])}</td>'
                   f'<td class="n">{_num(key + ".patched_stage_macs", st["patched_stage_macs"])}</td>'
                   f'<td class="n">{_num(key + ".halo_macs", st["halo_macs"])}</td>'
                   f'<td class="n">{_num(key + ".halo_overhead", st["halo_overhead"], pct=True)}</td>'
                   f'<td class="n">{_num(key + ".instruction_overhead", st["instruction_overhead"], pct=True)} '
                   f'({escape(st["overhead_source"])})</td></tr>')
    parts.append(f"<table>{head}{''.join(trs)}</table>")
    before, after = pt["unpatched"], pt["patched"]
    rows = [("pool_bytes", "pools B", "pool_ratio"), ("ram_bytes", "firmware RAM B", "ram_ratio"),
            ("instructions", "QEMU instructions", None), ("estimated_cycles", "estimated cycles (timing model)",
                                                          "estimated_cycles_ratio"),
            ("lower_bound_bytes", "activation lower bound B", None), ("bit_exact_with_host", "QEMU = host build", None)]
    trs = []
    for key, title, rkey in rows:
        if after.get(key) is None and before.get(key) is None:
            continue
        if key == "instructions":
            mo = pt["measured_instruction_overhead"]
            cell = f"{fmt(round(1 + mo, 3))} ({_num('patch.measured_instruction_overhead', mo, pct=True)})" \
                if mo is not None else "-"
        else:
            cell = _num(f"patch.{rkey}", pt[rkey]) if rkey else ""
        trs.append(f"<tr><td>{escape(title)}</td><td class=\"n\">{_num(f'patch.unpatched.{key}', before.get(key))}"
                   f"</td><td class=\"n\">{_num(f'patch.patched.{key}', after.get(key))}</td>"
                   f'<td class="n">{cell}</td></tr>')
    parts.append("<table><tr><th></th><th>unpatched</th><th>patched</th><th>patched / unpatched</th></tr>"
                 f"{''.join(trs)}</table>")
    if not before["fits"]:
        parts.append(f'<p class="note">The unpatched plan does not fit {escape(data["board"])}\'s RAM (its pool '
                     f'planned without a size above): {escape(before["error"] or "")}</p>')
    measured = pt["measured_instruction_overhead"]
    counted = _num("patch.counted_instruction_overhead", pt["counted_instruction_overhead"], pct=True)
    parts.append(f'<p>Instruction overhead: {counted} '
                 f'{"counted on the lowered kernels" if pt["counted_overhead_source"] == "counted" else "estimated"} '
                 f'(the compiler\'s figure, by which it chose the plan)'
                 + (f', {_num("patch.measured_instruction_overhead", measured, pct=True)} measured (QEMU instructions '
                    f'of the patched firmware vs the unpatched)' if measured is not None else "") + ".</p>")
    parts.append(bars_svg([(f"{t} {k}", v) for t, k in (("pools", "unpatched"), ("pools", "patched"),
                                                        ("firmware RAM", "unpatched"), ("firmware RAM", "patched"))
                           for v in [pt[k]["pool_bytes" if t == "pools" else "ram_bytes"] or 0]],
                          "RAM: unpatched vs patched"))
    return parts


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:960px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px}
td.n{text-align:right}th{background:#f3f3f3}.note{color:#666;font-size:12px}.bad{color:#c00;font-weight:bold}
.kv{display:grid;grid-template-columns:repeat(4,1fr);gap:6px 16px;font-size:13px}.kv b{display:block;font-size:16px}
svg.chart{display:block;margin:8px 0;max-width:100%;height:auto}
"""

SELF_CHECK = """
(function(){var c=document.querySelectorAll('svg.chart');var ok=c.length>0;
for(var i=0;i<c.length;i++){var b=c[i].getBoundingClientRect();
 if(!(b.width>0&&b.height>0&&c[i].querySelectorAll('rect').length>0)){ok=false;}}
document.body.setAttribute('data-selfcheck',ok?'ok':'empty-chart');
document.body.setAttribute('data-charts',String(c.length));})();
"""


def sweep_table(rows: Sequence[dict[str, Any]], key: str = "sweep") -> str:
    cols = [("model", "model"), ("board", "board"), ("opt", "opt"), ("backend", "backend"),
            ("instructions", "QEMU instr."), ("macs_per_instruction", "MAC/instr."), ("flash_bytes", "flash B"),
            ("ram_bytes", "RAM B"), ("pool_bytes", "pool B"), ("stack_bytes", "stack B"),
            ("tflm_arena_bytes", "TFLM host arena B"), ("bit_exact_with_host", "QEMU = host"),
            ("bit_exact_with_tflm", "host = TFLM"), ("error", "error")]
    head = "".join(f"<th>{escape(t)}</th>" for _, t in cols)
    body = []
    for i, r in enumerate(rows):
        cells = []
        for c, _ in cols:
            v = r.get(c)
            cls = "n" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
            if v is False or (c == "error" and v):
                cls = "bad"
            cells.append(f'<td class="{cls}">{_num(f"{key}.{i}.{c}", v)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n{body}\n<script>{SELF_CHECK}</script></body></html>\n")


def sweep_page(rows: Sequence[dict[str, Any]], title: str = "aot sweep") -> str:
    """`aot sweep --html` (and `aot bench --html`): the rows as a page of their own."""
    ok = sum(1 for r in rows if r.get("error") is None and r.get("bit_exact_with_host")
             and r.get("bit_exact_with_tflm") is not False)
    chart = bars_svg([(" ".join(str(r[k]) for k in ("model", "board", "opt", "backend") if r.get(k)),
                       r.get("instructions") or 0) for r in rows], "QEMU instructions per inference", "instr.")
    return _page(title, f"<h1>{escape(title)}: {len(rows)} rows, {ok} bit-exact</h1>{chart}{sweep_table(rows, 'rows')}")


def render(data: dict[str, Any], sweep_rows: Sequence[dict[str, Any]] | None = None) -> str:
    s = data["summary"]
    kv = [("instructions", "QEMU instructions"), ("macs", "MACs"), ("macs_per_instruction", "MAC / instruction"),
          *[(k, t) for k, t in (("estimated_cycles", "estimated cycles (timing model)"),
                                ("estimated_ms", f"estimated ms at {(s.get('clock_hz') or 0) / 1e6:g} MHz"))
            if s.get(k) is not None],
          ("bit_exact_with_host", "QEMU = host build"), ("model_flash_bytes", "model flash B"),
          ("model_ram_bytes", "model RAM B"), ("code_bytes", "kernel code B"), ("weights_bytes", "weights B"),
          ("flash_bytes", "firmware flash B"), ("test_data_bytes", "test data B"), ("runtime_bytes", "runtime B"),
          ("ram_bytes", "firmware RAM B"),
          ("pool_bytes", "pools B"), ("static_bytes", "static B"), ("stack_bytes", "stack B (worst case)"),
          ("lower_bound_bytes", "activation lower bound B")]
    parts = [f"<h1>{escape(data['model'])} on {escape(data['board'])} (opt {escape(data['opt'])})</h1>",
             '<div class="kv">' + "".join(f"<div>{escape(t)}<b>{_num('summary.' + k, s[k])}</b></div>"
                                          for k, t in kv) + "</div>"]
    plan = data["plan"]
    from aot.tools.patch_view import grid_text
    spans = [(st["steps"][0], st["steps"][1], f"patch stage: {grid_text(st)} patches up to {st['cut'][:24]}")
             for st in (data["patch"] or {}).get("stages", [])]
    parts.append("<h2>Memory plan over time</h2>")
    parts.append(f'<p class="note">Each rectangle is a tensor or kernel workspace, from the call step that '
                 f'writes it first to the last that reads it, at its offset in the pool (planner '
                 f'{escape(plan["planner"])}). Hover for names.'
                 + (" Shaded: the call steps of the patch stage." if spans else "") + '</p>')
    for pool in plan["pools"]:
        bufs = [b for b in plan["buffers"] if b["pool"] == pool["name"]]
        used = max([b["offset"] + b["size"] for b in bufs] + [0])
        parts.append(plan_svg(bufs, len(plan["steps"]), used, s["lower_bound_bytes"] if pool is plan["pools"][0]
                              else 0, f"pool {pool['name']}: {used:,} B used", spans=spans))
    fl = data["flash"]
    parts.append("<h2>Flash</h2>")
    parts.append(f'<p class="note">Model flash: its kernels + weights; firmware flash adds the test data '
                 f'main.c embeds (the input and expected outputs) and the runtime, startup, main.c and libc.</p>')
    parts.append(stacked_svg([(k, v) for k, v in fl["sections"].items()], f"firmware flash by section: "
                             f"{s['flash_bytes']:,} B"))
    parts.append(bars_svg([(k, v) for k, v in fl["groups"].items()], "flash by group (ELF symbols)"))
    layers = data["layers"]
    parts.append(bars_svg([(f"{k}: {r['op']}", (r["code_bytes"] or 0) + r["weights_bytes"])
                           for k, r in enumerate(layers)], "flash by layer: kernel code + its constant tables"))
    r = data["ram"]
    parts.append("<h2>RAM</h2>")
    parts.append(stacked_svg([("activation pools", r["pools"]), ("static data", r["static"]),
                              ("stack (worst case)", r["stack"])], f"firmware RAM: {r['total']:,} B"))
    if r["stack_path"]:
        parts.append(f'<p class="note">deepest stack path: {escape(" -> ".join(r["stack_path"]))}</p>')
    parts.extend(_patch_html(data))
    parts.append("<h2>Per layer</h2>")
    if not data["profile"]:
        parts.append(f'<p class="note">{escape(data["profile_note"])} This panel shows MACs per layer only.</p>')
    parts.append(bars_svg([(f"{k}: {row['op']}", row["macs"]) for k, row in enumerate(layers)], "MACs per layer",
                          "MAC"))
    if data["profile"]:
        parts.append(bars_svg([(f"{k}: {row['op']}", row["instructions"] or 0) for k, row in enumerate(layers)],
                              "QEMU instructions per layer (aot profile)", "instr."))
    head = "<tr><th>#</th><th>kernel</th><th>op</th><th>MACs</th><th>code B</th><th>weights B</th>" + \
           ("<th>QEMU instr.</th><th>MAC/instr.</th><th>TFLM+CMSIS-NN instr. (anchors)</th>"
            if data["profile"] else "") + "</tr>"
    trs = []
    for k, row in enumerate(layers):
        extra = ""
        if data["profile"]:
            mpi = round(row["macs"] / row["instructions"], 3) if row["instructions"] and row["macs"] else None
            extra = (f'<td class="n">{_num(f"layers.{k}.instructions", row["instructions"])}</td>'
                     f'<td class="n">{fmt(mpi)}</td>'
                     f'<td class="n">{_num(f"layers.{k}.tflm_instructions", row["tflm_instructions"])}</td>')
        shared = row.get("code_shared_with")
        note = f" (kernel of layer {shared})" if shared is not None else ""
        trs.append(f"<tr><td>{k}</td><td>{escape(row['kernel'])}</td><td>{escape(row['op'])}</td>"
                   f'<td class="n">{_num(f"layers.{k}.macs", row["macs"])}</td>'
                   f'<td class="n">{_num(f"layers.{k}.code_bytes", row["code_bytes"])}{escape(note)}</td>'
                   f'<td class="n">{_num(f"layers.{k}.weights_bytes", row["weights_bytes"])}</td>{extra}</tr>')
    parts.append(f"<table>{head}{''.join(trs)}</table>")
    if any(row["code_bytes"] is None for row in layers):
        parts.append('<p class="note">code B "-": the C compiler inlined that kernel into its caller, whose '
                     'code the flash groups count.</p>')
    if sweep_rows:
        parts.append("<h2>Sweep</h2>")
        parts.append(sweep_table(sweep_rows))
    return _page(f"aot report: {data['model']} on {data['board']}", "\n".join(parts))


def build_report(model_path: Path, board: str, sweep_rows: Sequence[dict[str, Any]] | None = None,
                 opt: str = "speed", progress: bool = True, profile: bool = True,
                 ram_budget: "int | str | None" = None) -> tuple[str, dict[str, Any]]:
    data = collect(Path(model_path), board, opt, progress, profile, ram_budget)
    if sweep_rows:
        data["sweep"] = list(sweep_rows)
    return render(data, sweep_rows), data
