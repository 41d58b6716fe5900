"""The generated pages of the guide: supported operators (from `aot ops --json`), the command-line
reference (from the argparse parsers of aot/cli) and every user-facing error message (from the
raise sites in the code). Run by the MkDocs hook at build time, so the pages never go stale;
`python3 docs/_gen/docgen.py DIR` writes them into DIR for reading without MkDocs."""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = {
    "reference/operators.md": "operators_md",
    "reference/cli.md": "cli_md",
    "reference/errors.md": "errors_md",
}
TFLM_REGISTERED = 118  # operators TensorFlow Lite Micro registers (builtins and custom, Ethos-U's not counted)


def _ops_listing() -> dict[str, dict[str, list[str]]]:
    r = subprocess.run([sys.executable, "-m", "aot", "ops", "--json"], cwd=ROOT, capture_output=True, text=True,
                       check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(r.stdout)


def operators_md() -> str:
    ops = _ops_listing()
    tfl, onnx = ops["tflite"], ops["onnx"]
    lines = [
        "# Supported operators",
        "",
        "<!-- generated from `aot ops --json` when the site is built: do not edit -->",
        "",
        f"This page is generated from `aot ops --json` when the site is built. TFLite: {len(tfl)} operators "
        f"({len(tfl)} of the {TFLM_REGISTERED} TensorFlow Lite Micro registers); ONNX: {len(onnx)} op types. "
        "The dtypes are those of the operator's activations (a quantized model's int8 or int16 tensors, "
        "float32 for float models). What each TFLite operator becomes, and where a compiled model differs "
        "from TensorFlow Lite Micro, is in [TFLite operators in detail](../tflite-ops.md); what to do with "
        "an operator that is refused is in [Your model](../model.md#when-an-operator-is-refused).",
        "",
        "```sh",
        "aot ops --tflite          # the same lists in a terminal",
        "aot ops --onnx --json",
        "```",
        "",
        f"## TFLite ({len(tfl)})",
        "",
        "| TFLite operator | activation dtypes |",
        "|---|---|",
        *(f"| {name} | {', '.join(dts)} |" for name, dts in tfl.items()),
        "",
        f"## ONNX ({len(onnx)})",
        "",
        "| ONNX op type | dtypes |",
        "|---|---|",
        *(f"| {name} | {', '.join(dts)} |" for name, dts in onnx.items()),
        "",
    ]
    return "\n".join(lines)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps its sub-parsers here only
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (helps.get(name, ""), p) for name, p in action.choices.items()}
    return {}


def _option_row(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{s}`" for s in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            names += f" `{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
    else:
        names = f"`{action.metavar or action.dest}`"
    if action.help == argparse.SUPPRESS:
        return ""
    parts = [(action.help or ("the model file (.tflite or .onnx)" if action.dest.lower() == "model" else ""))]
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        parts.append("One of: " + ", ".join(f"`{c}`" for c in action.choices))
    if action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0 and action.option_strings:
        parts.append(f"Default: `{action.default}`")
    if isinstance(action, argparse._AppendAction):
        parts.append("Repeatable")
    text = " ".join(p if p.endswith(".") else p + "." for p in parts if p)
    text = text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")
    return f"| {names} | {text.strip()} |"


def cli_md() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines at the terminal's width
    sys.path.insert(0, str(ROOT))
    from aot.cli.app import build_parser
    parser = build_parser()
    lines = [
        "# Command line",
        "",
        "<!-- generated from the argparse parsers of aot/cli when the site is built: do not edit -->",
        "",
        "Generated from the parsers of `aot/cli` when the site is built, so it always matches "
        "`aot COMMAND --help`. Every user error prints one line (`aot: error: ...`) and exits with status 2 "
        "(`--debug` shows the Python traceback instead); see [Troubleshooting](../troubleshooting.md).",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    subs = _subcommands(parser)
    lines += [f"| [`aot {name}`](#aot-{name}) | {help_} |" for name, (help_, _) in subs.items()]
    lines.append("")
    for name, (help_, sub) in subs.items():
        lines += [f"## aot {name}", "", (help_[:1].upper() + help_[1:] + ".") if help_ else "", "",
                  "```text", sub.format_usage().strip(), "```", ""]
        if sub.description:
            lines += [sub.description, ""]
        rows = [r for a in sub._actions if not isinstance(a, argparse._HelpAction) and (r := _option_row(a))]
        if rows:
            lines += ["| argument | meaning |", "|---|---|", *rows, ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# error messages

BASE_ERRORS = {"Error", "ModelFormatError", "UnsupportedError", "ShapeError", "VerifyError", "FitError",
               "ToolchainError"}


@dataclass(frozen=True)
class RaiseSite:
    path: str   # relative to the repository
    line: int
    kind: str   # the error class
    message: str  # the message's text, run-time values shown as …


@dataclass(frozen=True)
class Group:
    prefix: tuple[str, ...]   # the source paths whose messages the group holds
    title: str
    cause: str
    fix: str


# Where a message comes from says what kind of problem it is: every source file that raises a
# user-facing error must fall in one of these groups (tests/docs checks it).
GROUPS = (
    Group(("aot/cli/",), "Command-line arguments",
          "An option combination or an argument value the command does not accept.",
          "Correct the command as the message says; `aot COMMAND --help` lists the options "
          "(and the [command-line reference](cli.md))."),
    Group(("aot/frontend/tflite/parse.py", "aot/frontend/onnx/parse.py", "aot/frontend/__init__.py",
           "aot/frontend/tflite/__init__.py", "aot/frontend/onnx/__init__.py"), "Reading a model file",
          "The file is missing, is not a TFLite flatbuffer or ONNX protobuf, is truncated or corrupt, or uses a "
          "format variant this compiler does not read (several subgraphs, float16 or hybrid weights, an opset "
          "out of range, external data outside the model's directory).",
          "Check the path and the file (`file MODEL`); re-export the model from its framework as a single-subgraph "
          "int8, 16x8 or float32 TFLite model, or an ONNX model of a supported opset."),
    Group(("aot/frontend/",), "Importing an operator",
          "An operator of the model, or one of its options, dtypes or quantization parameters, is not supported; "
          "unsupported operators are listed all at once, with their node names.",
          "See [Supported operators](operators.md) and [when an operator is refused](../model.md#when-an-operator-is-refused): "
          "re-export without the operator, replace it in the framework, or split the model."),
    Group(("aot/ops/", "aot/quant/"), "Operator semantics",
          "The shapes, dtypes or quantization parameters of an operator do not agree with what the operator "
          "defines (as in TensorFlow Lite Micro's Prepare): for example an int16 tensor with a non-zero zero point, "
          "mismatched broadcast shapes, an axis out of range.",
          "The model is malformed for this operator or was produced by an unusual converter: re-convert it; "
          "from the Python API, check the arguments given to the `GraphBuilder` method."),
    Group(("aot/ir/", "aot/graph_builder.py", "aot/oracle.py"), "Building a graph and model limits",
          "A `GraphBuilder` call with inconsistent arguments, or a model over the limits checked before any work "
          "(rank at most 8, 64 M elements per tensor, 256 MiB of constants, 20,000 operators).",
          "Fix the builder call the message names; a model over the limits is too large for a microcontroller."),
    Group(("aot/memory/", "aot/pipeline/", "aot/transform/", "aot/lower/", "aot/kernel/", "aot/llvm/", "codegen_c/"),
          "Compiling: options, memory, schedules",
          "A compile option out of range (planner, policy, pools, alignment, a tuning log for another model), or "
          "the plan does not fit the pools (a `FitError` names the model's need, the pool's size and the largest "
          "tensors).",
          "Give a valid option (see [Memory](../memory.md)); for a FitError, enlarge the pool, add a pool, use a "
          "board with more RAM, or reduce the model's largest activations."),
    Group(("aot/board/",), "Boards and projects",
          "An unknown board, a model that does not fit the board's flash or RAM, or a project directory that is "
          "not usable.",
          "`aot boards` lists the boards; see [Boards and projects](../boards.md); for a model that does not fit, "
          "pick a larger board or shrink the model (the message gives both sizes)."),
    Group(("aot/runners/",), "Running: host compiler, QEMU, TensorFlow Lite Micro",
          "A tool is missing or failed: gcc, arm-none-eabi-gcc, qemu-system-arm, the tflite-micro package, or the "
          "run ended without a status or with an error code.",
          "Run `make setup` (it installs the toolchains and the Python packages); a QEMU run that fails after "
          "building is a defect worth reporting with the printed output."),
    Group(("aot/tools/", "aot/execute/", "aot/fuzz/"), "Tools: bench, compare, profile, sweep, tune, zoo, fuzz",
          "A tool's input does not suit it (a model without static shapes for `bench`, a missing anchors file, "
          "an unknown zoo model, a failed cell on a cluster).",
          "Follow the message; `aot COMMAND --help` lists the tool's options."),
    Group(("aot/quantize/",), "Quantizing a float model (aot quantize)",
          "The calibration data does not match the model (shape, dtype, NaN or infinite samples, an empty file), "
          "the model is already integer, or one of its operators has no integer form here (named).",
          "Give one calibration sample per row (or per .npy file) of the model input's shape and dtype; quantize the "
          "float model, not an integer one; see [From a float model](../quantize.md) for the operators covered."),
    Group(("aot/timing/",), "Estimating cycles (aot cycles)",
          "The board has no memory-system description or no emulated core to run on, the ELF lacks the entry "
          "symbol, or the QEMU trace plugin could not be built or run.",
          "Pick a board that `aot boards` lists, name the entry symbol with `--entry`, and run `make setup` (it "
          "installs the host compiler the trace plugin needs); see [Speed](../speed.md#estimated-cycles-and-milliseconds-aot-cycles)."),
    Group(("aot/validate/",), "Validating on the board (aot validate, aot.Target)",
          "The data does not fit the model, or the line to the board failed: no port, no answer in time, a firmware "
          "of another model (hash mismatch), garbage, a reset, QEMU ended.",
          "See [Validating on the board](../validate.md) and the rows of [Troubleshooting](../troubleshooting.md); "
          "the report keeps the samples done before the failure."),
    Group(("aot/api.py", "aot/artifact/", "aot/assets.py"), "Python API and library files",
          "A call of `aot.build`, `Library.run` or `export` with arguments that do not match the model (input names, "
          "shapes or dtypes), or an output directory that cannot be written.",
          "Pass inputs with exactly the model's names, shapes and dtypes (nothing is reshaped or converted); "
          "choose a writable output directory."),
)

KIND_FIX = {
    "ModelFormatError": "the file is not a valid model of its format",
    "UnsupportedError": "valid, but not supported here",
    "ShapeError": "shapes or dtypes disagree",
    "VerifyError": "an IR verifier rule failed: a compiler defect, please report it",
    "FitError": "does not fit the memory",
    "ToolchainError": "an external tool is missing or failed",
    "Error": "bad input or option",
}


def _error_classes(trees: dict[str, ast.Module]) -> set[str]:
    names = set(BASE_ERRORS)
    changed = True
    while changed:
        changed = False
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names and any(
                        (isinstance(b, ast.Name) and b.id in names) or (isinstance(b, ast.Attribute) and b.attr in names)
                        for b in node.bases):
                    names.add(node.name)
                    changed = True
    return names


def _text(node: ast.AST | None) -> str:
    """The message a raise builds, with its run-time parts as …"""
    if node is None:
        return "…"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[sdrfxi]", "…", _text(node.left))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return re.sub(r"\{[^{}]*\}", "…", _text(node.func.value))
    return "…"


def raise_sites(root: Path = ROOT) -> list[RaiseSite]:
    """Every `raise SomeError(message)` of a user-facing error class in aot/ and codegen_c/."""
    trees = {}
    for pkg in ("aot", "codegen_c"):
        for p in sorted((root / pkg).rglob("*.py")):
            trees[p.relative_to(root).as_posix()] = ast.parse(p.read_text(), filename=str(p))
    kinds = _error_classes(trees)
    sites = []
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            f = node.exc.func
            kind = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if kind not in kinds:
                continue
            msg = " ".join(_text(node.exc.args[0] if node.exc.args else None).split())
            sites.append(RaiseSite(rel, node.lineno, kind, msg))
    return sorted(sites, key=lambda s: (s.path, s.line))


def group_of(path: str) -> Group | None:
    best = None
    for g in GROUPS:
        for pre in g.prefix:
            if path == pre or (pre.endswith("/") and path.startswith(pre)):
                if best is None or len(pre) > best[0]:
                    best = (len(pre), g)
    return best[1] if best else None


def errors_md() -> str:
    sites = raise_sites()
    lines = [
        "# Error messages",
        "",
        "<!-- generated from the raise sites of aot/ and codegen_c/ when the site is built: do not edit -->",
        "",
        f"Every user-facing error the code can raise ({len(sites)} raise sites), generated from the source when "
        "the site is built, grouped by where it comes from, with the cause and the fix of each group. `…` stands "
        "for the values the message fills in (operator names, shapes, sizes, paths). The messages met most often "
        "are explained one by one in [Troubleshooting](../troubleshooting.md).",
        "",
        "| error type | meaning |",
        "|---|---|",
        *(f"| `{k}` | {v} |" for k, v in KIND_FIX.items()),
        "",
    ]
    by_group: dict[str, list[RaiseSite]] = {}
    for s in sites:
        g = group_of(s.path)
        by_group.setdefault(g.title if g else "Other", []).append(s)
    for g in GROUPS:
        rows = by_group.get(g.title, [])
        if not rows:
            continue
        lines += [f"## {g.title}", "", f"**Cause.** {g.cause}", "", f"**Fix.** {g.fix}", "",
                  "| message | type | raised in |", "|---|---|---|"]
        seen = set()
        for s in rows:
            key = (s.message, s.kind, s.path)
            if key in seen:
                continue
            seen.add(key)
            msg = s.message.replace("|", "\\|").replace("`", "'").replace("<", "&lt;")
            lines.append(f"| `{msg}` | {s.kind} | `{s.path}` |" if msg != "…" else f"| (built at run time) | {s.kind} | `{s.path}` |")
        lines.append("")
    if "Other" in by_group:  # tests/docs fails on these: give their files a group above
        lines += ["## Other", "", "**Cause and fix.** Follow the message.", "", "| message | type | raised in |",
                  "|---|---|---|", *(f"| `{s.message}` | {s.kind} | `{s.path}` |" for s in by_group["Other"]), ""]
    return "\n".join(lines)


def generate(name: str) -> str:
    return globals()[GENERATED[name]]()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for rel in GENERATED:
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(generate(rel))
        print(f"wrote {dest}")
