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


class ClosedError(StateError):
    """The object was closed (``close()`` or the end of its ``with`` block), or the object it
    depends on was (a session of a closed model)."""


class BusyError(StateError):
    """The session is in the middle of another call: from a second thread, or from a callback
    of the running call. A session serves one call at a time."""


# The error class of each failing ds4rt_status, by its C name (_core maps the header's values).
BY_STATUS_NAME = {
    cls.status: cls
    for cls in (
        InvalidArgumentError,
        FileIOError,
        FormatError,
        UnsupportedError,
        OutOfMemoryError,
        OutOfRangeError,
        NotFoundError,
        MismatchError,
        StateError,
        BackendError,
        InternalError,
    )
}
