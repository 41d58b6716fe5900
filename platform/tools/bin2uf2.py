#!/usr/bin/env python3
"""Convert a flat binary to UF2 (the drag-and-drop format of the Raspberry Pi Pico's boot ROM).

    python3 bin2uf2.py firmware.bin 0x10000000 0xe48bff56 firmware.uf2

UF2 (https://github.com/microsoft/uf2): 512-byte blocks, each carrying 256 bytes of the image:
magic 0x0A324655, magic 0x9E5D5157, flags (0x2000: family ID present), target address,
payload size (256), block number, block count, family ID (RP2040: 0xE48BFF56), 476 data
bytes (256 used, zero padded), final magic 0x0AB16F30. Standard library only.
"""
from __future__ import annotations

import struct
import sys

MAGIC_START0 = 0x0A324655
MAGIC_START1 = 0x9E5D5157
MAGIC_END = 0x0AB16F30
FLAG_FAMILY_ID = 0x00002000
PAYLOAD = 256


def to_uf2(data: bytes, base: int, family: int) -> bytes:
    if len(data) % PAYLOAD:
        data += bytes(PAYLOAD - len(data) % PAYLOAD)
    count = len(data) // PAYLOAD
    blocks = []
    for i in range(count):
        chunk = data[i * PAYLOAD:(i + 1) * PAYLOAD]
        header = struct.pack("<8I", MAGIC_START0, MAGIC_START1, FLAG_FAMILY_ID, base + i * PAYLOAD,
                             PAYLOAD, i, count, family)
        blocks.append(header + chunk + bytes(476 - PAYLOAD) + struct.pack("<I", MAGIC_END))
    return b"".join(blocks)


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[1], "rb") as fh:
        data = fh.read()
    out = to_uf2(data, int(argv[2], 0), int(argv[3], 0))
    with open(argv[4], "wb") as fh:
        fh.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
