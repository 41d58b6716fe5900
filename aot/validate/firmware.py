"""The validation firmware: a board project whose main loop answers HELLO and RUN requests on the
console UART (aot/board/project/templates/main_validate.c.j2), and the hash that ties it to the
compiled model."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from aot.board.boards import Board
from aot.board.flow import _compile_for_board, board_of, export_for_board, pool_placement
from aot.errors import Error
from aot.ir import Model
from aot.pipeline.driver import CompiledModel
from aot.validate.protocol import PROTOCOL_VERSION


@dataclass(frozen=True)
class ValidationBuild:
    board: Board
    compiled: CompiledModel
    backend: str
    model_hash: str  # sha256 of the model library (sources or object, header, metadata)
    hello: dict[str, Any]  # what the firmware answers to HELLO
    project_dir: Path | None = None
    compile_seconds: float = 0.0


def library_hash(lib_dir: Path) -> str:
    """sha256 over the library's files (relative path, then content, in path order)."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(lib_dir).rglob("*") if p.is_file()):
        h.update(path.relative_to(lib_dir).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def board_with_baud(board: Board, baud: int | None) -> Board:
    """The board with its console at `baud` (the validation firmware's line speed)."""
    if baud is None or board.console is None or baud == board.console.baud:
        return board
    if baud <= 0:
        raise Error(f"--baud must be positive, got {baud}")
    return replace(board, console=replace(board.console, baud=int(baud)))


def hello_info(compiled: CompiledModel, board: Board, backend: str, model_hash: str) -> dict[str, Any]:
    from aot.artifact.library import metadata
    meta = metadata(compiled, backend)

    def tensors(key: str) -> list[dict[str, Any]]:
        out = []
        for t in meta[key]:
            q = t.get("quantization") or {}
            out.append({"name": t["name"], "shape": list(t["shape"]), "dtype": t["dtype"], "bytes": t["size_bytes"],
                        "scale": q.get("scale"), "zero_point": q.get("zero_point")})
        return out

    timer = "qemu-instructions" if board.emulated else ("dwt-cycles" if board.has_dwt else "systick-cycles")
    return {"protocol": PROTOCOL_VERSION, "model": compiled.model.name, "prefix": compiled.options.prefix,
            "hash": model_hash, "board": board.name, "backend": backend, "timer": timer,
            "baud": board.console.baud if board.console else None,
            "inputs": tensors("inputs"), "outputs": tensors("outputs")}


def hello_bytes(info: dict[str, Any]) -> bytes:
    return json.dumps(info, sort_keys=True, separators=(",", ":")).encode()


def compile_for_validation(model: Model, board: "Board | str | Path", backend: str = "c", baud: int | None = None,
                           project_dir: "Path | Callable[[ValidationBuild], Path | None] | None" = None,
                           **options: Any) -> ValidationBuild:
    """Compile `model` for the board, export its library and hash it; with `project_dir` (or a
    function of the build that returns one, or None for none), also write the validation
    firmware's project there (not built)."""
    from aot.artifact.library import atomic_directory
    from aot.board.project import generate_project

    board = board_with_baud(board_of(board), baud)
    if backend not in ("c", "llvm"):
        raise Error(f"unknown backend {backend!r}; choose c or llvm")
    options = dict(options)
    options.pop("io", None)
    options.pop("input_lcg", None)
    stack = int(options.get("stack_bytes", board.stack_bytes))
    t0 = time.perf_counter()
    compiled = _compile_for_board(model, board, options)
    seconds = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="aot_val_") as tmp:
        lib_dir = export_for_board(compiled, board, Path(tmp) / "lib", backend)
        model_hash = library_hash(lib_dir)
        info = hello_info(compiled, board, backend, model_hash)
        vb = ValidationBuild(board, compiled, backend, model_hash, info, None, seconds)
        if callable(project_dir):
            project_dir = project_dir(vb)
        if project_dir is not None:
            with atomic_directory(Path(project_dir)) as staging:
                generate_project(lib_dir, board, staging, prefix=compiled.options.prefix,
                                 input_bytes=[bytes(t["bytes"]) for t in info["inputs"]],
                                 expected_output_bytes=None, stack_bytes=stack,
                                 pool_placement=pool_placement(board, compiled), io="uart",
                                 validate_hello=hello_bytes(info))
    return replace(vb, project_dir=Path(project_dir)) if project_dir is not None else vb


def firmware_digest(board: Board | None = None) -> str:
    """A digest of the firmware's own sources (main loop template, platform code) and of the
    board's console settings: a cached build made from other sources is not reused."""
    from aot.assets import asset_dir
    from aot.board.project.render import TEMPLATE_DIR
    h = hashlib.sha256((TEMPLATE_DIR / "main_validate.c.j2").read_bytes())
    if board is not None and board.console is not None:
        h.update(" ".join(board.console.defines()).encode())
    for root in (asset_dir("platform") / "cortex_m", asset_dir("platform") / "common"):
        for path in sorted(root.rglob("*.[ch]")):
            h.update(path.read_bytes())
    return h.hexdigest()[:8]


def cache_root() -> Path:
    """Where `aot validate` keeps built validation firmware ($AOT_CACHE_DIR, else ~/.cache/microaot)."""
    base = os.environ.get("AOT_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME")
                                                           or os.path.expanduser("~/.cache"), "microaot")
    return Path(base) / "validate"


def prepare_firmware(model: Model, board: "Board | str | Path", backend: str = "c", baud: int | None = None,
                     build_dir: Path | None = None, **options: Any) -> ValidationBuild:
    """Compile `model` once and write the validation firmware's project (not built) where
    `build_firmware` builds it: `build_dir`, by default a cache directory named after the model's
    hash; a project written before for the same HELLO is kept as it is (its ELF is reused)."""
    from aot.runners.qemu import _elf_of

    chosen: list[Path] = []

    def where(vb: ValidationBuild) -> Path | None:
        d = Path(build_dir) if build_dir is not None else cache_root() / f"{vb.board.name}-{backend}-{vb.model_hash[:16]}-{firmware_digest(vb.board)}"
        chosen.append(d)
        try:
            same = json.loads((d / "project.json").read_text()).get("validate") == vb.hello
        except (OSError, json.JSONDecodeError):
            same = False
        return None if same and _elf_of(d).is_file() else d  # built before: reuse it

    vb = compile_for_validation(model, board, backend, baud, project_dir=where, **options)
    return replace(vb, project_dir=chosen[0])


def build_prepared(vb: ValidationBuild) -> Path:
    """The ELF of a project written by `prepare_firmware` (built once, then reused)."""
    from aot.runners.qemu import build_project
    if vb.project_dir is None:
        raise Error("the validation build has no project directory (prepare_firmware writes one)")
    return build_project(vb.project_dir)


def build_firmware(model: Model, board: "Board | str | Path", backend: str = "c", baud: int | None = None,
                   build_dir: Path | None = None, **options: Any) -> tuple[ValidationBuild, Path]:
    """The validation firmware's ELF for (model, board, backend, options), built once and reused:
    the project lives in `build_dir`, by default a cache directory named after the model's hash."""
    vb = prepare_firmware(model, board, backend, baud, build_dir, **options)
    return vb, build_prepared(vb)
