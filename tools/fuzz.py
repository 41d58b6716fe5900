"""Fuzzing the model loaders and the whole compile: `make fuzz` (default 10 minutes).

Inputs: real models (../shared/models when present) and generated ones (the TFLite writer,
onnx.helper), mutated by bit flips, byte changes, truncation, splices and structure-aware
edits of the flatbuffer/protobuf (absurd shapes, zero or negative dimensions, scale 0/NaN/inf,
huge tensors, dangling tensor indices, cycles). Contract for every input: `aot.load` then
`compile_model` then C generation either succeed or raise one aot.Error; a Python exception of
another kind is a crash, a worker that dies is a crash, an input that takes longer than the
per-input timeout is a hang. Each finding is written to tests/fuzz_regressions/ (the suite
replays every file there).

    python3 tools/fuzz.py --seconds 600 [--jobs 2] [--seed 0] [--frontend tflite|onnx|both]
"""
from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import random
import struct
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGRESSIONS = ROOT / "tests" / "fuzz_regressions"
SHARED = ROOT.parent / "shared" / "models"
PER_INPUT_TIMEOUT_S = 20.0
MEMORY_LIMIT_BYTES = 6 << 30


# ---------------------------------------------------------------------------------- harness
def check_one(data: bytes, suffix: str) -> tuple[str, str]:
    """Run the contract on one input. Returns (outcome, detail): ok | error | crash."""
    import tempfile

    import aot
    from aot.pipeline.driver import compile_model
    from aot.api import library_files

    with tempfile.TemporaryDirectory(prefix="aot_fuzz_") as tmp:
        path = Path(tmp) / f"input{suffix}"
        path.write_bytes(data)
        try:
            model = aot.load(path)
            compiled = compile_model(model)
            library_files(compiled)
            return "ok", ""
        except aot.Error as e:
            msg = str(e)
            if "\n" in msg.strip():
                return "crash", f"multi-line error message: {msg!r}"
            return "error", type(e).__name__
        except RecursionError:
            return "crash", traceback.format_exc(limit=8)
        except Exception:  # noqa: BLE001 - anything else breaks the contract
            return "crash", traceback.format_exc(limit=8)


def _worker(conn) -> None:  # noqa: ANN001
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass
    sys.path.insert(0, str(ROOT))
    while True:
        item = conn.recv()
        if item is None:
            return
        data, suffix = item
        try:
            conn.send(check_one(data, suffix))
        except MemoryError:
            conn.send(("crash", "MemoryError: exceeded the documented memory bound"))


class Worker:
    def __init__(self, ctx) -> None:  # noqa: ANN001
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()

    def run(self, data: bytes, suffix: str, timeout: float) -> tuple[str, str]:
        self.parent.send((data, suffix))
        if not self.parent.poll(timeout):
            self.proc.kill()
            self.proc.join()
            return "hang", f"no answer within {timeout} s"
        try:
            return self.parent.recv()
        except EOFError:
            self.proc.join()
            return "crash", f"worker died (exit code {self.proc.exitcode})"

    @property
    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self) -> None:
        try:
            self.parent.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()


# ---------------------------------------------------------------------------------- seeds
def tflite_seeds(rng: random.Random) -> list[bytes]:
    sys.path.insert(0, str(ROOT))
    seeds = [p.read_bytes() for p in sorted(SHARED.glob("*.tflite"))] if SHARED.is_dir() else []
    seeds += [generated_tflite(random.Random(rng.random())) for _ in range(8)]
    return seeds


def generated_tflite(rng: random.Random) -> bytes:
    """A small random but plausible int8 model (conv/dw/fc/pool/add/softmax), sometimes absurd."""
    import numpy as np

    from aot.frontend.tflite_writer import TFLiteModelBuilder

    b = TFLiteModelBuilder()
    absurd = rng.random() < 0.3
    h = rng.choice([1, 3, 8, 16]) if not absurd else rng.choice([0, -1, 1 << 20, 7])
    c = rng.choice([1, 2, 4])
    scale = 0.05 if not absurd else rng.choice([0.0, float("nan"), float("inf"), -1.0, 1e-30])
    x = b.add_tensor("x", [1, h, h, c], "int8", scale=scale, zero_point=rng.randint(-128, 127))
    cur, cur_c = x, c
    for i in range(rng.randint(1, 4)):
        kind = rng.choice(["CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "ADD"])
        out_c = rng.choice([1, 2, 4]) if kind == "CONV_2D" else cur_c
        y = b.add_tensor(f"y{i}", [1, h, h, out_c], "int8", scale=0.1, zero_point=0)
        if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            k = rng.choice([1, 3])
            wshape = [out_c, k, k, cur_c] if kind == "CONV_2D" else [1, k, k, out_c]
            nch = wshape[0] if kind == "CONV_2D" else wshape[3]
            w = b.add_tensor(f"w{i}", wshape, "int8",
                             data=np.random.default_rng(i).integers(-127, 128, size=[max(d, 0) for d in wshape],
                                                                    dtype=np.int8),
                             scale=[0.01] * nch, zero_point=[0] * nch, quantized_dimension=0 if kind == "CONV_2D" else 3)
            bias = b.add_tensor(f"b{i}", [nch], "int32", data=np.zeros(nch, np.int32), scale=[0.0005] * nch,
                                zero_point=[0] * nch)
            opts = {"padding": rng.choice(["SAME", "VALID"]), "stride_w": rng.choice([1, 2]),
                    "stride_h": rng.choice([1, 2]), "fused_activation_function": rng.choice(["NONE", "RELU"])}
            if kind == "DEPTHWISE_CONV_2D":
                opts["depth_multiplier"] = 1
            b.add_operator(kind, [cur, w, bias], [y], opts)
        elif kind == "AVERAGE_POOL_2D":
            b.add_operator(kind, [cur], [y], {"padding": "SAME", "stride_w": 1, "stride_h": 1, "filter_width": 2,
                                              "filter_height": 2})
        else:
            b.add_operator(kind, [cur, cur], [y], {})
        cur, cur_c = y, out_c
    b.set_inputs([x])
    b.set_outputs([cur])
    try:
        return b.finish()
    except Exception:  # noqa: BLE001 - the writer refuses some absurd values: use a plain seed
        return generated_tflite(random.Random(rng.random())) if not absurd else b"TFL3"


def onnx_seeds(rng: random.Random) -> list[bytes]:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    seeds = []
    for i in range(6):
        c = rng.choice([1, 3])
        w = numpy_helper.from_array(np.random.default_rng(i).standard_normal((4, c, 3, 3)).astype(np.float32), "w")
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["r"]),
                 helper.make_node("GlobalAveragePool", ["r"], ["p"]),
                 helper.make_node("Flatten", ["p"], ["f"]),
                 helper.make_node("Softmax", ["f"], ["y"], axis=1)]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
        seeds.append(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    _ = onnx
    return seeds


# ---------------------------------------------------------------------------------- mutators
INTERESTING_32 = [0, 1, -1, 0x7FFFFFFF, -0x80000000, 0xFFFF, 0x10000, 1 << 24, 255, 128]
INTERESTING_F32 = [0.0, float("nan"), float("inf"), -float("inf"), -1.0, 1e-38, 3.4e38]


def mutate(data: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    buf = bytearray(data)
    if not buf:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        op = rng.randrange(9)
        i = rng.randrange(len(buf))
        if op == 0:  # bit flip
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # random byte
            buf[i] = rng.getrandbits(8)
        elif op == 2 and len(buf) > 8:  # truncation
            del buf[rng.randrange(4, len(buf)):]
        elif op == 3 and i + 4 <= len(buf):  # interesting int32 (sizes, indices, offsets)
            buf[i:i + 4] = struct.pack("<I", INTERESTING_32[rng.randrange(len(INTERESTING_32))] & 0xFFFFFFFF)
        elif op == 4 and i + 4 <= len(buf):  # interesting float32 (scales)
            buf[i:i + 4] = struct.pack("<f", rng.choice(INTERESTING_F32))
        elif op == 5:  # delete a chunk
            del buf[i:i + rng.randint(1, 64)]
        elif op == 6:  # duplicate a chunk
            j = rng.randrange(len(buf))
            buf[i:i] = buf[j:j + rng.randint(1, 64)]
        elif op == 7 and pool:  # splice with another input
            other = rng.choice(pool)
            j = rng.randrange(max(len(other), 1))
            buf[i:] = other[j:j + rng.randint(1, 4096)]
        elif op == 8 and i + 4 <= len(buf):  # small int32 nudges (dimensions, tensor indices)
            v = struct.unpack("<i", bytes(buf[i:i + 4]))[0]
            buf[i:i + 4] = struct.pack("<i", max(min(v + rng.choice([-2, -1, 1, 2, 1 << 16]), 2**31 - 1), -2**31))
        if not buf:
            break
    return bytes(buf)


# ---------------------------------------------------------------------------------- campaign
def campaign(seconds: float, jobs: int, seed: int, frontends: list[str], save: bool = True) -> dict:
    rng = random.Random(seed)
    corpora = {}
    if "tflite" in frontends:
        corpora[".tflite"] = tflite_seeds(rng)
    if "onnx" in frontends:
        corpora[".onnx"] = onnx_seeds(rng)
    ctx = mp.get_context("spawn")
    workers = [Worker(ctx) for _ in range(max(jobs, 1))]
    stats = {"executions": 0, "ok": 0, "errors": 0, "crashes": 0, "hangs": 0, "findings": []}
    deadline = time.monotonic() + seconds
    suffixes = list(corpora)
    k = 0
    try:
        while time.monotonic() < deadline:
            suffix = suffixes[k % len(suffixes)]
            pool = corpora[suffix]
            data = mutate(rng.choice(pool), rng, pool) if rng.random() < 0.95 else rng.choice(pool)
            w = workers[k % len(workers)]
            if not w.alive:
                workers[k % len(workers)] = w = Worker(ctx)
            outcome, detail = w.run(data, suffix, PER_INPUT_TIMEOUT_S)
            k += 1
            stats["executions"] += 1
            if outcome == "ok":
                stats["ok"] += 1
                if len(pool) < 200 and rng.random() < 0.05:
                    pool.append(data)
            elif outcome == "error":
                stats["errors"] += 1
            else:
                stats["crashes" if outcome == "crash" else "hangs"] += 1
                name = hashlib.sha1(data).hexdigest()[:16] + suffix
                stats["findings"].append((name, outcome, detail.strip().splitlines()[-1] if detail else ""))
                if save:
                    REGRESSIONS.mkdir(parents=True, exist_ok=True)
                    (REGRESSIONS / name).write_bytes(data)
                    (REGRESSIONS / (name + ".txt")).write_text(f"{outcome}\n{detail}\n")
                if not w.alive:
                    workers[(k - 1) % len(workers)] = Worker(ctx)
    finally:
        for w in workers:
            w.close()
    return stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=int(os.environ.get("AOT_FUZZ_SEED", "0")))
    p.add_argument("--frontend", choices=["tflite", "onnx", "both"], default="both")
    p.add_argument("--no-save", action="store_true", help="do not write findings to tests/fuzz_regressions")
    a = p.parse_args(argv)
    fronts = ["tflite", "onnx"] if a.frontend == "both" else [a.frontend]
    t0 = time.monotonic()
    s = campaign(a.seconds, a.jobs, a.seed, fronts, save=not a.no_save)
    print(f"fuzz: {s['executions']} executions in {time.monotonic() - t0:.0f} s "
          f"({s['ok']} compiled, {s['errors']} refused with aot.Error), "
          f"{s['crashes']} crashes, {s['hangs']} hangs")
    for name, outcome, detail in s["findings"][:50]:
        print(f"  {outcome}: tests/fuzz_regressions/{name}: {detail}")
    return 1 if s["crashes"] or s["hangs"] else 0


if __name__ == "__main__":
    sys.exit(main())
