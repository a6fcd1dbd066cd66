"""Connector credentials encrypted at rest, as ml-commons keeps them: AES-256-GCM under one master key.

The master key is made once per deployment and kept where every process that
serves the deployment reads it (a private file in the data folder, or a document
in the OpenSearch ml index written create-only), never beside the data it locks
in one store row.  A stored value is ``v1:`` + base64(nonce + ciphertext + tag);
the owner's ids are its associated data, so a value copied into another
owner's connector does not decrypt.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "v1:"
KEY_BYTES = 32
NONCE_BYTES = 12


def new_master_key() -> bytes:
    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)


class SecretBox:
    def __init__(self, master_key: bytes) -> None:
        if len(master_key) != KEY_BYTES:
            raise ValueError(f"the master key must be {KEY_BYTES} bytes")
        self._aead = AESGCM(master_key)

    def seal(self, value: str, context: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, value.encode("utf-8", "surrogatepass"), context.encode())
        return PREFIX + base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, stored: str, context: str) -> str:
        if not stored.startswith(PREFIX):
            raise ValueError("not a sealed value")
        raw = base64.b64decode(stored[len(PREFIX) :])
        try:
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode())
        except InvalidTag:
            raise ValueError("a credential does not decrypt under this deployment's master key") from None
        return plain.decode("utf-8", "surrogatepass")
