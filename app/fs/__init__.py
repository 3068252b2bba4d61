"""Filesystem operations shared by the ``/v1/fs`` API and the ACP ``fs/*`` client services.

``paths`` resolves and confines paths and maps OS errors to bridge errors, ``beneath`` walks a path
from a root's descriptor, ``ops`` holds the operations (atomic writes included), ``upload`` unpacks
tar archives all-or-nothing, ``temps`` records the temporary files they make, for a crash.
"""
