"""CLI command `aot validate`: a data set through the validation firmware on a board (serial port)
or in QEMU, compared with the host build sample by sample."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from aot.cli.common import add_compile_options, compile_kwargs, load_model
from aot.errors import Error


def cmd_validate(a: argparse.Namespace) -> int:
    from aot.validate.firmware import build_prepared, compile_for_validation, prepare_firmware
    from aot.validate.run import (Progress, Report, estimate_first_sample, host_runner, load_labels, load_samples,
                                  tflm_runner, validate, write_html, write_json)
    from aot.validate.target import Target

    if (a.port is None) == (not a.qemu):
        raise Error("aot validate needs --port DEVICE (a board running `aot project --validate` firmware) or --qemu")
    jobs = a.jobs if a.jobs is not None else (os.cpu_count() or 1)
    if jobs < 1:
        raise Error(f"--jobs must be at least 1, got {jobs}")
    if a.port is not None and a.jobs is not None and a.jobs > 1:
        raise Error(f"--jobs {a.jobs} needs --qemu: a board on a serial port is one board (drop --jobs)")
    model = load_model(a.model, getattr(a, "input_shape", None))
    kw = compile_kwargs(a)
    # the model is compiled once (the firmware's project is written from the same compilation), and
    # the data is checked against it before anything is built or connects
    if a.qemu and a.firmware is None:
        vb = prepare_firmware(model, a.board, a.backend, a.baud, **kw)
    else:
        vb = compile_for_validation(model, a.board, a.backend, a.baud, **kw)
    samples = load_samples(a.data, vb.hello["inputs"])
    n = samples[0].shape[0]
    if a.limit is not None:
        samples = [s[:a.limit] for s in samples]
        n = samples[0].shape[0]
    labels = load_labels(a.labels, n) if a.labels else None
    reference = None
    ref_name = a.reference
    if ref_name == "tflm":
        if not str(a.model).endswith(".tflite"):
            raise Error("--reference tflm needs a .tflite model")
        reference = tflm_runner(Path(a.model).read_bytes())
    elif ref_name.startswith("float:"):
        fpath = Path(ref_name[len("float:"):])
        if not fpath.is_file():
            raise Error(f"--reference {ref_name}: no such file (give float:MODEL_F32.tflite)")
        reference = tflm_runner(fpath.read_bytes(), dequantize_from=vb.hello["inputs"])
    elif ref_name != "host":
        raise Error(f"--reference {ref_name!r}: choose host, tflm or float:MODEL_F32.tflite")
    host = host_runner(vb.compiled)
    host([s[:1] for s in samples])  # the host build is compiled here, before the board is connected
    transport = "qemu" if a.qemu else f"{a.port} at {vb.hello['baud']} baud"
    report = Report(model=vb.hello["model"], board=vb.board.name, backend=a.backend, transport=transport,
                    samples=n, model_hash=vb.model_hash, reference=ref_name)
    progress = Progress(n)
    jobs = min(jobs, n) if a.qemu else 1
    targets: list[Target] = []
    try:
        firmware = a.firmware if a.firmware is not None else (build_prepared(vb) if a.qemu else None)
        for _ in range(jobs):  # one QEMU process per job, each serving many samples
            targets.append(Target(a.board, port=a.port, qemu=a.qemu, model=model, baud=a.baud, backend=a.backend,
                                  firmware=firmware, timeout=a.timeout, build=vb, **kw))
    except Error as e:
        report.error = " ".join(str(e).split())
    else:
        t = targets[0]
        print(f"validating {n} samples on {vb.board.name} ({transport}" + (f", {jobs} processes" if jobs > 1 else "")
              + f"): firmware of {t.info.get('model')} {str(t.info.get('hash'))[:16]}, {t.timer}",
              file=sys.stderr, flush=True)
        validate(targets, samples, host, report, labels, reference, progress)
    finally:
        for t in targets:
            t.close()
    if report.done and report.done < n:
        progress.close()
    if a.estimate_cycles and report.done and not report.interrupted:
        # after the samples (the validation result is already made): sample 0's inference priced by
        # the timing model, in QEMU on the emulated machine of the board's core
        print(f"estimating one inference of sample 0 on {vb.board.name} with the timing model", file=sys.stderr,
              flush=True)
        try:
            report.estimate = estimate_first_sample(model, a.board, samples, a.backend, **kw)
        except KeyboardInterrupt:
            report.estimate = {"label": "estimated", "error": "interrupted (Ctrl-C)"}
    for line in report.lines():
        print(line, file=sys.stderr if a.json is True else sys.stdout)
    if a.json:
        if a.json is True:
            import json
            print(json.dumps(report.to_dict(), indent=2))
        else:
            write_json(report, a.json)
    if a.html:
        write_html(report, a.html)
    if report.interrupted:
        return 130
    if report.error:
        raise Error(report.error)
    return 0 if report.bit_exact == report.done else 1


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    v = sub.add_parser("validate", help="run a data set on a board (serial port) or in QEMU through the validation "
                       "firmware: bit-exact with the host build, accuracy, cycles, stack")
    v.add_argument("model")
    v.add_argument("--board", required=True)
    v.add_argument("--port", metavar="DEVICE", help="the board's serial port (e.g. /dev/ttyACM0); needs pyserial")
    v.add_argument("--qemu", action="store_true", help="build the firmware and run it in one QEMU process")
    v.add_argument("--baud", type=int, help="the console's baud rate (default: the board's; the firmware must "
                   "be built with the same)")
    v.add_argument("--data", required=True, metavar="X.npy|X.npz|DIR",
                   help="samples along the first axis, in the model input's dtype (.npz: one array per input)")
    v.add_argument("--labels", metavar="Y.npy", help="class index per sample: top-1 accuracy on the device and host")
    v.add_argument("--reference", default="host", metavar="host|tflm|float:F.tflite",
                   help="top-1 agreement with TFLM or a float model (dequantized inputs) besides the host build")
    v.add_argument("--backend", choices=["c", "llvm"], default="c")
    v.add_argument("--firmware", metavar="ELF", help="(--qemu) run this validation firmware instead of building one")
    v.add_argument("--jobs", type=int, metavar="N", help="(--qemu) QEMU processes serving the samples side by side "
                   "(default: the number of cores)")
    v.add_argument("--limit", type=int, metavar="N", help="only the first N samples")
    v.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each answer (default 10)")
    v.add_argument("--estimate-cycles", action="store_true",
                   help="after the samples, estimate one inference of sample 0 on the board with the timing model "
                        "(as `aot cycles`: cycles and ms at the board's clock, beside the firmware's timer counts)")
    v.add_argument("--json", nargs="?", const=True, metavar="OUT", help="print the report as JSON (or write it to OUT)")
    v.add_argument("--html", metavar="OUT", help="write the report as a self-contained HTML page")
    add_compile_options(v)
    v.set_defaults(fn=cmd_validate)
