"""The data path: the checked copy of a volume's data, and the reads and
writes it is made of. Both the volume service (a pool-to-pool move) and
the compute agent (a copy for Cinder through the compute API) use it; it
imports neither."""
