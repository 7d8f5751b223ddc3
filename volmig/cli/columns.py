"""What the commands print: REST fields as cliff columns, with lists and
dicts kept whole for ``-f json`` and ``-f yaml`` (osc-lib's
formattable columns), as openstackclient's commands print them."""

from osc_lib.cli import format_columns

_FORMATS = ((dict, format_columns.DictColumn),
            (list, format_columns.ListColumn))


def _value(value):
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return format_columns.ListDictColumn(value)
    for kind, column in _FORMATS:
        if isinstance(value, kind):
            return column(value)
    return value


def table(columns, items) -> tuple:
    """A Lister's result: ``columns`` are (REST key, heading) pairs."""
    return (tuple(heading for _, heading in columns),
            [tuple(_value(item.get(key)) for key, _ in columns)
             for item in items])


def fields(item: dict, keys=None) -> tuple:
    """A ShowOne's result: ``keys`` of ``item`` (by default all, sorted)."""
    keys = tuple(sorted(item) if keys is None else keys)
    return keys, tuple(_value(item.get(key)) for key in keys)
