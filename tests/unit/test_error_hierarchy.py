"""One error hierarchy: every error a caller can act on is a ``ServiceError`` with a name of its own, so that an
``except`` or an ``isinstance`` means one thing wherever it is written (issue 49: agentic and ML once had their
own ``Conflict``, ``NotFound`` and ``StatusBadRequest``)."""

from __future__ import annotations

import importlib
import pkgutil

import memory_plugin
from memory_plugin import errors
from memory_plugin.errors import ServiceError


def every_service_error() -> list[type[ServiceError]]:
    for module in pkgutil.walk_packages(memory_plugin.__path__, "memory_plugin."):
        if module.name.endswith("__main__"):
            continue
        importlib.import_module(module.name)
    found: list[type[ServiceError]] = []
    pending: list[type[ServiceError]] = [ServiceError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_service_error_has_a_name_of_its_own():
    names: dict[str, str] = {}
    for cls in every_service_error():
        where = f"{cls.__module__}.{cls.__qualname__}"
        assert names.setdefault(cls.__name__, where) == where, f"{where} and {names[cls.__name__]}"


def test_status_errors_say_their_status_in_the_telnyx_words():
    assert (errors.StatusNotFound("gone").code, errors.StatusNotFound("gone").status) == ("not_found", 404)
    assert isinstance(errors.StatusNotFound("gone"), errors.NotFound)
    remote = errors.StatusError("upstream said no", 429)
    assert (remote.status, remote.code, remote.title) == (429, "too_many_requests", "Too many requests")
    assert errors.StatusError("odd", 599).code == ServiceError.code
    assert errors.StatusBadRequest("bad").opensearch_body()["error"]["type"] == "status_exception"
