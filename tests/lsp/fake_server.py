"""A small language server for tests/lsp.rs, well-behaved or hostile by its
first argument:

  good    answers initialize, hover (with the word "fine") and pushes no
          diagnostics of its own
  silent  reads everything and never answers anything
  flood   before answering hover, sends 2000 window/logMessage frames of
          100 KB each (200 MB in all), then answers
  huge    answers hover with a frame announcing 100 MB, and sends them
  crash   prints its pid on stderr and exits 3 at the first hover
  escape  at the first hover tries to write argv[2] and argv[3] and to
          connect to 127.0.0.1:argv[4]; answers what happened

Only the standard library: it runs confined, seeing what the policy lets
commands read.
"""

import json
import os
import socket
import sys

MODE = sys.argv[1]
# Started with PYTHONSAFEPATH=1 (as sluice starts every server), so its own
# folder is put on the path by hand for the shared framing.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frames import OUT, read, send  # noqa: E402


def escape():
    said = []
    for path in sys.argv[2:4]:
        try:
            with open(path, "w") as f:
                f.write("escaped")
            said.append("wrote " + path)
        except OSError as e:
            said.append("write failed: " + e.strerror)
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[4])), timeout=2).close()
        said.append("connected")
    except OSError as e:
        said.append("connect failed: " + str(e.strerror or e))
    return "; ".join(said)


def hover(message):
    if MODE == "crash":
        sys.stderr.write("crash server %d is going down\n" % os.getpid())
        sys.stderr.flush()
        sys.exit(3)
    text = "fine"
    if MODE == "flood":
        note = json.dumps({"jsonrpc": "2.0", "method": "window/logMessage",
                           "params": {"type": 4, "message": "x" * 100000}}).encode()
        frame = b"Content-Length: %d\r\n\r\n" % len(note) + note
        for _ in range(2000):
            OUT.write(frame)
        OUT.flush()
    if MODE == "huge":
        OUT.write(b"Content-Length: %d\r\n\r\n" % (100 << 20))
        chunk = b" " * (1 << 20)
        try:
            for _ in range(100):
                OUT.write(chunk)
            OUT.flush()
        except BrokenPipeError:
            pass
        sys.exit(0)
    if MODE == "escape":
        text = escape()
    send({"jsonrpc": "2.0", "id": message["id"],
          "result": {"contents": {"kind": "plaintext", "value": text}}})


def main():
    while True:
        message = read()
        method = message.get("method")
        if MODE == "silent":
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"],
                  "result": {"capabilities": {"hoverProvider": True, "textDocumentSync": 1}}})
        elif method == "textDocument/hover":
            hover(message)
        elif MODE == "coalesce" and method == "textDocument/didChange":
            # As a busy typescript-language-server: what was opened is
            # never answered on its own; one publish, without a version,
            # answers the open and the change together.
            doc = message["params"]["textDocument"]
            text = message["params"]["contentChanges"][-1]["text"]
            found = [{"range": {"start": {"line": 0, "character": 0},
                                "end": {"line": 0, "character": 3}},
                      "severity": 1, "message": "bad is not allowed"}] if "bad" in text else []
            send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                  "params": {"uri": doc["uri"], "diagnostics": found}})
        elif method == "shutdown":
            send({"jsonrpc": "2.0", "id": message["id"], "result": None})
        elif method == "exit":
            return
        elif "id" in message:
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": "not here"}})


main()
