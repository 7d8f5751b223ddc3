"""The QEMU compute driver: guests are QEMU processes driven over QMP."""
