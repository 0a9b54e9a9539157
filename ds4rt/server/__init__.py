"""An OpenAI-compatible HTTP server on ds4rt: many clients, one model, DSpark per request.

    pip install 'ds4rt[server]'
    ds4-server --dspark                 # or: ds4-cli serve ...   (docs/SERVER.md)

From Python (any ASGI server runs the app; ``ds4-server`` uses uvicorn)::

    import ds4rt
    from ds4rt.server import ServerConfig, ServerEngine, create_app

    model = ds4rt.Model.default()
    engine = ServerEngine(model, ds4rt.DSpark.default(model), ServerConfig(sessions=2))
    app = create_app(engine)

The extra's packages (starlette, uvicorn, pydantic, prometheus_client) are imported here, so
``import ds4rt`` itself never needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the real names; at run time they are imported on use
    from .app import create_app
    from .engine import ServerEngine
    from .options import ServerConfig

__all__ = ["ServerConfig", "ServerEngine", "create_app"]

_WHERE = {"create_app": ".app", "ServerEngine": ".engine", "ServerConfig": ".options"}


def __getattr__(name: str) -> Any:
    """Imports the server's parts on first use, so ``ds4-server --help`` and ``import ds4rt``
    work without the extra, and a missing package says which extra to install."""
    if name not in _WHERE:
        raise AttributeError(f"module 'ds4rt.server' has no attribute {name!r}")
    import importlib

    try:
        module = importlib.import_module(_WHERE[name], __name__)
    except ImportError as e:
        raise ImportError(
            f"the ds4rt server needs the 'server' extra ({e.name} is missing): "
            "pip install 'ds4rt[server]'",
            name=e.name,
        ) from e
    return getattr(module, name)
