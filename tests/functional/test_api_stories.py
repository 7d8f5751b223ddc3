"""The REST API's stories (``gabbits/*.yaml``), run by gabbi."""

import os

from gabbi import driver

from tests.functional import api_fixtures

STORIES = os.path.join(os.path.dirname(__file__), 'gabbits')


def load_tests(loader, tests, pattern):
    return driver.build_tests(STORIES, loader, host=None,
                              intercept=api_fixtures.setup_app,
                              fixture_module=api_fixtures,
                              test_loader_name=__name__)
