"""The panel's pages: one module per entry of `gateway.ui.render.NAV`.

Page API (how to write a page):

- ``gateway/ui/pages/<slug>.py`` defines ``add_routes(ui: UiRoutes) -> None`` and
  registers its routes there, paths relative to ``/ui``:

  * ``ui.page("/<slug>", handler)``: a whole page (GET); without the login cookie the
    browser gets 401 and the "log in with ``familiar ui``" page;
  * ``ui.fragment(path, handler)``: an HTML fragment (GET); 401 without the cookie;
  * ``ui.stream(path, handler)``: Server-Sent Events; ``handler(request, stream)``
    calls ``await stream.send("replace" | "append" | "close", html)`` until it returns
    (``ConnectionResetError`` when the browser leaves is handled for it);
  * ``ui.action(path, handler)``: a POST that changes something: it runs only with the
    session's CSRF token (403 otherwise). Answer with
    ``after_action(request, redirect="/ui/<slug>", fragment=render(request, ...))``:
    the fragment for the script's ``data-async`` forms, a 303 for a plain post.

  Handlers are ``async def handler(request: web.Request) -> web.StreamResponse``.
  ``session_of(request).operator`` is the logged-in OS user. Data comes only from the
  control API: ``async with ui.client() as client: await client.status()`` (a page
  needing more adds a control route and a `ControlClient` method). Never block the
  event loop (files and CPU-heavy work go through ``asyncio.to_thread``). A failed
  control request (`ControlError`, `DaemonUnavailable`) answers its status with the
  message.
- Templates: ``templates/<slug>.html`` extends ``base.html`` (block ``content``; set
  ``title``), fragments are ``templates/<slug>/_<name>.html``. Render them with
  ``render(request, "<slug>.html", title=..., **context)`` (a response) or
  ``render_text(...)`` (a string, e.g. for an SSE event); both add ``csrf``,
  ``operator``, ``nav`` and ``version``. Autoescaping is on: never mark user or model
  text ``|safe`` (render Markdown with markdown-it-py, HTML off).
- The Content-Security-Policy allows no inline script and no inline style: no
  ``<script>`` blocks, ``onclick=`` or ``style=`` attributes; use the classes of
  ``static/ui.css`` and the behaviour of ``static/ui.js``:

  * ``<div data-sse="/ui/...">``: opens an EventSource; a ``replace`` event's HTML
    replaces the element's content, ``append`` appends it, ``close`` closes it;
  * ``<form method="post" data-async data-target="ID">``: submitted with fetch (the
    CSRF header comes from ``<meta name="csrf-token">``), the answer replaces the
    content of element ``ID`` (the page reloads when there is no target); a refused
    request shows its text in the form's ``[data-error]`` element (or an alert);
  * ``data-confirm="question"`` on a form asks before it is submitted.

  Every form also works without the script: a hidden ``<input name="csrf">`` with
  ``{{ csrf }}`` and a 303 answer.
"""
