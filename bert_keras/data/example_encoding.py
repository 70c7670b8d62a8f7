"""Serialized `tf.train.Example`s and TFRecord framing for many records at once, without TensorFlow.

The worker processes of `create_pretraining_data` write final TFRecord bytes with NumPy only
(`tf.train.Example.SerializeToString` costs tens of microseconds per record, and importing
TensorFlow costs seconds and hundreds of MB per process).

How: every field of every record gets fixed *slots* in one uint8 matrix [records, slots] with a
bool matrix saying which slots are used (a varint of a value below 2**14 uses 2 of its 3 slots,
say). Row-major order of the used slots is then the records one after the other, so a single
boolean selection turns the matrix into the output. Framing adds the TFRecord header slots in
front of each row and the data CRC slots at its end (`frame_records` frames records that are
already serialized the same way, from their bytes laid out as rows).

Wire format written (the same bytes as protobuf's own serializer):

    Example  = field 1 (Features), length-delimited
    Features = repeated field 1 (map entry: field 1 key string, field 2 Feature)
    Feature  = field 2 FloatList | field 3 Int64List; each list is field 1, packed

TFRecord framing of a record: uint64 length, uint32 masked CRC-32C of the length bytes, the
data, uint32 masked CRC-32C of the data (little-endian). The CRC of the data is computed by
`google-crc32c`'s C code when it is installed with it, and by a NumPy slicing-by-4 loop
otherwise.

Example:

>>> import numpy as np
>>> buffer, offsets = encode_examples({"ids": np.array([[1, 300], [2, 5]])})
>>> offsets.tolist()
[0, 18, 35]
>>> framed, framed_offsets = encode_framed_examples({"ids": np.array([[2, 5], [1, 300]])})
>>> framed_offsets.tolist()
[0, 33, 67]
"""

import numpy as np

try:  # C CRC-32C (SSE4.2 / ARMv8 instructions); the NumPy fallback is about 10x slower.
    import google_crc32c as _google_crc32c
    if getattr(_google_crc32c, "implementation", "c") != "c":
        _google_crc32c = None
except ImportError:  # pragma: no cover (depends on the installation)
    _google_crc32c = None


# ---------------------------------------------------------------------------------------------
# Varints.


def varint_size(values):
    """Bytes of the varint encoding of each non-negative int. int64 array of `values`' shape."""
    values = np.asarray(values)
    size = np.ones(values.shape, np.int64)
    top = int(values.max()) if values.size else 0
    for bits in range(7, 64, 7):
        if top < 1 << bits:
            break
        size += values >= (1 << bits)
    return size


def varint(value):
    """Varint bytes of one non-negative Python int."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_TABLE_LIMIT = 1 << 16
_TABLES = {}


def _varint_tables():
    """Varints of every value below 2**16 in 4 slots (the 4th never used), as uint32 words.

    Returns (bytes, used): uint32 [2**16] each, views of uint8 / bool [2**16, 4], so that one
    `np.take` of words gathers four slots.
    """
    if not _TABLES:
        data, used = _varint_columns(np.arange(_TABLE_LIMIT, dtype=np.uint32), 4)
        _TABLES["data"] = np.ascontiguousarray(data).view("<u4").reshape(-1)
        _TABLES["used"] = np.ascontiguousarray(used).view("<u4").reshape(-1)
        two = np.ascontiguousarray(data[:, :2]), np.ascontiguousarray(used[:, :2])
        _TABLES["data2"] = two[0].view("<u2").reshape(-1)
        _TABLES["used2"] = two[1].view("<u2").reshape(-1)
    return _TABLES


def _varint_columns(values, groups):
    """Varint bytes of a flat uint array in `groups` slots each: (uint8 [m, groups], used)."""
    size = varint_size(values)
    data = np.empty((len(values), groups), np.uint8)
    for j in range(groups):
        byte = (values >> (7 * j)) & 0x7F
        data[:, j] = byte | ((size > j + 1) << 7).astype(byte.dtype)
    return data, size[:, None] > np.arange(groups)


def _varint_slots(values):
    """Varints of non-negative ints [n, k] in k * g slots per row (g: at least the bytes of
    the largest).

    Returns (bytes uint8 [n, k * g], used bool [n, k * g] or None when all are used).
    """
    n, k = values.shape
    top = int(values.max()) if values.size else 0
    if top < 128:
        return values.astype(np.uint8), None
    flat = values.reshape(-1)
    if top < _TABLE_LIMIT:  # token ids and positions: two table lookups
        tables = _varint_tables()
        suffix, groups = ("2", 2) if top < 1 << 14 else ("", 4)
        data = np.take(tables["data" + suffix], flat).view(np.uint8)
        used = np.take(tables["used" + suffix], flat).view(bool)
    else:
        flat = flat.astype(np.uint64 if top >= 1 << 32 else np.uint32)
        groups = int(varint_size(np.array([top]))[0])
        data, used = _varint_columns(flat, groups)
    return data.reshape(n, k * groups), used.reshape(n, k * groups)


def _per_length_slots(lengths, make):
    """Row i gets the bytes `make(lengths[i])`, made once per distinct length: (bytes, used)."""
    distinct, inverse = np.unique(lengths, return_inverse=True)
    made = [make(int(length)) for length in distinct]
    width = max(len(m) for m in made)
    table = np.zeros((len(made), width), np.uint8)
    sizes = np.array([len(m) for m in made], np.int64)
    for i, m in enumerate(made):
        table[i, :len(m)] = np.frombuffer(m, np.uint8)
    inverse = inverse.reshape(-1)
    if len(made) == 1:
        return np.broadcast_to(table[0], (len(lengths), width)), None
    return table[inverse], np.arange(width)[None, :] < sizes[inverse][:, None]


def _feature_entry_prefix(name, float_list, payload_length):
    """Bytes of a Features map entry before its packed payload of `payload_length` bytes."""
    key = name.encode()
    packed = b"\x0a" + varint(payload_length)  # list field 1, packed
    list_length = len(packed) + payload_length
    feature = (b"\x12" if float_list else b"\x1a") + varint(list_length)
    feature_length = len(feature) + list_length
    entry = b"\x0a" + varint(len(key)) + key + b"\x12" + varint(feature_length)
    entry_length = len(entry) + feature_length
    return b"\x0a" + varint(entry_length) + entry + feature + packed


def _example_slots(features):
    """The slots of serialized examples: (list of (bytes [n, w], used [n, w] or None), n)."""
    arrays = {name: np.asarray(values) for name, values in features.items()}
    n = len(next(iter(arrays.values())))
    pieces = []
    body_lengths = np.zeros([n], np.int64)
    for name, values in arrays.items():
        values = values.reshape(n, -1)
        is_float = np.issubdtype(values.dtype, np.floating)
        if is_float:
            data = np.ascontiguousarray(values.astype("<f4")).view(np.uint8).reshape(n, -1)
            used = None
        else:
            if values.size and values.min() < 0:
                raise ValueError(f"{name}: negative values are not supported by this encoder")
            data, used = _varint_slots(values)
        payload = _used_per_row(data, used, n)
        prefix = _per_length_slots(payload, lambda p, name=name, is_float=is_float:
                                   _feature_entry_prefix(name, is_float, p))
        body_lengths += payload + _used_per_row(*prefix, n)
        pieces.extend([prefix, (data, used)])
    head = _per_length_slots(body_lengths, lambda length: b"\x0a" + varint(length))
    return [head] + pieces, n


def _used_per_row(data, used, n):
    return np.full([n], data.shape[1], np.int64) if used is None else used.sum(axis=1)


def _stack(pieces, n):
    """One (bytes [n, W], used [n, W]) from the pieces, side by side."""
    data = np.concatenate([np.broadcast_to(d, (n, d.shape[1])) for d, _ in pieces], axis=1)
    used = np.concatenate([np.ones(d.shape, bool) if u is None else u for d, u in pieces],
                          axis=1)
    return data, used


def _select(data, used):
    """The used slots in row-major order: (bytes, offsets int64 [n + 1])."""
    offsets = np.zeros([len(data) + 1], np.int64)
    np.cumsum(used.sum(axis=1), out=offsets[1:])
    return data[used].tobytes(), offsets


def encode_examples(features):
    """Serialized `tf.train.Example`s of many records.

    Args:
      features: {name: array [n, k]}: integer arrays (non-negative) become Int64Lists, float
        arrays FloatLists. Features are written in the given order.

    Returns:
      (buffer: bytes, offsets: int64 [n + 1]); record i is buffer[offsets[i]:offsets[i + 1]].
    """
    pieces, n = _example_slots(features)
    return _select(*_stack(pieces, n))


def encode_framed_examples(features):
    """`encode_examples`, framed as TFRecords.

    Returns:
      (framed bytes, offsets int64 [n + 1]): a valid TFRecord file, and each framed record's
      place in it (any concatenation of framed records is a valid TFRecord file too).
    """
    pieces, n = _example_slots(features)
    return _select_framed(*_stack(pieces, n))


def _select_framed(data, used, use_c=True):
    """TFRecords of the rows of a slot matrix: header slots in front of each row's used slots,
    CRC slots after them, then one selection. Returns (framed bytes, offsets int64 [n + 1])."""
    n = len(data)
    lengths = used.sum(axis=1)
    length_bytes = lengths.astype("<u8").view(np.uint8).reshape(n, 8)
    length_crc = masked_crc32c(crc32c_rows(length_bytes, np.full([n], 8)))
    framed = np.concatenate([length_bytes, length_crc.astype("<u4").view(np.uint8).reshape(n, 4),
                             data, np.zeros([n, 4], np.uint8)], axis=1)
    framed_used = np.concatenate([np.ones([n, 12], bool), used, np.ones([n, 4], bool)], axis=1)
    offsets = np.zeros([n + 1], np.int64)
    np.cumsum(lengths + 16, out=offsets[1:])
    out = framed[framed_used]
    # The data CRCs (four zero slots so far) from the records in place.
    data_starts = offsets[:-1] + 12
    crc = masked_crc32c(_record_crcs(out, data_starts, data_starts + lengths, use_c))
    out[(offsets[1:] - 4)[:, None] + np.arange(4)] = (
        crc.astype("<u4").view(np.uint8).reshape(n, 4))
    return out.tobytes(), offsets


# ---------------------------------------------------------------------------------------------
# CRC-32C and TFRecord framing.


def _crc32c_tables():
    """Slicing-by-4 tables of CRC-32C (reflected polynomial 0x82F63B78)."""
    tables = np.zeros([4, 256], np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        tables[0, byte] = crc
    for k in range(1, 4):
        tables[k] = (tables[k - 1] >> 8) ^ tables[0][tables[k - 1] & 0xFF]
    return tables


_CRC32C_TABLES = _crc32c_tables()


def crc32c_rows(data, lengths):
    """CRC-32C (Castagnoli) of many byte strings at once, four bytes per step, with NumPy.

    Args:
      data: uint8 [n, width], row i's bytes first, anything after `lengths[i]`.
      lengths: int [n].

    Returns:
      uint32 [n].
    """
    t0, t1, t2, t3 = _CRC32C_TABLES
    lengths = np.asarray(lengths, np.int64)
    n = len(lengths)
    if n == 0:
        return np.zeros([0], np.uint32)
    # Longest first, so that the rows still running at any step are a prefix.
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    width = -(-int(data.shape[1]) // 4) * 4
    padded = np.zeros((n, width), np.uint8)
    padded[:, :data.shape[1]] = data[order]
    words = np.ascontiguousarray(padded.view("<u4").T)  # [steps, n]: each step is contiguous
    crc = np.full([n], 0xFFFFFFFF, np.uint32)
    full_words = sorted_lengths // 4
    active = n
    low = np.empty([n], np.uint32)
    for step in range(int(full_words[0])):
        while full_words[active - 1] <= step:
            active -= 1
        x = crc[:active]
        np.bitwise_xor(x, words[step, :active], out=x)
        b = low[:active]
        np.bitwise_and(x, 0xFF, out=b)
        out = t3[b]
        np.right_shift(x, 8, out=b)
        np.bitwise_and(b, 0xFF, out=b)
        out ^= t2[b]
        np.right_shift(x, 16, out=b)
        np.bitwise_and(b, 0xFF, out=b)
        out ^= t1[b]
        np.right_shift(x, 24, out=b)
        out ^= t0[b]
        crc[:active] = out
    rows = np.arange(n)
    for extra in range(3):
        tail = sorted_lengths % 4 > extra
        if not tail.any():
            break
        byte = padded[rows[tail], full_words[tail] * 4 + extra]
        part = crc[tail]
        crc[tail] = t0[(part ^ byte) & 0xFF] ^ (part >> 8)
    out = np.empty_like(crc)
    out[order] = crc ^ np.uint32(0xFFFFFFFF)
    return out


def _record_crcs(data, starts, ends, use_c=True):
    """CRC-32C of each record `data[starts[i]:ends[i]]` (data: uint8 array), uint32 [n]."""
    if use_c and _google_crc32c is not None:
        value = _google_crc32c.value
        whole = data.tobytes()
        return np.array([value(whole[a:b]) for a, b in zip(starts.tolist(), ends.tolist())],
                        np.uint32)
    if len(starts) == 0:
        return np.zeros([0], np.uint32)
    lengths = ends - starts
    width = int(lengths.max())
    rows = np.zeros((len(starts), width), np.uint8)
    used = np.arange(width)[None, :] < lengths[:, None]
    rows[used] = data[(starts[:, None] + np.arange(width)[None, :])[used]]
    return crc32c_rows(rows, lengths)


def masked_crc32c(crc):
    """The TFRecord masking of a CRC: rotate right by 15 bits, add 0xa282ead8."""
    crc = np.asarray(crc, np.uint32).astype(np.uint64)
    rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return ((rotated + np.uint64(0xA282EAD8)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def frame_records(buffer, offsets, use_c=True):
    """TFRecord framing of records `buffer[offsets[i]:offsets[i + 1]]`.

    Args:
      use_c: False forces the NumPy CRC (for tests of it).

    Returns:
      (framed bytes, framed offsets int64 [n + 1]): concatenating any of the framed records
      in any order gives a valid TFRecord file.
    """
    offsets = np.asarray(offsets, np.int64)
    if len(offsets) < 2:
        return b"", np.zeros([1], np.int64)
    # The records as left-aligned rows of a slot matrix.
    lengths = np.diff(offsets)
    width = int(lengths.max())
    used = np.arange(width)[None, :] < lengths[:, None]
    rows = np.zeros(used.shape, np.uint8)
    rows[used] = np.frombuffer(buffer, np.uint8)[offsets[0]:offsets[-1]]
    return _select_framed(rows, used, use_c)
