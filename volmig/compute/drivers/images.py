"""Guest images: a kernel, an initramfs and a command line, or a disk.

An image is a directory under ``[qemu] image_dir`` named for the image,
with the files and ``image.json``. ``imageRef`` names one; the agent
boots the kernel directly. A disk image is what a volume is filled from
for servers that boot from a volume through the firmware.
"""

import json
import os
import shutil

from volmig import atomic_file
from volmig import exception
from volmig import image_names

FILES = ('kernel', 'initrd', 'disk')


class ImageStore:

    def __init__(self, image_dir: str):
        self.image_dir = image_dir

    def _dir(self, name: str) -> str:
        return os.path.join(self.image_dir, image_names.check(name))

    def get(self, name: str) -> dict:
        try:
            with open(os.path.join(self._dir(name), 'image.json')) as handle:
                image = json.load(handle)
        except FileNotFoundError:
            raise exception.ImageNotFound(image=name)
        for key in FILES:
            if image.get(key):
                image[key] = os.path.join(self._dir(name), image[key])
        return image

    def list(self) -> list[dict]:
        if not os.path.isdir(self.image_dir):
            return []
        found = []
        for name in sorted(os.listdir(self.image_dir)):
            try:
                found.append(self.get(name))
            except (exception.ImageNotFound, exception.InvalidInput):
                continue
        return found

    def register(self, name: str, kernel: str | None = None,
                 initrd: str | None = None, cmdline: str = '',
                 disk: str | None = None) -> dict:
        if not (kernel or disk):
            raise exception.InvalidInput(
                field='image', reason='an image needs a kernel or a disk')
        if initrd and not kernel:
            raise exception.InvalidInput(
                field='image', reason='an initramfs needs a kernel')
        target = self._dir(name)
        if os.path.exists(target):
            raise exception.Invalid(reason='image %s exists already' % name)
        staging = target + '.new'
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        record = {'name': name, 'cmdline': cmdline}
        for key, source in (('kernel', kernel), ('initrd', initrd),
                            ('disk', disk)):
            if source:
                shutil.copyfile(source, os.path.join(staging, key))
                record[key] = key
        atomic_file.write_json(os.path.join(staging, 'image.json'), record)
        # Whole or not at all: a half-copied image is never found.
        os.rename(staging, target)
        return self.get(name)

    def delete(self, name: str) -> None:
        target = self._dir(name)
        if not os.path.isdir(target):
            raise exception.ImageNotFound(image=name)
        shutil.rmtree(target)
