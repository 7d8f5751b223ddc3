"""The package map (doc/source/packages.rst) against the tree's own
imports, and the size every module keeps to."""

import ast
import os
import re

from oslotest import base

ROOT = os.path.join(os.path.dirname(__file__), '..', '..')
PACKAGE = os.path.join(ROOT, 'volmig')
MAP = os.path.join(ROOT, 'doc', 'source', 'packages.rst')
# The root's modules that wire services together, as cmd does.
WIRING = ('service.py', 'embedded.py')
SHARED = {'conf', 'db', 'signing', 'policies'}
MOST_LINES = 400


def _folders() -> set[str]:
    return {name for name in os.listdir(PACKAGE)
            if os.path.isfile(os.path.join(PACKAGE, name, '__init__.py'))}


def _modules():
    for directory, _, names in os.walk(PACKAGE):
        for name in sorted(names):
            if name.endswith('.py'):
                yield os.path.join(directory, name)


def _imported(path: str) -> set[str]:
    """The folders of volmig that a module imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + ['%s.%s' % (node.module, alias.name)
                                     for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split('.')
            if parts[0] == 'volmig' and len(parts) > 1:
                found.add(parts[1])
    return found & _folders()


def _folder_of(path: str) -> str | None:
    parts = os.path.relpath(path, PACKAGE).split(os.sep)
    return parts[0] if len(parts) > 1 else None


class LayoutTest(base.BaseTestCase):

    def imports(self) -> dict[str, set[str]]:
        edges: dict[str, set[str]] = {name: set() for name in _folders()}
        for path in _modules():
            folder = _folder_of(path)
            if folder is not None:
                edges[folder] |= _imported(path) - {folder}
        return edges

    def mapped(self) -> dict[str, set[str]]:
        with open(MAP) as page:
            lines = re.findall(r'^   ([a-z_]+) ->(.*)$', page.read(), re.M)
        return {folder: set(targets.split()) for folder, targets in lines}

    def test_the_map_names_every_import_between_folders(self):
        self.assertEqual(self.imports(), self.mapped())

    def test_no_two_folders_import_each_other(self):
        edges = self.imports()
        both = sorted((a, b) for a in edges for b in edges[a]
                      if a < b and a in edges.get(b, ()))
        self.assertEqual([], both)

    def test_the_roots_modules_import_only_what_is_shared(self):
        wider = {os.path.basename(path): sorted(_imported(path) - SHARED)
                 for path in _modules()
                 if _folder_of(path) is None
                 and os.path.basename(path) not in WIRING}
        self.assertEqual({}, {name: folders for name, folders in wider.items()
                              if folders})

    def test_every_module_keeps_under_the_most_lines(self):
        long = {}
        for path in _modules():
            with open(path) as module:
                count = sum(1 for _ in module)
            if count >= MOST_LINES:
                long[os.path.relpath(path, ROOT)] = count
        self.assertEqual({}, long)
