"""The web control panel: ``/ui`` on the gateway's HTTP port (see docs/ui.md).

`gateway.ui.app` mounts it, `gateway.ui.auth` logs browsers in, `gateway.ui.pages`
holds one module per page (its docstring is the page API).
"""
