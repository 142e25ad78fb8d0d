"""Reader for the IDX format of MNIST and Fashion-MNIST (LeCun et al. 1998).

Layout (all integers big-endian)::

    byte 0-1   0x00 0x00
    byte 2     dtype code: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
               0x0D float32, 0x0E float64
    byte 3     number of dimensions d (>= 1)
    4*d bytes  the d sizes, uint32 each
    payload    prod(sizes) items, row-major (C order)

The file may be gzip-compressed; this is detected from the gzip magic bytes
(0x1f 0x8b), not from the file name.  The header and the payload size are
checked exactly, so a truncated, padded or corrupt file raises a one-line
:class:`~sims.data.errors.DataError` naming the file and the problem.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from .errors import DataError

__all__ = ["read_idx", "IDX_DTYPES"]

#: IDX dtype code -> numpy dtype (big-endian as stored in the file).
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_GZIP_MAGIC = b"\x1f\x8b"
_MAX_DIMS = 8  # MNIST-like files have 1 or 3; anything large is corruption


def _read_bytes(path: Path) -> tuple[bytes, bool]:
    """Whole file contents, gunzipped if it starts with the gzip magic."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: IDX file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read IDX file ({exc.strerror or exc})") from None
    if not raw.startswith(_GZIP_MAGIC):
        return raw, False
    try:
        return gzip.decompress(raw), True
    except (EOFError, OSError, zlib.error) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"{path}: corrupt or truncated gzip stream ({msg})") from None


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (raw or gzip) into a numpy array of native byte order.

    Raises :class:`DataError` if the file is missing, the magic number or
    dtype code is invalid, or the payload is not exactly ``prod(dims)`` items.
    """
    path = Path(path)
    data, gz = _read_bytes(path)
    what = "gzip IDX file" if gz else "IDX file"
    if len(data) < 4:
        raise DataError(f"{path}: {what} too short for an IDX header ({len(data)} bytes)")
    if data[0] != 0 or data[1] != 0:
        raise DataError(
            f"{path}: not an IDX file (magic starts with 0x{data[0]:02x} 0x{data[1]:02x}, expected 0x00 0x00)"
        )
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        raise DataError(f"{path}: unknown IDX dtype code 0x{code:02x} (expected one of 08 09 0B 0C 0D 0E)")
    if not 1 <= ndim <= _MAX_DIMS:
        raise DataError(f"{path}: implausible IDX dimension count {ndim} (expected 1..{_MAX_DIMS})")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{path}: {what} truncated inside the header ({len(data)} of {header} bytes)")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    actual = len(data) - header
    if actual != expected:
        kind = "truncated" if actual < expected else "has trailing bytes"
        raise DataError(
            f"{path}: {what} {kind}: dims {'x'.join(map(str, dims))} need {expected} payload bytes, found {actual}"
        )
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    # Native byte order and a writable array the caller owns.
    return arr.astype(dtype.newbyteorder("="), copy=True) if dtype.itemsize > 1 else arr.copy()
