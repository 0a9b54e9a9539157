"""Copy a GGUF file with edits, through gguf-py (not a test module).

Used to derive broken or mismatched model files from generated ones: drop or replace a key,
drop a tensor, change a tensor's shape, type or data. Keys keep their GGUF types unless an edit
gives a new (value, type) pair.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import quant_shape_to_byte_shape

KEEP = object()


def _field_value(field):
    types = field.types
    if types[0] == GGUFValueType.ARRAY:
        return field.contents(), GGUFValueType.ARRAY, types[-1]
    return field.contents(), types[0], None


def rewrite(
    src,
    dst,
    *,
    set_keys: dict | None = None,
    drop_keys: tuple[str, ...] = (),
    drop_tensors: tuple[str, ...] = (),
    tensor_edit: Callable[[str, np.ndarray, GGMLQuantizationType, tuple], tuple | None]
    | None = None,
    add_tensors: dict[str, np.ndarray] | None = None,
) -> None:
    """Writes `src` to `dst` with edits.

    set_keys: key -> (value, GGUFValueType[, array element type]); drop_keys/drop_tensors: names;
    tensor_edit(name, raw_bytes_or_array, type, ne) -> None (keep) or (data, type, ne);
    add_tensors: name -> float32 array, appended after the file's tensors.
    """
    set_keys = dict(set_keys or {})
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    if "general.architecture" in set_keys:
        arch = set_keys.pop("general.architecture")[0]
    w = GGUFWriter(dst, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture",) or name in drop_keys:
            continue
        if name in set_keys:
            continue
        val, vtype, sub = _field_value(field)
        w.add_key_value(name, val, vtype, sub_type=sub)
    for name, spec in set_keys.items():
        val, vtype, *sub = spec
        w.add_key_value(name, val, vtype, sub_type=sub[0] if sub else None)
    for t in r.tensors:
        if t.name in drop_tensors:
            continue
        ne = tuple(int(x) for x in t.shape)
        data, ttype = np.asarray(t.data), t.tensor_type
        if tensor_edit is not None:
            edit = tensor_edit(t.name, data, ttype, ne)
            if edit is not None:
                data, ttype, ne = edit
        data = np.ascontiguousarray(data)
        if ttype in (GGMLQuantizationType.F32, GGMLQuantizationType.I32):
            w.add_tensor(t.name, data.reshape(tuple(reversed(ne))), raw_dtype=ttype)
        else:
            shape = quant_shape_to_byte_shape(tuple(reversed(ne)), ttype)
            w.add_tensor(
                t.name, data.view(np.uint8).reshape(shape), raw_shape=shape, raw_dtype=ttype
            )
    for name, data in (add_tensors or {}).items():
        w.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
