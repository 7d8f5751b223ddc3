"""Arguments that several commands share, and their help."""

SERVER = 'The server, by name or id.'
VOLUME = 'The volume, by name or id.'
POOL = "The pool's name."


def add_wait(parser, text: str, interval: float) -> None:
    """``--wait`` (with ``text`` as its help), and how often to look."""
    parser.add_argument('--wait', action='store_true', help=text)
    parser.add_argument('--poll-interval', type=float, default=interval,
                        metavar='<seconds>',
                        help='Seconds between looks at the progress '
                             '(default %s).' % interval)


def add_long(parser) -> None:
    parser.add_argument('--long', action='store_true',
                        help='List more columns.')
