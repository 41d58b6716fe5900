"""The recurrent-layer references (aot.quant.lstm, aot.quant.svdf) against TensorFlow Lite
Micro's interpreter, bit for bit.

* Real layers: every UNIDIRECTIONAL_SEQUENCE_LSTM and SVDF of the models in
  ../shared/tflm-models, run by TFLM on seeded inputs; the reference, fed the layer's actual
  input tensor, its constants and TFLM's freshly reset state, must give TFLM's output tensor
  and TFLM's new state tensors.
* Written models: single-op models (aot.frontend.tflite_writer) with random weights and
  converter-like quantization, over the options (time_major, batch, cell clip, proj clip, rank,
  fused activation) and the dtypes (float32, int8, 16x8; SVDF with int16 or int8 state).
* State: one model whose K operators share the same variable state tensors is K invocations
  of the layer on K inputs (TFLM runs them in order and the state persists between them), so
  the k-th output must equal the reference chained through k-1 earlier states.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # conftest

from aot.errors import ShapeError, UnsupportedError  # noqa: E402
from aot.frontend.tflite_writer import TFLiteModelBuilder  # noqa: E402
from aot.quant import lstm as L  # noqa: E402
from aot.quant import svdf as S  # noqa: E402
from aot.runners.tflm import TFLMError, run_batch  # noqa: E402
from conftest import SHARED  # noqa: E402

REPO = SHARED / "tflm-models"
LSTM_MODELS = ["examples/mnist_lstm/trained_lstm.tflite", "examples/mnist_lstm/trained_lstm_int8.tflite",
               "examples/dtln/dtln_noise_suppression.tflite",
               "third_party/xtensa/examples/micro_speech_lstm/micro_speech_lstm.tflite"]
SVDF_MODELS = ["models/keyword_scrambled.tflite", "models/keyword_scrambled_8bit.tflite"]
BIAS_DTYPE = {"float32": "float32", "int8": "int32", "int16": "int64"}
TFL_ACT = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 5: "sign_bit"}


def repo_file(rel: str) -> bytes:
    p = REPO / rel
    if not p.exists():
        pytest.fail(f"{p} missing: ../shared/tflm-models must sit beside the checkout")
    return p.read_bytes()


# ================================================================ reading .tflite files

@dataclass(frozen=True)
class _Tensor:
    dtype: str
    shape: tuple[int, ...]
    scale: Optional[np.ndarray]
    zero_point: Optional[np.ndarray]


@dataclass(frozen=True)
class _Op:
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict


def read_model(data: bytes) -> tuple[list[_Tensor], list[_Op], list[int]]:
    """Tensors, operators (LSTM/SVDF options decoded) and inputs of subgraph 0."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator
    from tflite.SVDFOptions import SVDFOptions
    from tflite.TensorType import TensorType
    from tflite.UnidirectionalSequenceLSTMOptions import UnidirectionalSequenceLSTMOptions
    op_names = {v: k for k, v in BuiltinOperator.__dict__.items() if not k.startswith("_")}
    type_names = {v: k.lower() for k, v in TensorType.__dict__.items() if not k.startswith("_")}
    m = tflite.Model.GetRootAsModel(data, 0)
    g = m.Subgraphs(0)
    tensors = []
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        q = t.Quantization()
        has_q = q is not None and q.ScaleLength() > 0
        tensors.append(_Tensor(type_names[t.Type()], tuple(int(d) for d in t.ShapeAsNumpy()),
                               q.ScaleAsNumpy() if has_q else None, q.ZeroPointAsNumpy() if has_q else None))
    ops = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        name = op_names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]
        options: dict = {}
        raw = op.BuiltinOptions()
        if name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
            o = UnidirectionalSequenceLSTMOptions()
            o.Init(raw.Bytes, raw.Pos)
            options = {"activation": TFL_ACT[o.FusedActivationFunction()], "cell_clip": o.CellClip(),
                       "time_major": bool(o.TimeMajor())}
        elif name == "SVDF":
            o = SVDFOptions()
            o.Init(raw.Bytes, raw.Pos)
            options = {"rank": o.Rank(), "activation": TFL_ACT[o.FusedActivationFunction()]}
        ops.append(_Op(name, tuple(int(v) for v in op.InputsAsNumpy()), tuple(int(v) for v in op.OutputsAsNumpy()),
                       options))
    return tensors, ops, [int(g.Inputs(i)) for i in range(g.InputsLength())]


def seeded_inputs(tensors: list[_Tensor], inputs: list[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for i in inputs:
        t = tensors[i]
        if t.dtype == "float32":
            out.append(rng.normal(0.0, 1.0, t.shape).astype(np.float32))
        else:
            info = np.iinfo(t.dtype)
            out.append(rng.integers(info.min, info.max, t.shape, endpoint=True).astype(t.dtype))
    return out


def initial_state(t: _Tensor) -> np.ndarray:
    """The value TFLM gives a variable tensor when it allocates the model."""
    zp = int(t.zero_point[0]) if t.zero_point is not None else 0
    return np.full(t.shape, S.reset_value(t.dtype, zp), dtype=t.dtype)


def lstm_reference(tensors: list[_Tensor], op: _Op, values: dict[int, np.ndarray], h0, c0):
    vals = [None if i < 0 else values[i] for i in op.inputs]
    w = L.LstmWeights.from_operator_inputs(vals)
    o, ins = op.options, op.inputs
    x = values[ins[0]]
    if tensors[ins[0]].dtype == "float32":
        return L.lstm_float(x, w, h0, c0, o["cell_clip"], o["activation"], o["time_major"])
    q = [tensors[i] for i in ins]
    p = L.lstm_int_params(q[0].scale[0], int(q[0].zero_point[0]), [q[i].scale for i in range(1, 5)],
                          [q[i].scale for i in range(5, 9)], q[18].scale[0], int(q[18].zero_point[0]),
                          q[19].scale[0], o["cell_clip"], o["activation"], q[0].dtype)
    return L.lstm_integer(x, w, p, h0, c0, o["time_major"])


def svdf_reference(tensors: list[_Tensor], op: _Op, values: dict[int, np.ndarray], state0):
    ins = op.inputs
    x, wf, wt = values[ins[0]], values[ins[1]], values[ins[2]]
    bias = values[ins[3]] if ins[3] >= 0 else None
    rank, act = op.options["rank"], op.options["activation"]
    if tensors[ins[0]].dtype == "float32":
        return S.svdf_float(x, wf, wt, bias, state0, rank, act)
    q = [tensors[i] for i in ins]
    out = tensors[op.outputs[0]]
    p = S.svdf_params(q[0].scale, int(q[0].zero_point[0]), q[1].scale, q[2].scale, q[4].scale,
                      int(q[4].zero_point[0]), q[3].scale, out.scale, int(out.zero_point[0]), q[4].dtype)
    return S.svdf_integer(x, wf, wt, bias, state0, p, rank)


def check_layers(data: bytes, op_name: str, seeds: Sequence[int]) -> int:
    """Run the model in TFLM on seeded inputs; every `op_name` layer's reference must give
    TFLM's output and new state tensors.  Returns the number of layers checked."""
    tensors, ops, inputs = read_model(data)
    jobs = [(data, seeded_inputs(tensors, inputs, s)) for s in seeds]
    results = run_batch(jobs, tensors="all")
    checked = 0
    for seed, res in zip(seeds, results):
        values = res.tensors
        for k, op in enumerate(ops):
            if op.name != op_name:
                continue
            where = f"seed {seed}, operator {k}"
            if op_name == "SVDF":
                st = op.inputs[4]
                y, new_state = svdf_reference(tensors, op, values, initial_state(tensors[st]))
                states = [(new_state, st)]
            else:
                h, c = op.inputs[18], op.inputs[19]
                y, new_h, new_c = lstm_reference(tensors, op, values, initial_state(tensors[h]),
                                                 initial_state(tensors[c]))
                states = [(new_h, h), (new_c, c)]
            np.testing.assert_array_equal(y, values[op.outputs[0]], err_msg=f"output, {where}")
            for got, idx in states:
                np.testing.assert_array_equal(got, values[idx], err_msg=f"state tensor {idx}, {where}")
            checked += 1
    return checked


# ============================================================ real layers of TFLM's models

@pytest.mark.parametrize("rel", LSTM_MODELS)
def test_real_lstm_layers_bit_exact(rel):
    n = check_layers(repo_file(rel), "UNIDIRECTIONAL_SEQUENCE_LSTM", seeds=(0, 1))
    assert n >= 2


@pytest.mark.parametrize("rel", SVDF_MODELS)
def test_real_svdf_layers_bit_exact(rel):
    n = check_layers(repo_file(rel), "SVDF", seeds=(0, 1))
    assert n == 2 * 7  # seven SVDF layers per model


# ======================================================================= written models

def _q(scale, zp=0):
    return {"scale": scale, "zero_point": zp}


@dataclass
class LstmCase:
    dtype: str                    # activations: float32 | int8 | int16
    weights: L.LstmWeights
    steps: int
    batch: int
    time_major: bool
    cell_clip: float
    proj_clip: float
    q: dict                       # input/hidden/cell quantization and per-gate weight scales
    activation: str = "tanh"      # the cell gate's fused activation

    @property
    def x_shape(self) -> tuple[int, int, int]:
        n_in = self.weights.input_weights[0].shape[1]
        return (self.steps, self.batch, n_in) if self.time_major else (self.batch, self.steps, n_in)

    def out_shape(self) -> tuple[int, int, int]:
        s = self.x_shape
        return (s[0], s[1], self.weights.state_size())

    def params(self) -> L.LstmIntParams:
        q = self.q
        return L.lstm_int_params(q["in"][0], q["in"][1], q["wi"], q["wr"], q["h"][0], q["h"][1], q["c"],
                                 self.cell_clip, self.activation, self.dtype)

    def reference(self, x, h, c):
        if self.dtype == "float32":
            return L.lstm_float(x, self.weights, h, c, self.cell_clip, self.activation, self.time_major)
        return L.lstm_integer(x, self.weights, self.params(), h, c, self.time_major)

    def initial(self) -> tuple[np.ndarray, np.ndarray]:
        shape = (self.batch, self.weights.state_size())
        if self.dtype == "float32":
            return np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        return (np.full(shape, L.reset_value(self.dtype, self.q["h"][1]), self.dtype), np.zeros(shape, np.int16))

    def model(self, invocations: int = 1) -> bytes:
        """One LSTM operator per invocation, all on the same variable state tensors."""
        b = TFLiteModelBuilder()
        fl = self.dtype == "float32"
        wdt, q, w = ("float32" if fl else "int8"), self.q, self.weights

        def quant(key, k=None):
            if fl:
                return {}
            v = q[key] if k is None else q[key][k]
            return _q(*v) if isinstance(v, tuple) else _q(v)

        wi = [b.add_tensor(f"wi{g}", w.input_weights[g].shape, wdt, data=w.input_weights[g], **quant("wi", g))
              for g in range(4)]
        wr = [b.add_tensor(f"wr{g}", w.recurrent_weights[g].shape, wdt, data=w.recurrent_weights[g],
                           **quant("wr", g)) for g in range(4)]
        bias = [b.add_tensor(f"b{g}", w.biases[g].shape, BIAS_DTYPE[self.dtype], data=w.biases[g],
                             **({} if fl else _q(float(np.float32(q["in"][0]) * np.float32(q["wi"][g])))))
                for g in range(4)]
        shape = (self.batch, w.state_size())
        h = b.add_tensor("h", shape, self.dtype, is_variable=True, **quant("h"))
        c = b.add_tensor("c", shape, "float32" if fl else "int16", is_variable=True, **quant("c"))
        xs, ys = [], []
        for k in range(invocations):
            x = b.add_tensor(f"x{k}", self.x_shape, self.dtype, **quant("in"))
            y = b.add_tensor(f"y{k}", self.out_shape(), self.dtype, **quant("h"))
            b.add_operator("UNIDIRECTIONAL_SEQUENCE_LSTM",
                           [x, *wi, *wr, -1, -1, -1, *bias, -1, -1, h, c, -1, -1, -1, -1], [y],
                           {"fused_activation_function": self.activation.upper(), "cell_clip": self.cell_clip,
                            "proj_clip": self.proj_clip, "time_major": self.time_major})
            xs.append(x)
            ys.append(y)
        b.set_inputs(xs)
        b.set_outputs(ys)
        return b.finish()

    def inputs(self, rng, invocations: int = 1) -> list[np.ndarray]:
        if self.dtype == "float32":
            return [rng.normal(0.0, 1.5, self.x_shape).astype(np.float32) for _ in range(invocations)]
        info = np.iinfo(self.dtype)
        return [rng.integers(info.min, info.max, self.x_shape, endpoint=True).astype(self.dtype)
                for _ in range(invocations)]


def random_lstm_case(rng: np.random.Generator, dtype: str) -> LstmCase:
    n_in, size = int(rng.integers(1, 13)), int(rng.integers(1, 11))
    steps, batch = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    time_major = bool(rng.random() < 0.5)
    cell_clip = float(rng.choice([0.0, 10.0, float(np.float32(rng.uniform(0.3, 3.0)))]))
    proj_clip = float(rng.choice([0.0, 2.5]))
    if dtype == "float32":
        wi = tuple(rng.normal(0, 0.6, (size, n_in)).astype(np.float32) for _ in range(4))
        wr = tuple(rng.normal(0, 0.6, (size, size)).astype(np.float32) for _ in range(4))
        bs = tuple(rng.normal(0, 0.8, size).astype(np.float32) for _ in range(4))
        return LstmCase(dtype, L.LstmWeights(wi, wr, bs), steps, batch, time_major, cell_clip, proj_clip, {})
    # Converter-like quantization: per-tensor int8 weights, bias scale s_in * s_w, power-of-two
    # cell scale, hidden state in about [-1, 1].
    if dtype == "int8":
        s_in, zp_in = float(10 ** rng.uniform(-2.5, -0.5)), int(rng.integers(-128, 128))
        s_h, zp_h = float(rng.uniform(0.9, 1.1) / 128), int(rng.integers(-12, 13))
    else:
        s_in, zp_in = float(10 ** rng.uniform(-4.5, -3.0)), 0
        s_h, zp_h = float(rng.uniform(0.9, 1.1) / 32768), 0
    s_c = 2.0 ** -int(rng.integers(11, 16))
    s_wi = [float(10 ** rng.uniform(-3.0, -1.5)) for _ in range(4)]
    s_wr = [float(10 ** rng.uniform(-3.0, -1.5)) for _ in range(4)]
    wi = tuple(rng.integers(-127, 128, (size, n_in)).astype(np.int8) for _ in range(4))
    wr = tuple(rng.integers(-127, 128, (size, size)).astype(np.int8) for _ in range(4))
    bias_dt = np.int32 if dtype == "int8" else np.int64
    bs = tuple(np.round(rng.uniform(-1.5, 1.5, size) / (np.float32(s_in) * np.float32(s_wi[g]))).astype(bias_dt)
               for g in range(4))
    q = {"in": (s_in, zp_in), "h": (s_h, zp_h), "c": s_c, "wi": s_wi, "wr": s_wr}
    return LstmCase(dtype, L.LstmWeights(wi, wr, bs), steps, batch, time_major, cell_clip, proj_clip, q)


def _compare_lstm_cases(cases: list[LstmCase], invocations: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs, feeds = [], []
    for case in cases:
        xs = case.inputs(rng, invocations)
        feeds.append(xs)
        jobs.append((case.model(invocations), xs))
    results = run_batch(jobs)
    for k, (case, xs, res) in enumerate(zip(cases, feeds, results)):
        h, c = case.initial()
        for j, x in enumerate(xs):
            y, h, c = case.reference(x, h, c)
            np.testing.assert_array_equal(y, res.outputs[j], err_msg=f"case {k} ({case.dtype}, time_major="
                                          f"{case.time_major}, clip={case.cell_clip}), invocation {j}")


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
def test_lstm_random_single_op(dtype):
    rng = np.random.default_rng({"float32": 11, "int8": 12, "int16": 13}[dtype])
    _compare_lstm_cases([random_lstm_case(rng, dtype) for _ in range(16)], invocations=1, seed=3)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
def test_lstm_state_persists_between_invocations(dtype):
    rng = np.random.default_rng({"float32": 21, "int8": 22, "int16": 23}[dtype])
    _compare_lstm_cases([random_lstm_case(rng, dtype) for _ in range(6)], invocations=3, seed=4)


def test_lstm_second_invocation_differs_from_first():
    """The state test can fail: with a carried state the second output differs from the
    output of the same input on a fresh state."""
    case = random_lstm_case(np.random.default_rng(5), "int8")
    x = case.inputs(np.random.default_rng(6))[0]
    h0, c0 = case.initial()
    first, h1, c1 = case.reference(x, h0, c0)
    second, _, _ = case.reference(x, h1, c1)
    out = run_batch([(case.model(2), [x, x])])[0].outputs
    np.testing.assert_array_equal(out[0], first)
    np.testing.assert_array_equal(out[1], second)
    assert not np.array_equal(first, second)


def test_lstm_16x8_nonzero_zero_points():
    """int16 activations with non-zero zero points: TFLM's FC applies the input offset."""
    rng = np.random.default_rng(31)
    cases = []
    for _ in range(4):
        case = random_lstm_case(rng, "int16")
        case.q["in"] = (case.q["in"][0], int(rng.integers(-300, 300)))
        case.q["h"] = (case.q["h"][0], int(rng.integers(-300, 300)))
        cases.append(case)
    _compare_lstm_cases(cases, invocations=2, seed=5)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int16"])
def test_lstm_cell_activation_other_than_tanh_is_none(dtype):
    """TFLM's release build leaves the cell gate unactivated for any fused activation but
    tanh (the file format has no sigmoid); so does the reference."""
    rng = np.random.default_rng({"float32": 41, "int8": 42, "int16": 43}[dtype])
    cases = [random_lstm_case(rng, dtype) for _ in range(3)]
    for case, act in zip(cases, ["none", "relu", "sign_bit"]):
        case.activation = act
    _compare_lstm_cases(cases, invocations=2, seed=8)
    tanh_case = LstmCase(**{**cases[0].__dict__, "activation": "tanh"})
    x = cases[0].inputs(np.random.default_rng(0))[0]
    assert not np.array_equal(cases[0].reference(x, *cases[0].initial())[0],
                              tanh_case.reference(x, *tanh_case.initial())[0])
    with pytest.raises(UnsupportedError):
        L.lstm_int_params(0.1, 0, [0.01] * 4, [0.01] * 4, 1 / 128, 0, 2 ** -12, activation="swish")


def test_lstm_variants_refused_like_tflm():
    """CIFG (no input-gate weights) and peephole LSTMs: refused by the reference and by TFLM."""
    case = random_lstm_case(np.random.default_rng(51), "float32")
    b = TFLiteModelBuilder()
    w = case.weights
    n_in, size = w.input_weights[0].shape[1], w.state_size()
    x = b.add_tensor("x", case.x_shape, "float32")
    wi = [-1] + [b.add_tensor(f"wi{g}", (size, n_in), "float32", data=w.input_weights[g]) for g in (1, 2, 3)]
    wr = [-1] + [b.add_tensor(f"wr{g}", (size, size), "float32", data=w.recurrent_weights[g]) for g in (1, 2, 3)]
    bias = [-1] + [b.add_tensor(f"b{g}", (size,), "float32", data=w.biases[g]) for g in (1, 2, 3)]
    h = b.add_tensor("h", (case.batch, size), "float32", is_variable=True)
    c = b.add_tensor("c", (case.batch, size), "float32", is_variable=True)
    y = b.add_tensor("y", case.out_shape(), "float32")
    b.add_operator("UNIDIRECTIONAL_SEQUENCE_LSTM", [x, *wi, *wr, -1, -1, -1, *bias, -1, -1, h, c, -1, -1, -1, -1],
                   [y], {"fused_activation_function": "TANH", "time_major": case.time_major})
    b.set_inputs([x])
    b.set_outputs([y])
    res = run_batch([(b.finish(), case.inputs(np.random.default_rng(0)))], return_errors=True)[0]
    assert isinstance(res, TFLMError)
    values = [None] * 24
    for i, v in ((2, 1), (3, 2), (4, 3)):
        values[i] = w.input_weights[v]
        values[i + 4] = w.recurrent_weights[v]
        values[i + 11] = w.biases[v]
    with pytest.raises(UnsupportedError, match="CIFG"):
        L.LstmWeights.from_operator_inputs(values)
    values[1], values[5], values[12] = w.input_weights[0], w.recurrent_weights[0], w.biases[0]
    values[10] = np.zeros(size, np.float32)
    with pytest.raises(UnsupportedError, match="peephole"):
        L.LstmWeights.from_operator_inputs(values)


def test_lstm_params_as_tflm_prepare():
    p = L.lstm_int_params(0.75, -3, [3 / 256] * 4, [0.02] * 4, 1 / 128, 2, 2 ** -11, cell_clip=3.3, dtype="int8")
    # FC multipliers: s_in * s_w / 2**-12 = 0.75 * 3/256 * 4096 = 36 = 0.5625 * 2**6.
    assert (p.input_fc[0].multiplier, p.input_fc[0].shift) == (int(0.5625 * 2 ** 31), 6)
    assert p.input_fc[0].input_offset == 3 and p.recurrent_fc[0].input_offset == -2
    assert p.cell_scale_power == -11
    assert p.quantized_cell_clip == int(np.float32(3.3) * 2048)  # truncated toward zero
    assert (p.output_mul.act_min, p.output_mul.act_max, p.output_mul.output_offset) == (-128, 127, 2)
    assert (p.forget_cell_mul.act_min, p.forget_cell_mul.act_max) == (-32768, 32767)
    # forget x cell -> cell: 2**-15 exactly, i.e. 0.5 * 2**-14.
    assert (p.forget_cell_mul.multiplier, p.forget_cell_mul.shift) == (1 << 30, -14)
    with pytest.raises(UnsupportedError):
        L.lstm_int_params(0.05, 0, [[0.01, 0.02]] * 4, [0.02] * 4, 1 / 128, 0, 2 ** -11)


@pytest.mark.parametrize("power, expected", [(-12, (0, 0)), (-11, (0, 1)), (-13, (3, 1)), (-15, (3, 3))])
def test_cell_tanh_input_scaling(power, expected):
    p = L.cell_tanh_params(power)
    assert (p.input_multiplier, p.input_left_shift) == expected


def test_libm_float_functions_differ_from_numpy():
    """The float path calls the C library's expf/tanhf: numpy's float32 versions differ in the
    last bit for some inputs (which would break bit-exactness against TFLM)."""
    x = np.linspace(-9.0, 9.0, 20001, dtype=np.float32)
    assert np.array_equal(L.expf(x), L.expf(x.copy()))
    differs = (L.expf(x) != np.exp(x)).any() or (L.tanhf(x) != np.tanh(x)).any()
    assert differs
    assert np.max(np.abs(L.expf(x).astype(np.float64) - np.exp(x.astype(np.float64))) / np.exp(x)) < 2e-7


def test_lstm_shapes_checked():
    case = random_lstm_case(np.random.default_rng(61), "int8")
    h, c = case.initial()
    with pytest.raises(ShapeError):
        case.reference(np.zeros(case.x_shape[1:], np.int8), h, c)
    with pytest.raises(ShapeError):
        case.reference(case.inputs(np.random.default_rng(0))[0], h[:, :0], c)
    w = case.weights
    bad = L.LstmWeights(w.input_weights, w.recurrent_weights, (*w.biases[:3], w.biases[3][:-1]))
    with pytest.raises(ShapeError):
        L.lstm_integer(case.inputs(np.random.default_rng(0))[0], bad, case.params(), h, c, case.time_major)


# ------------------------------------------------------------------------------- SVDF

@dataclass
class SvdfCase:
    kind: str                     # float32 | int16 (int8 input, int16 state) | int8 (int8 state)
    batch: int
    rank: int
    activation: str
    wf: np.ndarray
    wt: np.ndarray
    bias: Optional[np.ndarray]
    q: dict

    @property
    def units(self) -> int:
        return self.wf.shape[0] // self.rank

    def state_dtype(self) -> str:
        return {"float32": "float32", "int16": "int16", "int8": "int8"}[self.kind]

    def initial(self) -> np.ndarray:
        shape = (self.batch, self.wt.size)
        zp = self.q.get("state", (0, 0))[1]
        return np.full(shape, S.reset_value(self.state_dtype(), zp), self.state_dtype())

    def params(self) -> S.SvdfParams:
        q = self.q
        return S.svdf_params(q["in"][0], q["in"][1], q["wf"], q["wt"], q["state"][0], q["state"][1],
                             self.bias_scale(), q["out"][0], q["out"][1], self.state_dtype())

    def bias_scale(self) -> float:
        return float(np.float32(self.q["state"][0]) * np.float32(self.q["wt"]))

    def reference(self, x, state):
        if self.kind == "float32":
            return S.svdf_float(x, self.wf, self.wt, self.bias, state, self.rank, self.activation)
        return S.svdf_integer(x, self.wf, self.wt, self.bias, state, self.params(), self.rank)

    def model(self, invocations: int = 1) -> bytes:
        b = TFLiteModelBuilder()
        fl = self.kind == "float32"
        q = self.q
        adt = "float32" if fl else "int8"
        wf = b.add_tensor("wf", self.wf.shape, adt, data=self.wf, **({} if fl else _q(q["wf"])))
        wt = b.add_tensor("wt", self.wt.shape, self.state_dtype(), data=self.wt, **({} if fl else _q(q["wt"])))
        bias = -1
        if self.bias is not None:
            bias = b.add_tensor("bias", self.bias.shape, "float32" if fl else "int32", data=self.bias,
                                **({} if fl else _q(self.bias_scale())))
        st = b.add_tensor("state", (self.batch, self.wt.size), self.state_dtype(), is_variable=True,
                          **({} if fl else _q(*q["state"])))
        xs, ys = [], []
        for k in range(invocations):
            x = b.add_tensor(f"x{k}", (self.batch, self.wf.shape[1]), adt, **({} if fl else _q(*q["in"])))
            y = b.add_tensor(f"y{k}", (self.batch, self.units), adt, **({} if fl else _q(*q["out"])))
            b.add_operator("SVDF", [x, wf, wt, bias, st], [y],
                           {"rank": self.rank, "fused_activation_function": self.activation.upper()})
            xs.append(x)
            ys.append(y)
        b.set_inputs(xs)
        b.set_outputs(ys)
        return b.finish()

    def inputs(self, rng, invocations: int = 1) -> list[np.ndarray]:
        shape = (self.batch, self.wf.shape[1])
        if self.kind == "float32":
            return [rng.normal(0.0, 1.0, shape).astype(np.float32) for _ in range(invocations)]
        return [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(invocations)]


FLOAT_ACTS = ["none", "relu", "relu_n1_to_1", "relu6", "tanh", "sign_bit"]


def random_svdf_case(rng: np.random.Generator, kind: str) -> SvdfCase:
    rank, units = int(rng.integers(1, 4)), int(rng.integers(1, 9))
    n_in, memory, batch = int(rng.integers(1, 17)), int(rng.integers(1, 6)), int(rng.integers(1, 4))
    filters = rank * units
    if kind == "float32":
        act = str(rng.choice(FLOAT_ACTS))
        bias = rng.normal(0, 0.5, units).astype(np.float32)  # TFLM's Prepare crashes without one
        return SvdfCase(kind, batch, rank, act, rng.normal(0, 0.5, (filters, n_in)).astype(np.float32),
                        rng.normal(0, 0.5, (filters, memory)).astype(np.float32), bias, {})
    act = str(rng.choice(["relu", "none"]))
    wt_dt = np.int16 if kind == "int16" else np.int8
    wt_max = 32767 if kind == "int16" else 127
    s_state = float(10 ** rng.uniform(-3.5, -2.5)) if kind == "int16" else float(10 ** rng.uniform(-1.2, -0.2))
    zp_state = 0 if kind == "int16" else int(rng.integers(-60, 61))
    q = {"in": (float(10 ** rng.uniform(-2, 0)), int(rng.integers(-128, 128))),
         "wf": float(10 ** rng.uniform(-3, -2)), "wt": float(10 ** rng.uniform(-3.5, -2)),
         "state": (s_state, zp_state),
         "out": (float(10 ** rng.uniform(-2, -0.5)), int(rng.choice([-128, int(rng.integers(-100, 100))])))}
    bias_scale = float(np.float32(s_state) * np.float32(q["wt"]))
    bias = np.round(rng.uniform(-0.5, 0.5, units) / bias_scale).astype(np.int32)
    return SvdfCase(kind, batch, rank, act, rng.integers(-127, 128, (filters, n_in)).astype(np.int8),
                    rng.integers(-wt_max, wt_max + 1, (filters, memory)).astype(wt_dt), bias, q)


def _compare_svdf_cases(cases: list[SvdfCase], invocations: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs, feeds = [], []
    for case in cases:
        xs = case.inputs(rng, invocations)
        feeds.append(xs)
        jobs.append((case.model(invocations), xs))
    for k, (case, xs, res) in enumerate(zip(cases, feeds, run_batch(jobs))):
        state = case.initial()
        for j, x in enumerate(xs):
            y, state = case.reference(x, state)
            np.testing.assert_array_equal(y, res.outputs[j], err_msg=f"case {k} ({case.kind}, rank {case.rank}, "
                                          f"{case.activation}), invocation {j}")


@pytest.mark.parametrize("kind", ["float32", "int16", "int8"])
def test_svdf_random_single_op(kind):
    rng = np.random.default_rng({"float32": 71, "int16": 72, "int8": 73}[kind])
    _compare_svdf_cases([random_svdf_case(rng, kind) for _ in range(20)], invocations=1, seed=6)


@pytest.mark.parametrize("kind", ["float32", "int16", "int8"])
def test_svdf_state_persists_between_invocations(kind):
    """More invocations than memory slots: the whole history shifts through the state."""
    rng = np.random.default_rng({"float32": 81, "int16": 82, "int8": 83}[kind])
    _compare_svdf_cases([random_svdf_case(rng, kind) for _ in range(6)], invocations=6, seed=7)


def test_svdf_int8_ignores_fused_activation():
    """TFLM's integer SVDF never applies RELU: with an output zero point above -128 negative
    sums stay negative, in TFLM and in the reference."""
    rng = np.random.default_rng(91)
    case = random_svdf_case(rng, "int16")
    case.activation, case.q["out"] = "relu", (case.q["out"][0], 0)
    case.bias = np.full_like(case.bias, -int(0.4 / case.bias_scale()))
    x = case.inputs(rng)
    y, _ = case.reference(x[0], case.initial())
    np.testing.assert_array_equal(run_batch([(case.model(), x)])[0].outputs[0], y)
    assert (y < 0).any()


def test_svdf_params_refusals():
    with pytest.raises(UnsupportedError):
        S.svdf_params(0.1, 0, 0.01, 0.01, 0.001, 0, None, 0.1, 0)
    with pytest.raises(UnsupportedError):
        S.svdf_params(0.1, 0, 0.01, 0.01, 0.001, 0, 1.0, 0.1, 0)
    with pytest.raises(UnsupportedError):
        S.svdf_params(0.1, 0, 0.01, 0.01, 0.001, 0, 1e-5, 0.1, 0, state_dtype="int32")
    with pytest.raises(ShapeError):
        S.svdf_float(np.zeros((1, 4), np.float32), np.zeros((6, 4), np.float32), np.zeros((6, 2), np.float32),
                     None, np.zeros((1, 12), np.float32), rank=4)
