"""The README and ``docs/`` as text the tests read: the tour block, the floor pictures, the links."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: The marker before the README's runnable tour, one ```sh block.
TOUR_MARKER = "<!-- tour -->"
_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```$", re.S | re.M)


def fenced_after(text: str, marker: str) -> str:
    """The body of the first fenced block after ``marker``, which must come right after it."""
    start = text.index(marker) + len(marker)
    found = _FENCE.search(text, start)
    assert found is not None and not text[start : found.start()].strip(), f"no fenced block right after {marker}"
    return found.group(1)


def tour() -> str:
    """The README's five-minute tour, as the bash script it is."""
    return fenced_after(README.read_text(encoding="utf-8"), TOUR_MARKER)


def floor_pictures(path: Path) -> dict[str, list[set[str]]]:
    """Every ``<!-- floors: package -->`` picture in ``path``: its floors, top first, as sets of module names.

    A floor is one line, ``a · b · c``, then two or more spaces and a comment; a line
    that starts with ``·`` continues the floor above it.
    """
    text = path.read_text(encoding="utf-8")
    pictures: dict[str, list[set[str]]] = {}
    for marker in re.finditer(r"<!-- floors: ([\w.]+) -->", text):
        floors: list[set[str]] = []
        for line in fenced_after(text, marker.group(0)).splitlines():
            names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            if not names:
                continue
            modules = {name.strip() for name in names.split("·") if name.strip()}
            if names.startswith("·"):
                floors[-1] |= modules
            else:
                floors.append(modules)
        pictures[marker.group(1)] = floors
    return pictures


def relative_links(path: Path) -> list[str]:
    """The targets of the markdown links and images in ``path`` that are not URLs, outside code."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [target for target in targets if not re.match(r"[a-z][a-z0-9+.-]*:", target)]
