"""The core: the round engine and what it runs on.

:mod:`.engine` (round loop, client sampling, batched client execution), :mod:`.context`
(what a hook is told about its round), :mod:`.batching` (chunks of participants, per-replica
rows), :mod:`.participation`, :mod:`.params` (flat parameter vectors and their layers),
:mod:`.interrupts` (Ctrl-C while a command starts), :mod:`.malloc` (the allocator's thresholds).
"""
