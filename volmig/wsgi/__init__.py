"""WSGI entry points for servers such as uWSGI or mod_wsgi."""
