"""volmig's version, in the shape oslo.reports asks of a product."""

import pbr.version

version_info = pbr.version.VersionInfo('volmig')


def vendor_string() -> str:
    return 'volmig developers'


def product_string() -> str:
    return 'volmig'


def version_string_with_package() -> str:
    return version_info.version_string()
