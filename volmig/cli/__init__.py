"""The ``volmig`` command: a cliff client of the REST API."""
