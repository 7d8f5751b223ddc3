"""The REST API: a Nova-shaped subset under ``/v2.1`` (DESIGN section 3.3).

``app.init_application`` builds the WSGI pipeline; one controller module
per resource, one schema module per resource under ``schemas``.
"""
