"""volmig-all-in-one: the embedded default in one process."""

import sys

from oslo_config import cfg

from volmig import config
from volmig import embedded
from volmig import service
from volmig.api import http
from volmig.conf import CONF

cli_opts = [
    cfg.StrOpt('state-dir', required=True,
               help='Directory for the database and all other state.'),
    cfg.IntOpt('computes', default=1, min=1,
               help='How many compute agents to run (hosts compute-1..N).'),
    cfg.StrOpt('driver', default='qemu', choices=['fake', 'qemu'],
               help='Compute driver of the agents. "qemu" also runs '
                    'volmig-volume with pools pool-a and pool-b; "fake" '
                    'keeps guests in memory and moves no data, for tests.'),
    cfg.PortOpt('api-port', default=8788,
                help='Port of the REST API (noauth2) on 127.0.0.1; 0 picks '
                     'a free one.'),
    cfg.StrOpt('guest-image', default='build/guest-image',
               help='Where tools/build-guest-image.sh put volmig-guest; '
                    'with the qemu driver it is registered under that '
                    'name.'),
    cfg.StrOpt('transport-url', dest='aio_transport_url', default='fake://',
               help='RPC transport; fake:// keeps everything in process, a '
                    'rabbit:// URL lets other processes use volmig.client.'),
]


def main() -> None:
    CONF.register_cli_opts(cli_opts)
    config.parse_args(sys.argv[1:])
    embedded.configure(CONF.state_dir, CONF.driver, CONF.aio_transport_url)
    if CONF.driver == 'qemu':
        embedded.register_guest_image(CONF.guest_image)
    api = http.HTTPService('127.0.0.1', CONF.api_port)

    def started():
        print('volmig all-in-one: REST API %s (noauth2), transport %s, '
              'state in %s, compute hosts %s'
              % (api.endpoint, CONF.aio_transport_url, CONF.state_path,
                 ', '.join(embedded.compute_hosts(CONF.computes))),
              flush=True)
    service.serve(lambda: embedded.build(CONF.computes, api, started))
