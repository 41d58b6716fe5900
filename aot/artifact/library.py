"""The model library: what `aot compile` writes and what board projects embed.

Layout (fixed, reproducible: no timestamps, no absolute paths, sorted JSON keys):
  include/<prefix>.h        the public interface (aot.artifact.header)
  src/*.c, src/*.h          C backend: kernels, executor, constants (they include runtime_c's
                            aot_runtime.h and aot_intrinsics.h)
  obj/<prefix>.o            LLVM backend: one object for the library's target
  metadata.json             format version, inputs, outputs, pools, the memory plan

The backends print the files (aot.artifact.export chooses one); this module adds the
metadata and writes the directory.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from aot.artifact.header import TensorInfo, tensor_infos

FORMAT_VERSION = 1


def widened_weight_bytes(module: Any) -> int:
    """The flash that weights pre-widened to 16-bit pairs cost beyond their int8 form (half of
    each pair table: `--flash-budget` int8 tables)."""
    return sum(c.buffer.nbytes // 2 for c in module.consts if "_wpairs" in c.buffer.name) + \
        sum(int(np.asarray(c.data).reshape(-1)[0]) for c in module.consts  # records: word 0 says
            if "_wshort" in c.buffer.name or "_wshallowq" in c.buffer.name)  # (aot.lower.schedule.short)


def metadata(compiled: Any, backend: str) -> dict[str, Any]:
    from aot.artifact.abi import io_buffers
    ins, outs = tensor_infos(compiled)
    p = compiled.plan
    o = compiled.options
    places = {b.name: {"pool": b.pool_name, "offset": b.offset} for b in io_buffers(compiled.module)}

    def t(info: TensorInfo) -> dict[str, Any]:
        d = {"name": info.name, "model_name": info.orig_name, "dtype": info.dtype, "shape": list(info.shape),
             "size_bytes": info.nbytes}
        if info.dtype == "bool":
            d["storage"] = "uint8 (0 = false, 1 = true)"  # the C element type of a bool tensor
        if info.scale is not None:
            d["quantization"] = {"scale": info.scale, "zero_point": info.zero_point}
        if info.name in places:  # a planned buffer in a pool (io_buffers "pool")
            d["in_pool"] = places[info.name]
        return d

    return {
        "format_version": FORMAT_VERSION,
        "generator": "microaot",
        "model": compiled.model.name,
        "prefix": o.prefix,
        "backend": backend,
        "policy": o.policy if isinstance(o.policy, str) else getattr(o.policy, "name", "mixed"),
        "planner": p.planner,
        "planner_requested": o.planner,
        # where the inputs and outputs live: "app" (the caller's buffers) or "pool" (planned, in_pool)
        "io_buffers": "pool" if compiled.module.io else "app",
        "io_bytes": sum(t.nbytes for t in ins + outs),
        "inputs": [t(i) for i in ins],
        "outputs": [t(i) for i in outs],
        "pools": [{"name": x.name, "size": x.size, "alignment": x.alignment} for x in compiled.module.pools],
        **({"states": [{"name": c.buffer.name, "model_name": st.name, "dtype": st.type.dtype,
                        "shape": list(st.type.shape), "size_bytes": c.buffer.nbytes}
                       for c, st in zip(compiled.module.states, compiled.model.states)],
            "state_bytes": sum(c.buffer.nbytes for c in compiled.module.states)} if compiled.module.states else {}),
        "activation_bytes": p.activation_bytes,
        "lower_bound_bytes": p.lower_bound_bytes,
        "patch": compiled.patch,  # the first stage run patch by patch (cut, grid, halo overhead), or null
        "constant_bytes": sum(c.buffer.nbytes for c in compiled.module.consts),
        "widened_weight_bytes": widened_weight_bytes(compiled.module),
        "kernels": list(p.step_kernels),
        "buffers": [asdict(b) for b in p.buffers],
    }


@contextlib.contextmanager
def atomic_directory(out_dir: Path) -> Iterator[Path]:
    """A staging directory beside `out_dir` that replaces it when the block succeeds and is
    removed when it fails: the output appears complete or not at all."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        yield tmp
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_atomically(out_dir: Path, files: dict[str, "str | bytes"]) -> Path:
    """Write a directory of files so that it appears complete or not at all."""
    with atomic_directory(out_dir) as tmp:
        for rel, content in sorted(files.items()):
            path = tmp / rel
            if os.path.isabs(rel) or ".." in Path(rel).parts:
                raise ValueError(f"refusing to write outside the output directory: {rel}")
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
    return Path(out_dir)


def write_library(compiled: Any, out_dir: Path, backend: str, files: dict[str, "str | bytes"]) -> Path:
    """Write the files a backend printed for `compiled` (a CompiledModel) and metadata.json."""
    files = dict(files)
    files["metadata.json"] = json.dumps(metadata(compiled, backend), indent=2, sort_keys=True) + "\n"
    return write_atomically(Path(out_dir), files)


__all__ = ["FORMAT_VERSION", "atomic_directory", "metadata", "write_atomically", "write_library"]
