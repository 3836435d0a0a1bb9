"""The base protocol's framing, shared by the tests' language servers
(fake_server.py, hostile_server.py): a message is a Content-Length header,
a blank line and a JSON body, on standard input and output."""

import json
import sys

IN = sys.stdin.buffer
OUT = sys.stdout.buffer


def read():
    """The next message; the process ends when its input does."""
    length = None
    while True:
        line = IN.readline()
        if not line:
            sys.exit(0)
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return json.loads(IN.read(length))


def raw(body):
    """Sends `body` (bytes) as one frame."""
    OUT.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    OUT.flush()


def send(message):
    raw(json.dumps(message).encode())
