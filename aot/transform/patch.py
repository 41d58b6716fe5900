"""Patch-based execution of a network's stages (MCUNetV2).

The first layers of an image network work at full resolution, and their largest single op
(a 48x48 map expanded 6x in MobileNetV2) bounds the RAM of any plan that runs op by op. Here a
stage, from a source tensor S (the model input, or any tensor that alone crosses from the calls
before it to the calls after) up to a cut tensor T (where the resolution has dropped), is split
into a grid of patches of T (rows x columns; strips when one column; strips of columns for a
sequence, a (1, length, channels) tensor, as in Conv1D nets). For each patch the pass computes,
backwards through the stage, the region of every intermediate tensor the patch needs (its
receptive field, halo included), and emits the stage's ops once per patch on those regions only:

* the source's region is taken by a `strided_slice` (the source stays whole until the last patch);
* a window op (conv2d, depthwise_conv2d, max/avg pool) keeps its padding only on the sides where
  the patch touches the image's border, and none inside the image;
* an elementwise op (a residual ADD, an activation) runs on the patch's region; an operand
  computed over a larger region (a residual skip that also feeds a 3x3 layer's halo) is cropped
  by a `strided_slice`.

The slices are small copies of their own (attr materialize: never inlined into the kernel
reading them, whose schedules need a buffer). Each row of patches is joined by a width
concatenation (a copy of the row's small pieces), and the rows by a height concatenation (the
outermost non-unit axis of a batch-1 NHWC image), which the planner turns into storage its
producers write in place (aot.pipeline.alias), as are a sequence's strips, joined along its
length: the full-resolution intermediates never exist. A reshape that only adds or drops a unit
height (a Conv1D layer's view of its sequence) is patched like an elementwise op.
Every op is the same op on a smaller tensor with the same quantization, so results are bit-exact
with the whole-stage build. Each patch's chain runs to the end before the next patch starts, so
only one patch's intermediates are live at a time; kernels of equal-shaped interior patches are
shared by aot.kernel.share.

`stage_cuts` lists the cuts of the stage at one start (`later_cuts`: at every start past the
input), `patch_stage` rewrites one (a pure pass; stages are applied from the last so that the calls
before each keep their indexes), and
`patched_macs` / `live_peak` give the MACs and a live-bytes bound of a candidate, for the choice in
aot.pipeline.patching.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from aot.errors import Error
from aot.ir import Call, Constant, Function, Model, Var
from aot.ir.graph import freeze_attrs
from aot.ops import REGISTRY

WINDOW_OPS = ("conv2d", "depthwise_conv2d", "max_pool2d", "avg_pool2d")

Rows = tuple[int, int]  # [lo, hi) rows of a tensor


@dataclass(frozen=True)
class Cut:
    """A stage the model admits: body[start:index + 1] computes `tensor` from one source tensor
    alone (the model input when start is 0, else the output of body[start - 1]), and nothing after
    it reads another of the stage's tensors or the source."""
    index: int
    tensor: str
    shape: tuple[int, ...]
    input_shape: tuple[int, ...]  # the source's shape
    downsample: int  # source rows / cut rows
    start: int = 0  # the stage's first call
    source: str = ""  # the name of the tensor it reads

def _window(c: Call) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]] | None:
    """Per axis (height, width): (kernel size, stride, dilation, padding before) of a window op."""
    a = c.attrs
    if c.op_name in ("conv2d", "depthwise_conv2d"):
        if int(a.get("groups", 1)) != 1:
            return None
        k = c.args[1].type.shape[1:3]
        d = a.get("dilation", (1, 1))
    else:
        if a.get("count_include_pad", False) or "count_padding" in a:
            return None
        k = a["pool_size"]
        d = a.get("dilations", (1, 1))
    pad = a["padding"]
    return ((int(k[0]), int(a["strides"][0]), int(d[0]), int(pad[0])),
            (int(k[1]), int(a["strides"][1]), int(d[1]), int(pad[2])))


def _is_image(t: Var | Constant) -> bool:
    """A batch-1 NHWC image, or a batch-1 sequence (1, length, channels): an image of one row."""
    return len(t.type.shape) in (3, 4) and t.type.shape[0] == 1


def hw(shape: tuple[int, ...]) -> tuple[int, int]:
    """Height and width of an image's shape (a sequence's: 1 and its length)."""
    return (1, int(shape[1])) if len(shape) == 3 else (int(shape[1]), int(shape[2]))


def joins_in_place(c: Call) -> bool:
    """A concatenation of a batch-1 tensor along its outermost non-unit axis: its pieces are
    contiguous blocks of its output, which their producers write in place (aot.pipeline.alias)."""
    if c.op_name != "concat":
        return False
    shape, axis = tuple(c.out.type.shape), int(c.attrs.get("axis", -1))
    axis = axis + len(shape) if axis < 0 else axis
    return shape[0] == 1 and all(int(d) == 1 for d in shape[1:axis])


def _unit_height_reshape(c: Call) -> bool:
    """A reshape that only adds or drops an image's unit height ((1, L, C) <-> (1, 1, L, C)): a
    Conv1D layer's view."""
    if c.op_name != "reshape" or not isinstance(c.args[0], Var):
        return False
    a, b = tuple(c.args[0].type.shape), tuple(c.out.type.shape)
    return _is_image(c.args[0]) and _is_image(c.out) and len(a) != len(b) and hw(a) == hw(b) and a[-1] == b[-1]


NCHW_TO_NHWC = (0, 2, 3, 1)


def _nchw_input(c: Call, x: Var) -> bool:
    """A transpose of the model input from NCHW to NHWC (a PyTorch-converted model's first op): its
    patches are slices of the input's height and width axes, transposed."""
    return c.op_name == "transpose" and len(c.args) == 1 and c.args[0] is x \
        and tuple(c.attrs.get("perm", ())) == NCHW_TO_NHWC and _is_image(x)


def _spatial(x: Var, nchw: bool) -> tuple[int, int]:
    shape = x.type.shape
    return (int(shape[2]), int(shape[3])) if nchw else hw(tuple(shape))


def _supported(c: Call) -> bool:
    if not isinstance(c.op, str) or not _is_image(c.out):
        return False
    if c.op == "reshape":
        return _unit_height_reshape(c)
    if c.op in WINDOW_OPS:
        return _is_image(c.args[0]) and isinstance(c.args[0], Var) and _window(c) is not None \
            and all(isinstance(a, Constant) for a in c.args[1:])
    try:
        op = REGISTRY.get(c.op)
    except Exception:  # noqa: BLE001 (an op unknown here cannot be patched)
        return False
    if op.kind != "elementwise" or not op.pointwise:
        return False
    for a in c.args:
        if isinstance(a, Var):
            if a.type.shape != c.out.type.shape:
                return False
        else:  # a constant operand broadcast along the height and the width (per channel)
            shape = (1,) * (4 - len(a.type.shape)) + tuple(a.type.shape)
            if len(shape) != 4 or shape[1] != 1 or shape[2] != 1:
                return False
    return True


def _last_uses(fn: Function) -> dict[int, int]:
    """id(var) -> the last call reading it (len(body) for the function's results)."""
    last_use: dict[int, int] = {}
    for i, c in enumerate(fn.body):
        for a in c.args:
            if isinstance(a, Var):
                last_use[id(a)] = i
    for r in fn.results:
        last_use[id(r)] = len(fn.body)
    return last_use


def _boundaries(fn: Function, last_use: dict[int, int]) -> list[int]:
    """The starts s > 0 of `fn`'s body where body[s - 1]'s output is the only tensor computed
    before s that is read at or after s (neither the model input nor another tensor crosses)."""
    end = len(fn.body)
    out: list[int] = []
    crossing: set[int] = {id(v) for v in fn.params if last_use.get(id(v), -1) >= 0}
    for i, c in enumerate(fn.body):
        crossing = {v for v in crossing if last_use.get(v, -1) > i}
        if last_use.get(id(c.out), -1) > i:
            crossing.add(id(c.out))
        if crossing == {id(c.out)} and i + 1 < end:
            out.append(i + 1)
    return out


def stage_cuts(model: Model, start: int = 0) -> list[Cut]:
    """Every cut of the run of patchable ops starting at call `start` of the entry, in order (nearest
    the source first): start 0 reads the model input (only models with one batch-1 image or
    sequence input and no state qualify), a later start the output of the call before it, which
    must then be the only tensor crossing there (`_boundaries`)."""
    fn = model.main
    if not _patchable_model(model):
        return []
    last_use = _last_uses(fn)
    if start == 0:
        return _run_cuts(fn, 0, model.inputs[0], last_use)
    if start not in _boundaries(fn, last_use):
        return []
    return _run_cuts(fn, start, fn.body[start - 1].out, last_use)


def later_cuts(model: Model) -> list[Cut]:
    """The cuts of every stage starting past the model input (`stage_cuts` at each boundary)."""
    fn = model.main
    if not _patchable_model(model):
        return []
    last_use = _last_uses(fn)
    return [cut for s in _boundaries(fn, last_use) for cut in _run_cuts(fn, s, fn.body[s - 1].out, last_use)]


def _patchable_model(model: Model) -> bool:
    return len(model.inputs) == 1 and not model.states and _is_image(model.inputs[0])


def _run_cuts(fn: Function, start: int, x: Var, last_use: dict[int, int]) -> list[Cut]:
    """The cuts of the run of patchable ops from call `start`, reading source `x` (stage_cuts)."""
    if not _is_image(x):
        return []
    end = len(fn.body)
    cuts: list[Cut] = []
    produced: set[int] = {id(x)}
    nchw = start == 0 and bool(fn.body) and _nchw_input(fn.body[0], x)
    for i in range(start, end):
        c = fn.body[i]
        if not (_supported(c) or i == 0 and nchw) or any(isinstance(a, Var) and id(a) not in produced for a in c.args):
            break
        produced.add(id(c.out))
        # the stage body[start:i+1]: only c.out may be read after it (the source neither)
        crossing = [v for v in produced if last_use.get(v, -1) > i]
        (h_in, w_in), (h_out, w_out) = _spatial(x, nchw), hw(tuple(c.out.type.shape))
        # strips of rows; of columns when the source has one row (a sequence, a Conv1D net)
        if crossing == [id(c.out)] and last_use[id(c.out)] < end and (h_out > 1 or h_in == 1 and w_out > 1):
            down = h_in / h_out if h_out > 1 else w_in / w_out
            cuts.append(Cut(i, c.out.name, tuple(c.out.type.shape), tuple(x.type.shape), max(1, round(down)),
                            start, x.name))
    return cuts


def strips(rows: int, n: int) -> list[Rows]:
    """`rows` split into n strips as even as possible (the larger ones last)."""
    return [(rows * p // n, rows * (p + 1) // n) for p in range(n)]


Region = tuple[Rows, Rows]  # ([lo, hi) rows, [lo, hi) columns) of a tensor


def _reads(w: tuple[int, int, int, int], lo: int, hi: int) -> tuple[int, int]:
    """The input span (possibly beyond the image) output positions [lo, hi) of a window axis read."""
    k, s, d, before = w
    return lo * s - before, (hi - 1) * s - before + (k - 1) * d + 1


Windows = dict[int, tuple[tuple[int, int, int, int], tuple[int, int, int, int]]]  # id(call) -> _window


def _windows(stage: tuple[Call, ...]) -> Windows:
    """_window of each window op of the stage, computed once for all its patches."""
    out: Windows = {}
    for c in stage:
        if c.op_name in WINDOW_OPS:
            axes = _window(c)
            assert axes is not None
            out[id(c)] = axes
    return out


def _needed(stage: tuple[Call, ...], out: Region, windows: Windows) -> dict[int, Region]:
    """id(tensor) -> the region of it the patch `out` of the stage's last tensor needs."""
    need: dict[int, Region] = {id(stage[-1].out): out}
    for c in reversed(stage):
        region = need[id(c.out)]
        axes = windows.get(id(c))
        if axes is not None:
            got = []
            for axis, w, (lo, hi) in zip((1, 2), axes, region):
                size = c.args[0].type.shape[axis]
                a, b = _reads(w, lo, hi)
                if max(0, a) >= min(size, b):
                    raise Error(f"{c.out.name}: positions {lo}..{hi} of axis {axis} read only padding")
                got.append((max(0, a), min(size, b)))
            ins: list[tuple[Var, Region]] = [(c.args[0], (got[0], got[1]))]  # type: ignore[list-item]
        else:
            ins = [(a, region) for a in c.args if isinstance(a, Var)]
        for a, r in ins:
            old = need.get(id(a))
            need[id(a)] = r if old is None else tuple(  # type: ignore[assignment]
                (min(o[0], n[0]), max(o[1], n[1])) for o, n in zip(old, r))
    return need


def _with_region(v: Var, region: Region, name: str) -> Var:
    shape = tuple(v.type.shape)
    (r0, r1), (c0, c1) = region
    if len(shape) == 3:  # a sequence: its one row
        return Var(name, v.type.with_shape((shape[0], c1 - c0) + shape[2:]), v.origin)
    return Var(name, v.type.with_shape((shape[0], r1 - r0, c1 - c0) + shape[3:]), v.origin)


def _crop(v: Var, have: Region, want: Region, name: str, body: list[Call]) -> Var:
    """`v` holds region `have` of a tensor: region `want` of it (a strided_slice when they differ)."""
    if have == want:
        return v
    out = _with_region(v, want, name)
    # materialize: a copy of its own, never inlined into the kernel reading it (aot.transform.fuse), whose
    # schedules need a buffer (person_detect's first layer: 0.35 MAC/instruction inlined, 0.67 materialized)
    begin = (0, want[0][0] - have[0][0], want[1][0] - have[1][0], 0)
    if len(v.type.shape) == 3:
        begin = (0, want[1][0] - have[1][0], 0)
    attrs = {"begin": begin, "size": tuple(out.type.shape), "step": (1,) * len(begin), "materialize": True}
    body.append(Call("strided_slice", (v,), out, freeze_attrs(attrs)))
    return out


def _crop_nchw(x: Var, want: Region, name: str, body: list[Call]) -> Var:
    """Region `want` (rows, columns) of an NCHW input: a strided_slice of its last two axes."""
    (r0, r1), (c0, c1) = want
    shape = tuple(x.type.shape)
    if (r0, r1, c0, c1) == (0, shape[2], 0, shape[3]):
        return x
    out = Var(name, x.type.with_shape((shape[0], shape[1], r1 - r0, c1 - c0)), x.origin)
    attrs = {"begin": (0, 0, r0, c0), "size": tuple(out.type.shape), "step": (1, 1, 1, 1), "materialize": True}
    body.append(Call("strided_slice", (x,), out, freeze_attrs(attrs)))
    return out


def _patch_calls(stage: tuple[Call, ...], x: Var, tag: str, region: Region, body: list[Call],
                 windows: Windows) -> Var:
    """Append one patch's calls to `body`; the patch's piece of the stage's last tensor."""
    need = _needed(stage, region, windows)
    nchw = _nchw_input(stage[0], x)
    if nchw:
        env: dict[int, tuple[Var, Region]] = {id(x): (_crop_nchw(x, need[id(x)], f"{x.name}_{tag}", body),
                                                      need[id(x)])}
    else:
        h, w = hw(tuple(x.type.shape))
        full_x = ((0, h), (0, w))
        env = {id(x): (_crop(x, full_x, need[id(x)], f"{x.name}_{tag}", body), need[id(x)])}
    for c in stage:
        reg = need[id(c.out)]
        out = _with_region(c.out, reg, f"{c.out.name}_{tag}")
        attrs = dict(c.attrs)
        axes = windows.get(id(c))
        if axes is not None:
            spans = [_reads(w, lo, hi) for w, (lo, hi) in zip(axes, reg)]
            sizes = c.args[0].type.shape[1:3]
            want = tuple((max(0, a), min(n, b)) for (a, b), n in zip(spans, sizes))
            v, have = env[id(c.args[0])]
            arg0 = _crop(v, have, want, f"{c.args[0].name}_{tag}_w", body)  # type: ignore[arg-type, union-attr]
            (a0, b0), (a1, b1) = spans
            attrs["padding"] = (max(0, -a0), max(0, b0 - sizes[0]), max(0, -a1), max(0, b1 - sizes[1]))
            args: tuple = (arg0,) + tuple(c.args[1:])
        elif c.op_name == "transpose":  # the NCHW input's patch, already sliced to the region
            args = (env[id(c.args[0])][0],)
        elif c.op_name == "reshape":  # a unit-height view of the patch's region
            args = (_crop(*env[id(c.args[0])], reg, f"{c.args[0].name}_{tag}_e", body),)  # type: ignore[arg-type]
            attrs["shape"] = tuple(out.type.shape)
        else:
            args = tuple(_crop(*env[id(a)], reg, f"{a.name}_{tag}_e", body) if isinstance(a, Var) else a
                         for a in c.args)
        body.append(Call(c.op, args, out, freeze_attrs(attrs)))
        env[id(c.out)] = (out, reg)
    return env[id(stage[-1].out)][0]


def _stage(model: Model, cut: Cut) -> tuple[Call, ...]:
    body = model.main.body
    if cut.index >= len(body) or body[cut.index].out.name != cut.tensor:
        raise Error(f"patch cut {cut.tensor!r} is not the output of call {cut.index}")
    return tuple(body[cut.start:cut.index + 1])


def _source(model: Model, cut: Cut) -> Var:
    """The tensor the stage reads: the model input, or the output of the call before it."""
    return model.inputs[0] if cut.start == 0 else model.main.body[cut.start - 1].out


def patch_stage(model: Model, cut: Cut, rows: int, cols: int = 1) -> Model:
    """Pass: the stage up to `cut` run as a grid of rows x cols patches of the cut tensor, joined
    into the cut tensor itself (module docstring): each row of patches by a width concatenation
    (a copy of the row's small pieces), the rows by a height concatenation its producers write in
    place."""
    if rows * cols < 2:
        return model
    height, width = hw(cut.shape)
    if rows > height or cols > width:
        raise Error(f"{rows}x{cols} patches of {cut.tensor}: it has only {height}x{width} pixels")
    stage = _stage(model, cut)
    t = stage[-1].out
    x = _source(model, cut)
    windows = _windows(stage)
    body: list[Call] = []
    row_vars: list[Var] = []
    width_axis = 1 if len(cut.shape) == 3 else 2
    for r, rr in enumerate(strips(height, rows)):
        pieces = [_patch_calls(stage, x, f"p{r}_{k}" if cols > 1 else f"p{r}", (rr, cc), body, windows)
                  for k, cc in enumerate(strips(width, cols))]
        if cols == 1:
            row_vars.append(pieces[0])
        elif rows == 1:
            body.append(Call("concat", tuple(pieces), t, freeze_attrs({"axis": width_axis})))
        else:
            row = _with_region(t, (rr, (0, width)), f"{t.name}_r{r}")
            body.append(Call("concat", tuple(pieces), row, freeze_attrs({"axis": width_axis})))
            row_vars.append(row)
    if row_vars:
        body.append(Call("concat", tuple(row_vars), t, freeze_attrs({"axis": 1})))
    fn = model.main
    main = Function(fn.name, fn.params, fn.body[:cut.start] + tuple(body) + fn.body[cut.index + 1:], fn.results,
                    fn.primitive)
    return model.replace_functions({**model.functions, fn.name: main})


# ---------------------------------------------------------------------- estimates
def call_macs(c: Call) -> int:
    op = REGISTRY.get(c.op_name)
    if op.macs is None:
        return c.out.type.size
    return int(op.macs([a.type for a in c.args], c.out.type, c.attrs))


def stage_macs(model: Model, cut: Cut) -> int:
    return sum(call_macs(c) for c in _stage(model, cut))


def patched_macs(model: Model, cut: Cut, rows: int, cols: int = 1, patched: Model | None = None) -> int:
    """MACs of the stage's patches (halo recomputed); slices and the joins count nothing. `patched`:
    patch_stage(model, cut, rows, cols) when the caller has it."""
    if rows * cols < 2:
        return stage_macs(model, cut)
    patched = patched or patch_stage(model, cut, rows, cols)
    n = len(patched.main.body) - (len(model.main.body) - cut.index - 1)
    return sum(call_macs(c) for c in patched.main.body[cut.start:n] if c.op_name not in ("strided_slice", "concat"))


def _dw_in_place(c: Call) -> bool:
    """A stride-1 depthwise convolution or 1x1 product shaped as its input: written over it (a line
    buffer of the rows it overwrote, a copy of the pixels whose stores reach their inputs), int8 on DSP
    cores and 16x8 on every core, which the estimate assumes."""
    if c.op_name == "conv2d" and tuple(c.args[1].type.shape[1:3]) != (1, 1):
        return False
    return c.op_name in ("depthwise_conv2d", "conv2d") and tuple(c.attrs.get("strides", (1, 1))) == (1, 1) \
        and c.args[0].type.shape == c.out.type.shape and c.args[0].type.dtype == c.out.type.dtype


@cache
def _writes_over(op: str) -> bool:
    """An elementwise op other than a slice: its output may take an operand's storage."""
    return REGISTRY.get(op).kind == "elementwise" and op != "strided_slice"


def live_peak(model: Model, io_in_pool: bool = True, consume_input: bool = False) -> int:
    """The largest sum of bytes live at one call of the entry (`live_profile`)."""
    return live_profile(model, io_in_pool, consume_input)[0]


def live_profile(model: Model, io_in_pool: bool = True, consume_input: bool = False) -> tuple[int, int]:
    """The largest sum of bytes live at one call of the entry (inputs, outputs and tensors held
    across), with the sharing the planner gives the patched stage: a strip's piece of the cut
    tensor lives in the concatenation's output, a strided_slice read only by the next call is
    inlined into it (unless marked materialize), and an elementwise op, a stride-1 depthwise
    convolution or a 1x1 product writes over an operand of its shape dying there. `io_in_pool`
    False: the model's inputs and outputs are the caller's buffers and count nothing. `consume_input`:
    the input consumed in place (aot.pipeline.bands), each of its rows live to its last reader.
    Returns the peak and the first call at which it is live."""
    fn = model.main
    body = fn.body
    last: dict[int, int] = {}
    uses: dict[int, int] = {}
    owner: dict[int, int] = {}  # id(var) -> id(var whose storage it uses)
    first: dict[int, int] = {}
    size: dict[int, int] = {}
    names = [c.op_name for c in body]
    for v in fn.params:
        first[id(v)] = 0
        size[id(v)] = v.type.nbytes
    for i, c in enumerate(body):
        for a in c.args:
            if isinstance(a, Var):
                k = id(a)
                last[k] = i
                uses[k] = uses.get(k, 0) + 1
        k = id(c.out)
        first.setdefault(k, i)
        size[k] = c.out.type.nbytes
    end = len(body)
    for r in fn.results:
        last[id(r)] = end
    for c, name in zip(body, names):
        if joins_in_place(c):
            for a in c.args:
                owner[id(a)] = id(c.out)
        if name == "strided_slice" and uses.get(id(c.out)) == 1 and not c.attrs.get("materialize"):
            owner[id(c.out)] = -1  # inlined: no storage
    span: dict[int, list[int]] = {}
    io = set() if io_in_pool else {id(v) for v in (*model.inputs, *model.outputs)}
    rows_dead = _input_rows_last_read(model) if io_in_pool and consume_input else None
    if rows_dead is not None:  # consumed in place (aot.pipeline.bands): each row live to its last reader
        io.add(id(model.inputs[0]))
    for v, f in first.items():
        root = owner.get(v, v)
        if root == -1 or v in io:
            continue
        lo, hi = f, last.get(v, f)
        s = span.get(root)
        if s is None:
            span[root] = [lo, hi]
        else:
            s[0], s[1] = min(s[0], lo), max(s[1], hi)
    inplace: set[int] = set()  # outputs written over a same-size operand dying at their call
    for i, (c, name) in enumerate(zip(body, names)):
        if isinstance(c.op, str) and _writes_over(name) or _dw_in_place(c):
            nbytes = size[id(c.out)]
            if any(isinstance(a, Var) and last.get(id(a)) == i and a.type.nbytes == nbytes
                   and id(a) not in owner for a in c.args):
                inplace.add(id(c.out))
    delta = [0] * (len(body) + 2)
    for v, (lo, hi) in span.items():
        start = lo + 1 if v in inplace else lo  # written over its operand at its first call
        if start <= hi:
            delta[start] += size[v]
            delta[hi + 1] -= size[v]
    if rows_dead is not None:
        row = model.inputs[0].type.nbytes // len(rows_dead)
        for last_read in rows_dead:
            delta[0] += row
            delta[last_read + 1] -= row
    peak = live = at = 0
    for i in range(len(body)):
        live += delta[i]
        if live > peak:
            peak, at = live, i
    return peak, at


def _input_rows_last_read(model: Model) -> list[int] | None:
    """Per row of the model's NHWC input: the last call reading it, when only row-bounded slices
    (the patches' strided_slices) read it; None otherwise (the whole input lives to its last reader)."""
    if len(model.inputs) != 1 or not _is_image(model.inputs[0]):
        return None
    x = model.inputs[0]
    last = [0] * int(x.type.shape[1])
    for i, c in enumerate(model.main.body):
        if not any(a is x for a in c.args):
            continue
        if c.op_name != "strided_slice" or len(c.args) != 1 or any(int(v) != 1 for v in c.attrs.get("step", (0,))):
            return None
        r0, n = int(c.attrs["begin"][1]), int(c.attrs["size"][1])
        for r in range(r0, r0 + n):
            last[r] = i
    if any(a is x for a in model.main.results):
        return None
    return last
