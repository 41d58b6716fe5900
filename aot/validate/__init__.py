"""Validation on the target: a firmware that answers framed requests on the board's console UART
(`aot project --validate`), and the host that streams a data set through it (`aot validate`,
`aot.Target`). protocol.py: frames and commands; transport.py: serial port or QEMU socket;
firmware.py: the firmware's project and the model hash; target.py: aot.Target; run.py: the
comparison with the host build and the report."""
