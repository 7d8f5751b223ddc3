"""volmig-demo's own parts: its live migration under a writing guest
(``migration``), and what volmig-guest's writer acknowledged and whether a
disk holds it (``writes``), which the tests and benchmarks read too.
``volmig.cmd.demo`` is the program."""
