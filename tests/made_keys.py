"""Secret-shaped values made at test time, so that no key is ever committed: private keys as a leak would show
them (generated, in the PEM forms OpenSSH and OpenSSL write) and tokens of a given length."""

from __future__ import annotations

import functools
from secrets import token_hex

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

_FORMATS = {"openssh": serialization.PrivateFormat.OpenSSH, "rsa": serialization.PrivateFormat.TraditionalOpenSSL,
            "ec": serialization.PrivateFormat.TraditionalOpenSSL}


@functools.cache
def private_key_pem(kind: str = "openssh") -> bytes:
    """A freshly generated private key in PEM: `openssh` (ed25519, "OPENSSH" header), `rsa` or `ec` (OpenSSL's
    traditional "RSA"/"EC" headers). One per kind and test process."""
    key: ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if kind == "openssh":
        key = ed25519.Ed25519PrivateKey.generate()
    elif kind == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, _FORMATS[kind], serialization.NoEncryption())


def pem_header(kind: str = "openssh") -> bytes:
    """The first line of a generated private key of that kind (`-----BEGIN ... -----`)."""
    return private_key_pem(kind).split(b"\n", 1)[0]


def token(length: int) -> str:
    """A random lowercase-hex token of exactly `length` characters."""
    return token_hex((length + 1) // 2)[:length]
