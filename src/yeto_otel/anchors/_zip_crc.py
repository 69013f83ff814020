"""Setting the CRC-32 of zip records whose bytes were written after the archive was laid out.

`torch.save` under `skip_data` writes each storage's record with a CRC-32 of zero (it has not
seen the bytes). torch never checks it, but every other zip reader does (Python's zipfile
refuses the record), so the save writes the real value into the three places the format keeps
it: the local header, the data descriptor after the bytes, and the central directory.
"""

from __future__ import annotations

import os
import struct
import zipfile

__all__ = ["set_crcs"]

_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature ... name length, extra length
_CENTRAL_ENTRY = struct.Struct("<4s24xHHH8xI")  # ... name, extra, comment lengths, header offset
_DESCRIPTOR_SIGNATURE = b"PK\x07\x08"
_FLAG_DESCRIPTOR = 0x08


def _pwrite_crc(fd: int, crc: int, offset: int) -> None:
    if os.pwrite(fd, struct.pack("<I", crc), offset) != 4:
        raise OSError("short write of a zip CRC-32")


def set_crcs(fd: int, path: str, crcs: dict[int, int]) -> None:
    """Set the CRC-32 of each record whose bytes start at file offset `key` to its value."""
    if not crcs:
        return
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        central = archive.start_dir
    with open(path, "rb") as f:
        by_header = {}
        for info in infos:
            f.seek(info.header_offset)
            _, name_length, extra_length = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
            data = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
            if data in crcs:
                by_header[info.header_offset] = (info, data, crcs[data])
        for info, data, crc in by_header.values():
            _pwrite_crc(fd, crc, info.header_offset + 14)
            if info.flag_bits & _FLAG_DESCRIPTOR:
                f.seek(data + info.compress_size)
                descriptor = data + info.compress_size
                _pwrite_crc(fd, crc, descriptor + 4 if f.read(4) == _DESCRIPTOR_SIGNATURE
                            else descriptor)
        position = central
        for _ in infos:
            f.seek(position)
            signature, name, extra, comment, header = _CENTRAL_ENTRY.unpack(
                f.read(_CENTRAL_ENTRY.size))
            if signature != b"PK\x01\x02":
                raise OSError(f"unexpected zip central directory entry in {path}")
            if header in by_header:
                _pwrite_crc(fd, by_header[header][2], position + 16)
            position += _CENTRAL_ENTRY.size + name + extra + comment
