"""Pages of a list, as Nova's are: at most ``limit`` items after the one
a ``marker`` names. The database cuts them (``volmig.db.engine.page``);
this cuts a whole list that a service older than paging sent."""

from volmig import exception


def cut(items: list, key: str, limit: int | None, marker) -> list:
    """The page of ``items`` after the one whose ``key`` is ``marker``."""
    if marker is not None:
        keys = [item[key] for item in items]
        if marker not in keys:
            raise exception.MarkerNotFound(marker=marker)
        items = items[keys.index(marker) + 1:]
    return items[:limit]
