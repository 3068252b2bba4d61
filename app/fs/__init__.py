"""Filesystem operations shared by the ``/v1/fs`` API and the ACP ``fs/*`` client services.

``paths`` resolves and confines paths and maps OS errors to bridge errors, ``ops`` holds the
operations (atomic writes included), ``upload`` unpacks tar archives all-or-nothing.
"""
