"""The libvirt compute driver."""
