"""The README fits on a screen and tells the truth about the layout; every link in it and in ``docs/`` resolves.

The README's tour itself runs against a live server in ``tests/system/test_readme_tour.py``.
"""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.support.docs import DOCS, README, ROOT, floor_pictures, relative_links, tour

MARKDOWN = [README, *sorted(DOCS.glob("*.md"))]


def layer_contracts() -> dict[str, list[str]]:
    """Each ``layers`` contract of ``pyproject.toml`` by the package it covers: its layers, top first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return {c["containers"][0]: c["layers"] for c in contracts if c["type"] == "layers"}


def as_floors(layers: list[str]) -> list[set[str]]:
    """A contract's layers as the pictures draw them: one set of sibling names per floor."""
    return [{name.strip() for name in layer.split(":")} for layer in layers]


def test_the_readme_fits_on_a_screen():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the reference belongs in docs/"


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file_that_exists(path):
    links = relative_links(path)
    with_anchor = [link for link in links if "#" in link]
    assert not with_anchor, f"anchors break silently when a heading changes: link the file instead: {with_anchor}"
    missing = [link for link in links if not (path.parent / link).is_file()]
    assert not missing, f"{path.name} links to files that do not exist: {missing}"


def test_the_floor_pictures_are_the_import_contracts():
    """The README's picture and development.md's are exactly the contracts' layers: no stale or missing floor."""
    contracts = layer_contracts()
    readme, development = floor_pictures(README), floor_pictures(DOCS / "development.md")
    assert set(readme) == {"memory_plugin"}
    assert set(development) == set(contracts), "development.md draws one picture per layers contract"
    for package, layers in contracts.items():
        assert all("|" not in layer for layer in layers), "the pictures say a floor's names never import each other"
        assert development[package] == as_floors(layers), f"docs/development.md: the floors of {package}"
    assert readme["memory_plugin"] == as_floors(contracts["memory_plugin"]), "README.md: the floors of memory_plugin"


def test_the_tour_stops_at_the_first_http_error():
    """Every curl of the tour fails on an HTTP error (``-f``), so the live test cannot pass over a 4xx."""
    calls = re.findall(r"\bcurl\b[^\n]*", tour())
    assert len(calls) >= 8
    assert all(re.match(r"curl -fsS\b", call) for call in calls), [c for c in calls if not c.startswith("curl -fsS")]
