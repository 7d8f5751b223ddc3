"""The REST API: a Nova-shaped subset under ``/v2.1``
(doc/source/design.rst, "Contracts").

``app.init_application`` builds the WSGI pipeline; one controller module
per resource, one schema module per resource under ``schemas``.
"""
