"""``serve --workers N``: refused at once with an embedded store, naming it; one port for every worker; the
cores shared out between the workers' model calls."""

from __future__ import annotations

from pathlib import Path

from memory_plugin.cli import main
from memory_plugin.settings import EmbeddedRegion, OpenSearchRegion, load_settings
from memory_plugin.workers import cores_shared, listening_sockets, refusal


def test_more_than_one_worker_with_an_embedded_store_is_refused_naming_it(tmp_path: Path) -> None:
    settings = load_settings(environ={}, data_dir=tmp_path / "data")
    assert refusal(settings, 1) is None, "one worker is today's server"
    message = refusal(settings, 2)
    assert message is not None and "home region USA" in message and str(tmp_path / "data") in message
    on_opensearch = OpenSearchRegion(hosts=("http://127.0.0.1:1",))
    outside = tmp_path / "deu"
    mixed = settings.replace(regions={"USA": on_opensearch, "DEU": EmbeddedRegion(path=outside)})
    message = refusal(mixed, 4)
    assert message is not None and "region DEU" in message and str(outside) in message
    assert "home region" not in message
    assert refusal(settings.replace(regions={"USA": on_opensearch}), 4) is None
    assert refusal(settings.replace(regions={"USA": on_opensearch}), 0) is not None


def test_the_cli_refuses_before_anything_starts(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["serve", "--workers", "2", "--port", "0", "--data-dir", str(tmp_path / "data")]) == 2
    assert "embedded" in capsys.readouterr().err
    assert not (tmp_path / "data").exists(), "no key, no folder, no lock: nothing was started"


def test_every_worker_socket_listens_on_one_port() -> None:
    sockets = listening_sockets("127.0.0.1", 0, 3)
    try:
        ports = {sock.getsockname()[1] for sock in sockets}
        assert len(ports) == 1 and ports != {0}
    finally:
        for sock in sockets:
            sock.close()


def test_workers_share_the_cores_between_their_model_calls_unless_told(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings = load_settings(environ={}, data_dir=tmp_path / "data")
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    assert cores_shared(settings, 1).embedder.threads is None, "one worker: the runtime's own choice"
    assert cores_shared(settings, 2).embedder.threads == 4
    assert cores_shared(settings, 3).embedder.threads == 2
    assert cores_shared(settings, 16).embedder.threads == 1
    told = settings.replace(embedder={"threads": 3})
    assert cores_shared(told, 4).embedder.threads == 3
