"""``agents-room dashboard``: a read-only live web page over one store.

:mod:`.web` is the adapter (a GET-only Starlette app streaming snapshots over server-sent
events); ``static/`` is the page (one HTML file, its CSS and JS, shipped in the package: no
build step, nothing fetched from the internet). The data comes from ``Store.overview``, one
read transaction that never writes.
"""
