"""TFLM's Signal library (the audio front end, tflite-micro ``signal/src``) in numpy, bit-exact.

Each function follows the C source's integer arithmetic: uint32 values wrap modulo 2^32,
int16 stores wrap modulo 2^16 (kiss_fft's `kiss_fft_scalar` stores), shifts of unsigned
values are logical. The real FFTs (kiss_fft) are in aot.quant.signal_fft.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U32 = 0xFFFFFFFF
LOG_LUT = (
    0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797, 2944, 3087, 3224,
    3358, 3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549, 4633, 4714, 4791, 4864, 4934, 5001,
    5063, 5123, 5178, 5231, 5280, 5326, 5368, 5408, 5444, 5477, 5507, 5533, 5557, 5578, 5595, 5610, 5622, 5631,
    5637, 5640, 5641, 5638, 5633, 5626, 5615, 5602, 5586, 5568, 5547, 5524, 5498, 5470, 5439, 5406, 5370, 5332,
    5291, 5249, 5203, 5156, 5106, 5054, 5000, 4944, 4885, 4825, 4762, 4697, 4630, 4561, 4490, 4416, 4341, 4264,
    4184, 4103, 4020, 3935, 3848, 3759, 3668, 3575, 3481, 3384, 3286, 3186, 3084, 2981, 2875, 2768, 2659, 2549,
    2437, 2323, 2207, 2090, 1971, 1851, 1729, 1605, 1480, 1353, 1224, 1094, 963, 830, 695, 559, 421, 282, 142, 0,
    0)
LOG_SCALE_LOG2 = 16
LOG_SEGMENTS_LOG2 = 7
LOG_COEFF = 45426
PCAN_SNR_BITS = 12
PCAN_OUTPUT_BITS = 6


def wrap16(v: np.ndarray) -> np.ndarray:
    return ((np.asarray(v, np.int64) + 32768) & 0xFFFF) - 32768


def msb32(x: int) -> int:
    """MostSignificantBit32 (the GNUC build): 32 - clz(x); 32 for 0."""
    return 32 if x == 0 else int(x).bit_length()


# ------------------------------------------------------------------ window, auto scale, energy

def window(x: np.ndarray, w: np.ndarray, shift: int) -> np.ndarray:
    """ApplyWindow over each row of len(w): (x * w) >> shift saturated to int16."""
    n = w.size
    xv = x.astype(np.int64).reshape(-1, n)
    raw = (xv * w.astype(np.int64)[None, :]) >> shift
    return np.clip(raw, -32768, 32767).astype(np.int16).reshape(x.shape)


def fft_auto_scale_bits(x: np.ndarray) -> int:
    """FftAutoScale's scale: 16 - MSB32(max |x|) - 1, at least 0 (MaxAbs16 as int16: |-32768| wraps)."""
    v = x.astype(np.int64).reshape(-1)
    mx = 0
    for val in v:  # MaxAbs16: value > max, else -value > max (int16 arithmetic, -(-32768) wraps)
        if val > mx:
            mx = int(val)
        elif int(wrap16(-val)) > mx:
            mx = int(wrap16(-val))
    return max(16 - msb32(mx & U32) - 1, 0)


def fft_auto_scale(x: np.ndarray) -> tuple[np.ndarray, int]:
    bits = fft_auto_scale_bits(x)
    return wrap16(x.astype(np.int64) * (1 << bits)).astype(np.int16), bits


def energy(x: np.ndarray, start: int, end: int, n_out: int) -> np.ndarray:
    """SpectrumToEnergy: re^2 + im^2 of complex bins [start, end) (as uint32); others 0 (TFLM leaves
    them unwritten)."""
    c = x.astype(np.int64).reshape(-1, 2)
    out = np.zeros(n_out, np.uint32)
    seg = c[start:end]
    out[start:end] = ((seg[:, 0] * seg[:, 0] + seg[:, 1] * seg[:, 1]) & U32).astype(np.uint32)
    return out


# ------------------------------------------------------------------ filter bank and friends

def filter_bank(x: np.ndarray, weights: np.ndarray, unweights: np.ndarray, freq_starts: np.ndarray,
                weight_starts: np.ndarray, widths: np.ndarray, num_channels: int) -> np.ndarray:
    """FilterbankAccumulateChannels; channel 0 of its num_channels + 1 is scratch, dropped (uint64)."""
    xv = [int(v) for v in x.astype(np.uint64).reshape(-1)]
    out = []
    acc, unacc = 0, 0
    m64 = (1 << 64) - 1
    for i in range(num_channels + 1):
        fs, ws = int(freq_starts[i]), int(weight_starts[i])
        for j in range(int(widths[i])):
            acc = (acc + int(weights[ws + j]) * xv[fs + j]) & m64
            unacc = (unacc + int(unweights[ws + j]) * xv[fs + j]) & m64
        out.append(acc)
        acc, unacc = unacc, 0
    return np.array(out[1:], dtype=np.uint64)


def _digit_sqrt(num: int, width: int) -> int:
    """TFLM's Sqrt32 / Sqrt64 (signal/src/square_root.cc): the digit-by-digit square root of a nonzero
    `width`-bit value, rounded up once, saturated to width/2 bits."""
    top = (1 << (width // 2)) - 1
    res = 0
    max_bit = (width - num.bit_length()) | 1  # MostSignificantBit of a nonzero value: its bit length
    bit = 1 << (width - 1 - max_bit)
    for _ in range((width - 1 - max_bit) // 2 + 1):
        if num >= res + bit:
            num -= res + bit
            res = (res >> 1) + bit
        else:
            res >>= 1
        bit >>= 2
    if num > res and res != top:
        res += 1
    return res & top


def sqrt32(num: int) -> int:
    return 0 if num == 0 else _digit_sqrt(num, 32)


def sqrt64(num: int) -> int:
    return sqrt32(num) if (num >> 32) == 0 else _digit_sqrt(num, 64)


def filter_bank_sqrt(x: np.ndarray, scale_bits: int) -> np.ndarray:
    return np.array([(sqrt64(int(v)) >> int(scale_bits)) & U32 for v in x.astype(np.uint64).reshape(-1)],
                    dtype=np.uint32).reshape(x.shape)


@dataclass(frozen=True)
class SpectralSubtraction:
    """FilterBankSpectralSubtraction's configuration (its flexbuffer options)."""
    smoothing: int
    one_minus_smoothing: int
    alternate_smoothing: int
    alternate_one_minus_smoothing: int
    smoothing_bits: int
    min_signal_remaining: int
    spectral_subtraction_bits: int
    clamping: bool


def spectral_subtraction(x: np.ndarray, noise: np.ndarray, p: SpectralSubtraction) -> tuple[np.ndarray, np.ndarray]:
    """FilterbankSpectralSubtraction: (output, new noise estimate), both uint32."""
    xs = [int(v) for v in x.astype(np.uint32).reshape(-1)]
    ns = [int(v) for v in noise.astype(np.uint32).reshape(-1)]
    out, new = [], []
    for i, v in enumerate(xs):
        sm, oms = (p.smoothing, p.one_minus_smoothing) if i % 2 == 0 else \
            (p.alternate_smoothing, p.alternate_one_minus_smoothing)
        up = (v << p.smoothing_bits) & U32
        n = ((up * sm + ns[i] * oms) >> p.spectral_subtraction_bits) & U32
        est = n
        if est > up:
            est = up
            if p.clamping:
                n = est
        floor = ((v * p.min_signal_remaining) >> p.spectral_subtraction_bits) & U32
        sub = (up - est) >> p.smoothing_bits
        out.append(sub if sub > floor else floor)
        new.append(n)
    return np.array(out, np.uint32).reshape(x.shape), np.array(new, np.uint32).reshape(x.shape)


def _wide_dynamic(x: int, lut: np.ndarray) -> int:
    if x <= 2:
        return int(lut[x])
    interval = msb32(x)
    base = 4 * interval - 6
    frac = ((x << (11 - interval)) if interval < 11 else (x >> (interval - 11))) & 0x3FF
    result = (int(lut[base + 2]) * frac) >> 5
    result = _s32(result + _s32(((int(lut[base + 1]) & U32) << 5) & U32))  # (int32)((uint32)lut[1] << 5)
    result = _s32(result * frac)
    result = (result + (1 << 14)) >> 15
    result += int(lut[base])
    return int(wrap16(result))


def _s32(v: int) -> int:
    return ((v + (1 << 31)) & U32) - (1 << 31)


def _pcan_shrink(x: int) -> int:
    if x < (2 << PCAN_SNR_BITS):
        return ((x * x) & U32) >> (2 + 2 * PCAN_SNR_BITS - PCAN_OUTPUT_BITS)
    return ((x >> (PCAN_SNR_BITS - PCAN_OUTPUT_BITS)) - (1 << PCAN_OUTPUT_BITS)) & U32


def pcan(x: np.ndarray, noise: np.ndarray, lut: np.ndarray, snr_shift: int) -> np.ndarray:
    """ApplyPcanAutoGainControlFixed (uint32 in, uint32 out)."""
    out = []
    for v, n in zip(x.astype(np.uint32).reshape(-1), noise.astype(np.uint32).reshape(-1)):
        gain = _wide_dynamic(int(n), lut) & U32  # int16 -> uint32 (sign-extended)
        snr = ((int(v) * gain) >> snr_shift) & U32
        out.append(_pcan_shrink(snr))
    return np.array(out, np.uint32).reshape(x.shape)


def log32(x: int, out_scale: int) -> int:
    integer = msb32(x) - 1
    frac = _s32(x - (1 << integer))
    if integer < LOG_SCALE_LOG2:
        frac = _s32(frac << (LOG_SCALE_LOG2 - integer))
    else:
        frac >>= integer - LOG_SCALE_LOG2
    base_seg = (frac & U32) >> (LOG_SCALE_LOG2 - LOG_SEGMENTS_LOG2)
    seg_unit = (1 << LOG_SCALE_LOG2) >> LOG_SEGMENTS_LOG2
    c0, c1 = LOG_LUT[base_seg], LOG_LUT[base_seg + 1]
    rel = _s32((c1 - c0) * _s32(frac - seg_unit * base_seg)) >> LOG_SCALE_LOG2
    fraction = (frac + c0 + rel) & U32
    log2 = ((integer << LOG_SCALE_LOG2) + fraction) & U32
    rnd = (1 << LOG_SCALE_LOG2) // 2
    loge = ((LOG_COEFF * log2 + rnd) >> LOG_SCALE_LOG2) & U32
    return ((((out_scale & U32) * loge) + rnd) & U32) >> LOG_SCALE_LOG2


def filter_bank_log(x: np.ndarray, output_scale: int, correction_bits: int) -> np.ndarray:
    out = []
    for v in x.astype(np.uint32).reshape(-1):
        scaled = (int(v) << correction_bits) & U32
        out.append(min(log32(scaled, output_scale), 32767) if scaled > 1 else 0)
    return np.array(out, np.int16).reshape(x.shape)


# ------------------------------------------------------------------ stateful buffers: DELAY, OVERLAP_ADD

def delay(x: np.ndarray, state: np.ndarray, delay_length: int) -> tuple[np.ndarray, np.ndarray]:
    """DELAY: per row of the last dimension, the signal `delay_length` samples late (the circular
    buffer of frame + delay samples); returns (output, new state [rows, delay_length])."""
    frame = x.shape[-1]
    rows = x.reshape(-1, frame)
    c = np.concatenate([state.reshape(rows.shape[0], delay_length), rows], axis=1)
    return c[:, :frame].reshape(x.shape).astype(x.dtype), c[:, frame:].astype(state.dtype)


def overlap_add(x: np.ndarray, state: np.ndarray, frame_step: int) -> tuple[np.ndarray, np.ndarray]:
    """OVERLAP_ADD of x [..., n_frames, frame_size] with the state [rows, frame_size]: per frame the
    buffer plus the frame (int16 saturating; float32 adds), its first frame_step samples out, the
    buffer shifted left by frame_step with zeros behind. Returns (output [..., n_frames * frame_step],
    new state)."""
    n_frames, size = x.shape[-2], x.shape[-1]
    frames = x.reshape(-1, n_frames, size)
    buf = state.reshape(frames.shape[0], size).copy()
    out = np.zeros((frames.shape[0], n_frames, frame_step), x.dtype)
    for f in range(n_frames):
        if x.dtype == np.int16:
            buf = np.clip(frames[:, f].astype(np.int32) + buf.astype(np.int32), -32768, 32767).astype(np.int16)
        else:
            buf = (buf + frames[:, f]).astype(np.float32)
        out[:, f] = buf[:, :frame_step]
        buf = np.concatenate([buf[:, frame_step:], np.zeros((buf.shape[0], frame_step), buf.dtype)], axis=1)
    return out.reshape(x.shape[:-2] + (n_frames * frame_step,)), buf


# ------------------------------------------------------------------ FRAMER, STACKER (circular buffers)
# Both keep the most recent `avail` samples of a circular buffer. As a pure function: a window W of
# the last samples (its length the most the buffer can hold before a write) and the count `avail`.

def framer_capacity(size: int, step: int) -> int:
    return (size + step - 1) // step * step


def framer(x: np.ndarray, window: np.ndarray, avail: int, size: int, step: int
           ) -> tuple[np.ndarray, bool, np.ndarray, int]:
    """FRAMER over x [..., n * step]: (frames [..., n, size] (zeros where TFLM writes nothing), valid,
    new window [rows, capacity - step], new avail)."""
    cap = framer_capacity(size, step)
    inner = x.shape[-1]
    n = inner // step
    rows = x.reshape(-1, inner)
    cat = np.concatenate([window.reshape(rows.shape[0], cap - step), rows], axis=1)
    out = np.zeros((rows.shape[0], n, size), np.int16)
    valid, av = True, int(avail)
    for f in range(n):
        av += step
        if av >= size:
            start = f * step + cap - av
            out[:, f] = cat[:, start:start + size]
            av -= step
        else:
            valid = False
    return out.reshape(x.shape[:-1] + (n, size)), valid, cat[:, inner:].astype(np.int16), av


def stacker(x: np.ndarray, window: np.ndarray, avail: int, channels: int, left: int, right: int, step: int
            ) -> tuple[np.ndarray, bool, np.ndarray, int]:
    """STACKER of one frame x [channels]: (stacked [channels * (left + right + 1)] (zeros when not
    valid), valid, new window [size - channels], new avail). avail -1: no frame seen since the
    reset (the first frame is replicated `left` more times)."""
    size = channels * (left + right + 1)
    w = window.reshape(-1).copy()
    av = int(avail)
    if av < 0:
        if left:
            w[w.size - channels * left:] = np.tile(x.reshape(-1), left)
        av = channels * left
    buf = np.concatenate([w, x.reshape(-1)])
    av += channels
    if av >= size:
        out, valid = buf.copy(), True
        av -= channels * step
    else:
        out, valid = np.zeros(size, np.int16), False
    return out.astype(np.int16), valid, buf[channels:].astype(np.int16), av
