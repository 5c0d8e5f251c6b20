"""Ed25519 key management for checkpoints: create once (PEM, 0600), load, export the public half."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "export_public_key",
    "key_id",
    "load_or_create_signing_key",
    "load_public_key",
    "load_signing_key",
]

_log = logging.getLogger("broker.ledger")


def load_signing_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Read an unencrypted PKCS#8 PEM Ed25519 private key.

    Raises:
        FileNotFoundError: no key at ``path``.
        ValueError: the file is not an Ed25519 private key.
    """
    path = Path(path)
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        _log.warning("signing key %s is readable by group or others (mode %o)", path, mode & 0o777)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} holds a {type(key).__name__}, not an Ed25519 private key")
    return key


def load_or_create_signing_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The Ed25519 key at ``path``, created (PEM, mode 0600) if absent.

    Creation is atomic: the key is written to a private temporary file and hard-linked into
    place, so processes starting together end up sharing one key and never read half a file.
    """
    path = Path(path)
    if path.exists():
        return load_signing_key(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass  # another process won the race: use its key
    finally:
        temporary.unlink()
    return load_signing_key(path)


def export_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The public key as SubjectPublicKeyInfo PEM, what auditors need to verify checkpoints."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    """Parse a PEM public key (as written by ``export_public_key``).

    Raises:
        ValueError: not a PEM Ed25519 public key.
    """
    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError(f"not an Ed25519 public key: {type(key).__name__}")
    return key


def key_id(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """``"sha256:" + hex`` of the raw public key: names the key a checkpoint was signed with."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()
