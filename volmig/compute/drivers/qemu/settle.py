"""After a crash: make a disk's record say what QEMU really has.

An agent killed between two QMP steps leaves ``guest.json`` behind QEMU:
a snapshot taken but not recorded, a backing switched to dst but the
generation not bumped, nodes added and never used, an overlay merged but
not deleted. QEMU is the truth. The device's top node and, when it is an
overlay, the overlay's actual backing (``image.backing-image``, not the
header's ``backing-filename``, which ``change-backing-file`` sets later)
give the disk's chain. Every other node of the disk's slot is a leftover.
"""

import os
import re

from oslo_log import log as logging

from volmig.compute.drivers.qemu import confinement
from volmig.compute.drivers.qemu import disks

LOG = logging.getLogger(__name__)


def _slot_node(slot: int, kind: str, name: str) -> int | None:
    """The generation in a node name of this slot and kind, or None."""
    match = re.fullmatch(r'v%d%s(\d+)' % (slot, kind), name)
    return int(match.group(1)) if match else None


def device_top(guest, device: str) -> str | None:
    for block in guest.execute('query-block'):
        if block.get('qdev', '').startswith('/machine/peripheral/%s/'
                                            % device):
            return (block.get('inserted') or {}).get('node-name')
    return None


def settle(guest, disk: dict) -> None:
    """Rewrite ``disk`` from QEMU's block graph, and drop leftovers."""
    slot = disk['slot']
    names = disks.node_names(disk)
    top = device_top(guest, names['device'])
    if top is None:
        return
    nodes = {node['node-name']: node
             for node in guest.execute('query-named-block-nodes')}
    # A file node's filename is the fd set the agent passed it in; the
    # set's opaque string is the path (a guest started by an older
    # release has paths). Asked of the file node (the format node's name
    # and "f"): an overlay's format node reports a json: filename once
    # its backing is not the one its header names.
    files = confinement.file_paths(guest)

    def path_of(node: str) -> str:
        filename = nodes[node + 'f']['file']
        return files.get(filename, filename)

    overlay_gen = _slot_node(slot, 'o', top)
    if overlay_gen is None:
        base = top
        disk['overlay'] = None
    else:
        image = nodes[top]['image']
        backing = image['backing-image']['filename']
        base = next(name for name, node in nodes.items()
                    if _slot_node(slot, 'g', name) is not None
                    and node['file'] == backing)
        sealed = bool((disk.get('overlay') or {}).get('sealed'))
        disk['overlay'] = {'path': path_of(top), 'gen': overlay_gen,
                           'sealed': sealed}
        if image.get('backing-filename') != path_of(base) and not sealed:
            # The reopen happened; the header's update did not.
            guest.execute('change-backing-file', device=top,
                          **{'image-node-name': top,
                             'backing-file': path_of(base)})
    disk['gen'] = _slot_node(slot, 'g', base)
    disk['path'] = path_of(base)
    if not any(job['id'].startswith('mirror-')
               for job in guest.execute('query-jobs')):
        _drop_leftovers(guest, slot, keep={top, base}, nodes=nodes,
                        files=files)
        confinement.release_files(guest)
    guest.save()
    LOG.info('Guest %(guest)s disk %(volume)s settled from QEMU: on '
             '%(path)s, overlay %(overlay)s',
             {'guest': guest.uuid, 'volume': disk['volume_id'],
              'path': disk['path'], 'overlay': disk['overlay']})


def _drop_leftovers(guest, slot: int, keep: set, nodes: dict,
                    files: dict) -> None:
    """Delete the slot's nodes outside the chain, and overlay files."""
    for kind in ('o', 'g'):
        # A format node sorts before its file node ("...f").
        for name in sorted(nodes):
            stem = name[:-1] if name.endswith('f') else name
            if stem in keep or _slot_node(slot, kind, stem) is None:
                continue
            LOG.info('Guest %s: dropping leftover block node %s',
                     guest.uuid, name)
            if name == stem:
                guest.delete_nodes(stem)
            elif stem not in nodes:
                guest.execute('blockdev-del', **{'node-name': name})
            path = files.get(nodes[name]['file'], nodes[name]['file'])
            # Only overlays are the agent's to delete; volumes are not.
            if kind == 'o' and os.path.exists(path):
                os.unlink(path)
