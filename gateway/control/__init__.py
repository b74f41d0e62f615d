"""The control API on the Unix socket: protocol, server, client and schedule routes.

Import the modules themselves (``gateway.control.client`` for the CLI): this package
re-exports nothing, so the CLI never pays for the server's imports.
"""

__all__: list[str] = []
