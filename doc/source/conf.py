"""Sphinx configuration of volmig's documentation (``tox -e docs``)."""

import os
import sys

# doc/ext: the notification page's directive.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'ext'))

project = 'volmig'
copyright = 'volmig developers'
extensions = [
    'cliff.sphinxext',
    'notification_samples',
    'os_api_ref',
    'oslo_config.sphinxext',
    'oslo_policy.sphinxext',
    'reno.sphinxext',
    'sphinxcontrib.mermaid',
]
# oslo.policy's directive lists the rules of this namespace.
policy_generator_config_file = '../../etc/volmig/volmig-policy-generator.conf'
sample_policy_basename = None
html_theme = 'alabaster'
exclude_patterns = []
# The README is the operator's guide; pages here link to it by name.
nitpicky = False
