"""Files in folders someone else may write (run directories, locks, leases, caches): the one
door they are opened through, and the one way an input file is read.

A folder is walked from a descriptor, each name below the one the user named (whose own
links, like `runs/latest`, are theirs) opened relative to its parent with `O_NOFOLLOW`: a
link planted below is never followed, a folder swapped after its check never reached. A
file is written to a new file (`O_EXCL`) renamed into place, or appended to only if it is a
regular file of this user with one link; a lock file must be one too. What is read is a
regular file (a FIFO never waited on, a device never opened) of bounded size.
`Folder.open(path, owned=True)`: only this user's; `private_folder`: one diagbench runs
programs from (the environment cache), this user's, writable by nobody else, nor is any
folder above it; launch/shared.py builds on these for the /tmp lease folders. An unfit
folder or file is `Unsafe` (an OSError saying why).

reading.py: input files and a run directory's files read; folder.py: folders walked without
links, files written, trees removed; private.py: the folder programs are run from.
"""

from __future__ import annotations

from diagbench.safefiles.folder import MAX_DEPTH, Folder, lock_problem, remove_folder, write_file
from diagbench.safefiles.private import private_folder
from diagbench.safefiles.reading import (
    TooLarge,
    Unsafe,
    describe_kind,
    open_input,
    open_regular,
    read_head,
    read_input,
    read_regular,
    user_name,
)

__all__ = [
    "MAX_DEPTH",
    "Folder",
    "TooLarge",
    "Unsafe",
    "describe_kind",
    "lock_problem",
    "open_input",
    "open_regular",
    "private_folder",
    "read_head",
    "read_input",
    "read_regular",
    "remove_folder",
    "user_name",
    "write_file",
]
