#!/usr/bin/env python3
"""For a service behind keygate in decision mode: check the body against X-Keygate-Content-Digest.

Behind nginx or Caddy, keygate is never shown a request's body. On a route with
`unseenBody: digest` it allows an RFC 9421 request whose signature covers Content-Digest, and the
proxy tells your service, in X-Keygate-Content-Digest, the Content-Digest value the signature
covered. Your service receives the body: it must check that the body has that digest, and refuse
the request (400) otherwise. Python 3.8 or later, the standard library only: copy
check_forwarded_digest into your service.

    ok, reason, message = check_forwarded_digest(header_value, body)

header_value is the header's value (None when absent: keygate saw the body itself, or there is
none, and there is nothing to check); body the exact bytes received, not a body parsed and
serialised again. reason is None when ok, else "malformed", "no-known-algorithm" or "mismatch".
Where the two come from:

    WSGI     environ.get("HTTP_X_KEYGATE_CONTENT_DIGEST"),
             environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    Flask    request.headers.get("X-Keygate-Content-Digest"), request.get_data(cache=True)
    Django   request.headers.get("X-Keygate-Content-Digest"), request.body

From a shell, to try it: the header's value as the argument (none: the header is absent), the
body on stdin; it prints the verdict and exits 0 when the body passes, 1 when it is refused.

    printf '{"a":1}' | python3 forwarded_digest.py 'sha-256=:<base64>:'
"""
import base64
import binascii
import hashlib
import re
import sys

HEADER = "X-Keygate-Content-Digest"
# the digests keygate computes (RFC 9530 names); other algorithms are ignored
ALGORITHMS = {"sha-256": hashlib.sha256, "sha-512": hashlib.sha512}
# one member as RFC 9530 writes it: a Structured Fields key, "=", a byte sequence; no parameters
MEMBER = re.compile(r"([a-z*][a-z0-9_\-.*]*)=:([A-Za-z0-9+/]*={0,2}):")


def check_forwarded_digest(header_value, body):
    """(ok, reason, message): every sha-256 and sha-512 member of header_value must be the digest of
    body, and at least one must be there. A member that is not name=:base64:, or an algorithm named
    twice, is malformed (strict: where a full Structured Fields parser would pass it, this refuses)."""
    if header_value is None:
        return True, None, "no %s: nothing to check" % HEADER
    digests = {}
    value = header_value.strip(" \t")
    for member in value.split(",") if value else []:
        member = member.strip(" \t")
        match = MEMBER.fullmatch(member)
        digest = None
        if match:
            try:
                digest = base64.b64decode(match.group(2), validate=True)
            except binascii.Error:
                pass
        if digest is None:
            return False, "malformed", "%s member %r is not name=:base64: (RFC 9530)" % (HEADER, member[:100])
        if match.group(1) in digests:
            return False, "malformed", "%s names %s twice" % (HEADER, match.group(1))
        digests[match.group(1)] = digest
    known = [name for name in digests if name in ALGORITHMS]
    if not known:
        return False, "no-known-algorithm", "%s has no digest this check computes (%s); it computes %s" % (
            HEADER, ", ".join(digests) or "none", ", ".join(ALGORITHMS))
    for name in known:
        computed = ALGORITHMS[name](body).digest()
        # the digests are of public data: no constant-time compare is needed
        if digests[name] != computed:
            return False, "mismatch", "%s %s is not the digest of the %d bytes of body received, whose digest is %s=:%s:" % (
                HEADER, name, len(body), name, base64.b64encode(computed).decode())
    return True, None, "%s: %s of the body" % (HEADER, ", ".join(known))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        sys.exit("usage: python3 forwarded_digest.py [HEADER_VALUE] < body")
    ok, reason, message = check_forwarded_digest(sys.argv[1] if len(sys.argv) == 2 else None, sys.stdin.buffer.read())
    print("%s: %s" % ("ok" if ok else "refused (%s)" % reason, message))
    sys.exit(0 if ok else 1)
