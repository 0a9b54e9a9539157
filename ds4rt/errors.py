"""Exceptions raised by ds4rt.

Every failing C call maps to one of these, chosen by its ``ds4rt_status``; the message is the
library's own (it names the key, tensor, byte offset or argument at fault).
"""


class Ds4rtError(RuntimeError):
    """Base class of every ds4rt error. ``status`` is the C status name."""

    status = "DS4RT_ERR_INTERNAL"


class InvalidArgumentError(Ds4rtError, ValueError):
    status = "DS4RT_ERR_INVALID_ARGUMENT"


class FileIOError(Ds4rtError, OSError):
    status = "DS4RT_ERR_IO"


class FormatError(Ds4rtError, ValueError):
    """A malformed, truncated or hostile file."""

    status = "DS4RT_ERR_FORMAT"


class UnsupportedError(Ds4rtError):
    status = "DS4RT_ERR_UNSUPPORTED"


class OutOfMemoryError(Ds4rtError, MemoryError):
    status = "DS4RT_ERR_OUT_OF_MEMORY"


class OutOfRangeError(Ds4rtError, IndexError):
    """A token id, index, position or context length out of range."""

    status = "DS4RT_ERR_OUT_OF_RANGE"


class NotFoundError(Ds4rtError, KeyError):
    status = "DS4RT_ERR_NOT_FOUND"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MismatchError(Ds4rtError, ValueError):
    """Two inputs that must agree do not (for example a support model and its target)."""

    status = "DS4RT_ERR_MISMATCH"


class StateError(Ds4rtError):
    status = "DS4RT_ERR_STATE"


class BackendError(Ds4rtError):
    """The compute backend failed, lacks a required op, or is not compiled in."""

    status = "DS4RT_ERR_BACKEND"


class InternalError(Ds4rtError):
    status = "DS4RT_ERR_INTERNAL"


# Indexed by the numeric ds4rt_status value.
BY_STATUS = {
    1: InvalidArgumentError,
    2: FileIOError,
    3: FormatError,
    4: UnsupportedError,
    5: OutOfMemoryError,
    6: OutOfRangeError,
    7: NotFoundError,
    8: MismatchError,
    9: StateError,
    10: BackendError,
    11: InternalError,
}
