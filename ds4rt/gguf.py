"""Reading GGUF files through ds4rt's C reader (see docs/GGUF.md).

``inspect(path)`` returns everything in a file's header as plain Python data; ``GGUFFile`` keeps
the file open (mapped) and gives tensors' raw bytes as numpy views without copying.

Both validate the whole header on open and raise a ``ds4rt.errors`` exception naming what is
wrong and where: ``FormatError`` for a malformed file, ``UnsupportedError`` for GGUF v1, v4+,
big-endian files and unknown tensor type ids, ``FileIOError`` when the file cannot be opened.

Strings (keys, values, tensor names) are decoded as UTF-8 with ``surrogateescape``: invalid
bytes survive as lone surrogates instead of being replaced.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import _core

__all__ = ["GGUFFile", "inspect", "tensor_type_name", "value_type_name"]


def value_type_name(type_id: int) -> str | None:
    """Name of a GGUF metadata value type id ("UINT32", "STRING", ...), or None."""
    return _core.gguf_value_type_name(type_id)


def tensor_type_name(type_id: int) -> str | None:
    """ggml name of a tensor type id ("Q8_0"), or None if ds4rt does not know it."""
    return _core.gguf_tensor_type_name(type_id)


class GGUFFile:
    """An open, validated GGUF file.

    ``metadata`` ({key: value}, file order; arrays as lists), ``metadata_types`` ({key: type
    label}), ``tensors`` (list of dicts: name, type, type_id, shape, offset, nbytes) are read once
    and cached. ``tensor_data(name)`` is a read-only numpy uint8 view of the tensor's bytes in the
    mapping; views stay valid after ``close()`` (the mapping is released with the last view).

    Use as a context manager, or call ``close()``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, data: bytes | None = None):
        if (path is None) == (data is None):
            raise TypeError("GGUFFile needs exactly one of path or data")
        self._h = _core.gguf_open(path) if data is None else _core.gguf_open_bytes(data)
        self.path = self._h.path
        self._metadata: dict[str, Any] | None = None
        self._tensors: list[dict[str, Any]] | None = None

    # --- lifetime ---

    def close(self) -> None:
        self._h.close()

    @property
    def closed(self) -> bool:
        return self._h.is_closed

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._h.tensor_count} tensors"
        return f"<GGUFFile {self.path!r} ({state})>"

    # --- header ---

    @property
    def version(self) -> int:
        return self._h.version

    @property
    def alignment(self) -> int:
        return self._h.alignment

    @property
    def data_offset(self) -> int:
        """Byte offset of the data section; tensor offsets are relative to it."""
        return self._h.data_offset

    @property
    def file_size(self) -> int:
        return self._h.file_size

    # --- metadata ---

    @property
    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            self._metadata = self._h.metadata()
        return self._metadata

    @property
    def metadata_types(self) -> dict[str, str]:
        return self._h.metadata_types()

    def metadata_truncated(self, max_array: int) -> tuple[dict[str, Any], dict[str, int]]:
        """Metadata with arrays longer than max_array cut to their first max_array elements,
        and {key: full length} of the cut ones."""
        doc: tuple[dict[str, Any], dict[str, int]] = self._h.metadata(max_array)
        return doc

    def kv_record(self, key: str) -> dict[str, Any]:
        """Where a key's record lies in the file (type, file_offset, value_offset, ...)."""
        return self._h.kv_record(key)

    def __contains__(self, key: str) -> bool:
        return key in self.metadata

    def __getitem__(self, key: str) -> Any:
        return self._h.get(key)

    # Typed getters with the C library's leniency (see ds4rt.h): get_u32 takes any integer
    # type whose value fits, get_f32 any number, get_bool only BOOL, get_str only STRING.
    def get_u32(self, key: str) -> int:
        return self._h.get_u32(key)

    def get_u64(self, key: str) -> int:
        return self._h.get_u64(key)

    def get_f32(self, key: str) -> float:
        return self._h.get_f32(key)

    def get_bool(self, key: str) -> bool:
        return self._h.get_bool(key)

    def get_str(self, key: str) -> str:
        return self._h.get_str(key)

    # --- tensors ---

    @property
    def tensors(self) -> list[dict[str, Any]]:
        if self._tensors is None:
            self._tensors = self._h.tensors()
        return self._tensors

    def tensor(self, name: str) -> dict[str, Any]:
        """One tensor's info dict (NotFoundError if absent)."""
        return self._h.tensor(name)

    def tensor_data(self, name: str | int) -> np.ndarray:
        """Raw bytes of a tensor (by name or index) as a read-only uint8 view of the file."""
        return self._h.tensor_data(name)


def inspect(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything in a GGUF file's header as plain data.

    Keys: path, version, alignment, data_offset, file_size, metadata ({key: value}, arrays as
    lists, nested arrays as nested lists), metadata_types ({key: type label}), tensors (list of
    {name, type, type_id, shape, offset, nbytes}, file order; shape in ne order).
    """
    with GGUFFile(path) as f:
        return {
            "path": os.fspath(path),
            "version": f.version,
            "alignment": f.alignment,
            "data_offset": f.data_offset,
            "file_size": f.file_size,
            "metadata": f.metadata,
            "metadata_types": f.metadata_types,
            "tensors": f.tensors,
        }
