"""``python -m memory_plugin.settings``: print the configuration reference, or ``--write FILE`` it."""

import sys
from pathlib import Path

from memory_plugin.settings.reference import reference, write_reference

if sys.argv[1:2] == ["--write"]:
    print("updated" if write_reference(Path(sys.argv[2])) else "current")
else:
    print(reference())
