"""`aot validate --jobs`: several boards (QEMU processes) serve the samples side by side; the report
is in sample order whichever board answered, and one board's failure stops the run with the samples
done kept. Fake boards: no QEMU, fast."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.validate.protocol import LinkError, RunReply  # noqa: E402
from aot.validate.run import Report, validate  # noqa: E402


def _host(batch: list[np.ndarray]) -> list[np.ndarray]:
    """The "host build": the sum of each sample's bytes, as one int32 output."""
    return [batch[0].reshape(batch[0].shape[0], -1).astype(np.int32).sum(axis=1).reshape(-1, 1)]


class FakeBoard:
    """Answers RUN requests like the host build, except on `wrong` samples; the count is the
    sample's first byte (so the report's order can be checked); fails after `fail_after` runs."""

    timer = "qemu-instructions"
    outputs = [{"name": "y", "shape": [1], "dtype": "int32", "bytes": 4}]

    def __init__(self, wrong: set[int], fail_after: int | None = None, delay: float = 0.0) -> None:
        self.wrong, self.fail_after, self.delay = wrong, fail_after, delay
        self.queue: list[tuple[int, bytes]] = []
        self.served: list[int] = []
        self.seq = 0

    def send(self, payload: bytes) -> int:
        self.seq += 1
        self.queue.append((self.seq, payload))
        return self.seq

    def receive(self, seq: int) -> RunReply:
        got, payload = self.queue.pop(0)
        assert got == seq
        if self.fail_after is not None and len(self.served) >= self.fail_after:
            raise LinkError("QEMU (fake) ended (killed by signal 9)")
        time.sleep(self.delay)
        x = np.frombuffer(payload, np.int8)
        index = int(x[0]) + 128  # the test's samples carry their index in the first byte
        self.served.append(index)
        y = int(x.astype(np.int32).sum()) + (1 if index in self.wrong else 0)
        return RunReply(0, 100 + index, index, np.int32(y).tobytes())

    def decode(self, raw: bytes) -> dict[str, np.ndarray]:
        return {"y": np.frombuffer(raw, np.int32).reshape(1).copy()}


def _samples(n: int) -> np.ndarray:
    x = np.random.default_rng(3).integers(-128, 128, (n, 1, 6), dtype=np.int8)
    x[:, 0, 0] = np.arange(n) - 128
    return x


def test_two_boards_share_the_samples_and_the_report_is_in_sample_order():
    x = _samples(200)
    boards = [FakeBoard({150, 7, 64}, delay=0.001), FakeBoard({150, 7, 64})]
    labels = np.asarray([i % 3 for i in range(200)])
    r = validate(boards, [x], _host, Report("m", "b", "c", "qemu", 200), labels=labels)
    assert r.complete and r.done == 200 and r.bit_exact == 197
    assert r.counts == list(range(200))  # each sample's count, in sample order
    assert [d["index"] for d in r.differing] == [7, 64, 150]
    assert all(b.served for b in boards) and sorted(boards[0].served + boards[1].served) == list(range(200))
    assert r.stack_bytes == 100 + max(max(b.served) for b in boards)
    assert r.accuracy_device is not None and r.accuracy_host is not None


def test_one_board_failing_stops_the_run_and_keeps_the_samples_done():
    x = _samples(200)
    boards = [FakeBoard(set(), fail_after=20), FakeBoard(set(), delay=0.002)]
    r = validate(boards, [x], _host, Report("m", "b", "c", "qemu", 200))
    assert r.error is not None and "killed by signal 9" in r.error and not r.complete
    assert 20 <= r.done < 200 and r.bit_exact == r.done and len(r.counts) == r.done
    assert r.counts == sorted(r.counts)


def test_a_fault_in_a_board_thread_is_raised_not_hidden():
    class Broken(FakeBoard):
        def decode(self, raw: bytes) -> dict[str, np.ndarray]:
            raise ValueError("a fault of this program")

    before = threading.active_count()
    with pytest.raises(ValueError, match="a fault of this program"):
        validate([Broken(set()), Broken(set())], [_samples(40)], _host, Report("m", "b", "c", "qemu", 40))
    time.sleep(0.1)
    assert threading.active_count() <= before
