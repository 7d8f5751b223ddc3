"""``.. notification-samples::``: a table of every versioned notification
volmig sends, and each one's sample, read from doc/notification_samples
(the files the tests hold the code to), as Nova's notification page is
made from its samples."""

import json
import os

from docutils import nodes
from docutils.parsers import rst

SAMPLES = os.path.join(os.path.dirname(__file__), '..',
                       'notification_samples')


def _samples() -> list[tuple[str, dict]]:
    return [(name[:-len('.json')],
             json.load(open(os.path.join(SAMPLES, name))))
            for name in sorted(os.listdir(SAMPLES)) if name.endswith('.json')]


def _row(*cells) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += nodes.paragraph(text=cell)
        row += entry
    return row


class NotificationSamples(rst.Directive):

    def run(self) -> list:
        samples = _samples()
        table = nodes.table()
        group = nodes.tgroup(cols=4)
        for width in (30, 10, 30, 30):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += _row('Event type', 'Priority', 'Payload', 'Publisher')
        body = nodes.tbody()
        for name, sample in samples:
            payload = sample['payload']
            body += _row(name, sample['priority'], '%s %s' % (
                payload['volmig_object.name'],
                payload['volmig_object.version']),
                sample['publisher_id'].split(':')[0])
        group += head
        group += body
        table += group
        found = [table]
        for name, sample in samples:
            section = nodes.section(ids=[nodes.make_id(name)])
            section += nodes.title(text=name)
            text = json.dumps(sample, indent=4, sort_keys=True)
            block = nodes.literal_block(text, text)
            block['language'] = 'json'
            section += block
            found.append(section)
        return found


def setup(app):
    app.add_directive('notification-samples', NotificationSamples)
    return {'parallel_read_safe': True}
