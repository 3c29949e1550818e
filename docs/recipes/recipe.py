#!/usr/bin/env python3
"""keygate from Python: log in, register a new key, then send a signed POST and a signed GET.

    KEYGATE_PASSWORD=... python3 recipe.py seed|rfc9421 rsa|ed25519|p256 ...

Needs the `cryptography` package (Debian: python3-cryptography; else pip install cryptography).
KEYGATE_URL (default http://127.0.0.1:8080) and KEYGATE_USER (default demo) say where and who.
"""
import base64
import hashlib
import json
import os
import secrets
import sys
import time
import urllib.error
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

# scheme://host[:port] exactly as the requests go out: RFC 9421's @target-uri is signed with it
BASE = os.environ.get("KEYGATE_URL", "http://127.0.0.1:8080")


def call(method, target, body=b"", headers=None):
    """Sends one request; returns its status and answer, an error answer too."""
    request = urllib.request.Request(BASE + target, data=body or None, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as answer:
        return answer.code, answer.read().decode()


def b64(data):
    return base64.b64encode(data).decode()


def new_key(key_type):
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    if key_type == "p256":
        return ec.generate_private_key(ec.SECP256R1())
    sys.exit(f"unknown key type {key_type!r}: rsa, ed25519 or p256")


def sign(key, data):
    """The key type's signature: RSA PKCS#1 v1.5 SHA-256, Ed25519, or ECDSA P-256 SHA-256 in DER."""
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(data)
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def seed_headers(key, api_key, method, target, body):
    """X-API-*: the signature of timestamp + METHOD + target (with its query) + body, nothing between."""
    timestamp = str(time.time_ns() // 1_000_000)  # milliseconds
    signature = sign(key, (timestamp + method + target).encode() + body)
    return {"X-API-Key": api_key, "X-API-Timestamp": timestamp, "X-API-Signature": b64(signature)}


def algorithm(key):
    """RFC 9421's alg for the key: each key type has one (an RSA key may also sign rsa-pss-sha512)."""
    if isinstance(key, rsa.RSAPrivateKey):
        return "rsa-v1_5-sha256"
    return "ed25519" if isinstance(key, ed25519.Ed25519PrivateKey) else "ecdsa-p256-sha256"


def rfc9421_headers(key, api_key, method, target, body):
    """Signature-Input and Signature over @method, @target-uri and, with a body, content-digest and content-type."""
    components = ['"@method"', '"@target-uri"']
    lines = [f'"@method": {method}', f'"@target-uri": {BASE}{target}']
    headers = {}
    if body:
        digest = f"sha-256=:{b64(hashlib.sha256(body).digest())}:"
        components += ['"content-digest"', '"content-type"']
        lines += [f'"content-digest": {digest}', '"content-type": application/json']
        headers["Content-Digest"] = digest
    alg = algorithm(key)
    params = (f'({" ".join(components)});created={int(time.time())};keyid="{api_key}";alg="{alg}"'
              f';nonce="{secrets.token_urlsafe(16)}"')
    lines.append(f'"@signature-params": {params}')
    signature = sign(key, "\n".join(lines).encode())  # the signature base: no newline after the last line
    if alg == "ecdsa-p256-sha256":  # RFC 9421 takes r||s, not DER
        r, s = decode_dss_signature(signature)
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    headers |= {"Signature-Input": f"sig1={params}", "Signature": f"sig1=:{b64(signature)}:"}
    return headers


def run(token, scheme, key_type):
    key = new_key(key_type)  # a real client makes its key once, keeps it, and registers it once
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    name = f"python-{scheme}-{key_type}"
    bearer = {"Authorization": f"Bearer {token}"}
    json_type = {"Content-Type": "application/json"}
    # registration proves the private key with its signature over the bytes of the name (ECDSA: DER)
    registration = {"name": name, "publicKey": public_pem.decode(), "signature": b64(sign(key, name.encode()))}
    status, answer = call("POST", "/v1/api-keys", json.dumps(registration).encode(), bearer | json_type)
    print(f"[{scheme} {key_type}] register {name}: {status} {answer}")
    if status != 201:
        sys.exit(1)
    api_key = json.loads(answer)["apiKey"]

    signed_headers = seed_headers if scheme == "seed" else rfc9421_headers
    # a new tax_id each run: the example service refuses a second client with the same one
    client = {"name": "Ada Lovelace", "email": "ada@example.com", "tax_id": str(time.time_ns())}
    for method, target, body in [("POST", "/v1/clients/", json.dumps(client).encode()), ("GET", "/v1/clients/?limit=10", b"")]:
        # sign the very bytes that are sent, and send them as they are
        headers = bearer | signed_headers(key, api_key, method, target, body) | (json_type if body else {})
        status, answer = call(method, target, body, headers)
        print(f"[{scheme} {key_type}] {method} {target}: {status} {answer}")


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("seed", "rfc9421"):
        sys.exit("usage: python3 recipe.py seed|rfc9421 rsa|ed25519|p256 ...")
    user = os.environ.get("KEYGATE_USER", "demo")
    password = os.environ.get("KEYGATE_PASSWORD", "")
    if not password:
        print(f"KEYGATE_PASSWORD is not set: export it with the password of {user} (KEYGATE_USER)", file=sys.stderr)
        sys.exit(2)
    credentials = {"username": user, "password": password}
    status, answer = call("POST", "/v1/auth/token", json.dumps(credentials).encode(), {"Content-Type": "application/json"})
    if status != 200:
        sys.exit(f"login refused: {status} {answer}")
    token = json.loads(answer)["token"]
    for key_type in sys.argv[2:]:
        run(token, sys.argv[1], key_type)


if __name__ == "__main__":
    main()
