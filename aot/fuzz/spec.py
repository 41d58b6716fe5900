"""A generated model as plain data: activation tensors, graph inputs and outputs, and operators
whose constant operands (weights, biases, shape vectors) are drawn from a seed at build time.
JSON round-trips (regression cases are saved as JSON) and is small enough to shrink op by op."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str  # int8 | int16 | float32 | int32 | bool
    scale: float | None = None  # None: float32
    zero_point: int = 0


@dataclass(frozen=True)
class OpSpec:
    kind: str  # a TFLite builtin name (CONV_2D, ...)
    inputs: tuple[int, ...]  # activation tensor indices
    output: int
    params: dict[str, Any] = field(default_factory=dict)  # options + what the constants need (seed)


@dataclass(frozen=True)
class ModelSpec:
    tensors: tuple[TensorSpec, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    ops: tuple[OpSpec, ...]
    seed: int = 0  # of the constants (each op adds its own params["seed"])

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "ModelSpec":
        ts = tuple(TensorSpec(t["name"], tuple(t["shape"]), t["dtype"], t["scale"], int(t["zero_point"]))
                   for t in d["tensors"])
        ops = tuple(OpSpec(o["kind"], tuple(o["inputs"]), int(o["output"]), dict(o["params"])) for o in d["ops"])
        return ModelSpec(ts, tuple(d["inputs"]), tuple(d["outputs"]), ops, int(d.get("seed", 0)))

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    def summary(self) -> str:
        kinds = [o.kind for o in self.ops]
        dts = sorted({self.tensors[i].dtype for i in self.inputs})
        return f"{len(kinds)} ops ({', '.join(kinds)}), inputs {'/'.join(dts)}"

    def pruned(self) -> "ModelSpec":
        """Only the ops the outputs depend on, and the inputs they read; tensors renumbered."""
        needed: set[int] = set(self.outputs)
        keep: list[OpSpec] = []
        for op in reversed(self.ops):
            if op.output in needed:
                keep.append(op)
                needed.update(op.inputs)
        keep.reverse()
        inputs = tuple(i for i in self.inputs if i in needed)
        used = sorted(set(inputs) | {o.output for o in keep} | set(self.outputs))
        renum = {old: new for new, old in enumerate(used)}
        return ModelSpec(tuple(self.tensors[i] for i in used), tuple(renum[i] for i in inputs),
                         tuple(renum[i] for i in self.outputs),
                         tuple(replace(o, inputs=tuple(renum[i] for i in o.inputs), output=renum[o.output])
                               for o in keep), self.seed)
