"""ARM build attributes of LLVM objects.

llvmlite cannot set LLVM's float-ABI target option, so objects for `eabihf` triples use the
base AAPCS by default and do not claim the VFP argument registers; GNU ld then refuses to
link them with hard-float C ("uses VFP register arguments, x.o does not"). The LLVM printer
therefore calls every float-taking C function with `arm_aapcs_vfpcc` (floats in s0..)
on hard-float targets (tested in QEMU against the C backend), and the exported entry points
take only pointers and sizes. The object then follows the hard-float ABI at every boundary,
and this module records it: Tag_ABI_VFP_args = 1 (VFP registers) in the File attributes.
"""
from __future__ import annotations

import struct

from aot.errors import ToolchainError

TAG_FILE = 1
TAG_ABI_VFP_ARGS = 28


def _uleb(data: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def _with_vfp_args(blob: bytes) -> bytes:
    if not blob or blob[0] != 0x41:  # 'A'
        raise ToolchainError("unexpected .ARM.attributes format in the LLVM object")
    (sub_len,) = struct.unpack_from("<I", blob, 1)
    vendor_end = blob.index(b"\0", 5) + 1
    if blob[5:vendor_end - 1] != b"aeabi" or 1 + sub_len != len(blob):
        raise ToolchainError("unexpected .ARM.attributes layout in the LLVM object")
    tag, j = _uleb(blob, vendor_end)
    (size,) = struct.unpack_from("<I", blob, j)
    if tag != TAG_FILE or vendor_end + size != len(blob):
        raise ToolchainError("unexpected .ARM.attributes sub-section in the LLVM object")
    extra = bytes([TAG_ABI_VFP_ARGS, 1])
    out = bytearray(blob + extra)
    struct.pack_into("<I", out, 1, sub_len + len(extra))
    struct.pack_into("<I", out, j, size + len(extra))
    return bytes(out)


def mark_hard_float(obj: bytes) -> bytes:
    """Return the ELF32 little-endian object with Tag_ABI_VFP_args = VFP registers."""
    if obj[:4] != b"\x7fELF" or obj[4] != 1 or obj[5] != 1:
        raise ToolchainError("expected a 32-bit little-endian ELF object from LLVM")
    e_shoff, = struct.unpack_from("<I", obj, 0x20)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", obj, 0x2E)
    data = bytearray(obj)

    def shdr(k: int) -> tuple[int, ...]:
        return struct.unpack_from("<IIIIIIIIII", data, e_shoff + k * e_shentsize)

    strtab = shdr(e_shstrndx)
    names = bytes(data[strtab[4]:strtab[4] + strtab[5]])
    for k in range(e_shnum):
        h = shdr(k)
        name = names[h[0]:names.index(b"\0", h[0])]
        if name != b".ARM.attributes":
            continue
        blob = bytes(data[h[4]:h[4] + h[5]])
        if b"\x1c\x01" in blob[blob.index(b"\0", 5) + 6:]:  # already there
            return obj
        new = _with_vfp_args(blob)
        offset = len(data)
        data += new
        struct.pack_into("<I", data, e_shoff + k * e_shentsize + 16, offset)  # sh_offset
        struct.pack_into("<I", data, e_shoff + k * e_shentsize + 20, len(new))  # sh_size
        return bytes(data)
    raise ToolchainError("the LLVM object has no .ARM.attributes section")
