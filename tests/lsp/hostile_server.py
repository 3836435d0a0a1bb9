"""Language servers for tests/lsp_attacks.rs, each hostile in its own way
by its first argument (every mode answers initialize, offering hover and
definition):

  points URI...  answers definition with one location per URI, each at
                 line 0, character 4 (in the protocol's UTF-16 units)
  reader         answers hover with what reading $READ gave (its first 200
                 characters, or the error)
  hog            at the first hover allocates 1 GiB, page by page
  strays         at a hover first answers ids it was never sent (a number
                 and a string), then sends a reply with no id, then the
                 real answer ("fine")
  badutf8        answers hover with a frame whose body is not UTF-8
  notjson        answers hover with a frame whose body is not JSON
  nag            at the first hover stops reading its input and sends
                 workspace/configuration requests for ever, each asking
                 for the whole settings 2000 times
  good           answers hover with "fine"

Only the standard library: it runs confined.
"""

import json
import os
import sys

MODE = sys.argv[1]
# Started with PYTHONSAFEPATH=1 (as sluice starts every server), so its own
# folder is put on the path by hand for the shared framing.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frames import OUT, raw, read, send  # noqa: E402


def answer(message, text):
    send({"jsonrpc": "2.0", "id": message["id"],
          "result": {"contents": {"kind": "plaintext", "value": text}}})


def hover(message):
    if MODE == "reader":
        try:
            with open(os.environ["READ"], "r", errors="replace") as f:
                answer(message, "read: " + f.read(200))
        except OSError as e:
            answer(message, "read failed: " + str(e.strerror))
        return
    if MODE == "hog":
        hold = []
        for _ in range(1024):
            hold.append(b"x" * (1 << 20))
        answer(message, "allocated %d MiB" % len(hold))
        return
    if MODE == "strays":
        send({"jsonrpc": "2.0", "id": 999999, "result": {"contents": "stray"}})
        send({"jsonrpc": "2.0", "id": str(message["id"]), "result": {"contents": "stray"}})
        send({"jsonrpc": "2.0", "result": {"contents": "stray"}})
        send({"jsonrpc": "2.0", "id": -1, "error": {"code": 1, "message": "stray"}})
    if MODE == "badutf8":
        raw(b'{"jsonrpc": "2.0", "id": %d, "result": {"contents": "\xff\xfe"}}' % message["id"])
        return
    if MODE == "notjson":
        raw(b'{"jsonrpc": "2.0", "id": %d, "result": ' % message["id"])
        return
    if MODE == "nag":
        items = [{}] * 2000
        n = 0
        while True:
            n += 1
            send({"jsonrpc": "2.0", "id": "nag%d" % n, "method": "workspace/configuration",
                  "params": {"items": items}})
    answer(message, "fine")


def main():
    while True:
        message = read()
        method = message.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"],
                  "result": {"capabilities": {"hoverProvider": True, "definitionProvider": True,
                                              "textDocumentSync": 1}}})
        elif method == "textDocument/hover":
            hover(message)
        elif method == "textDocument/definition":
            send({"jsonrpc": "2.0", "id": message["id"], "result": [
                {"uri": uri, "range": {"start": {"line": 0, "character": 4},
                                       "end": {"line": 0, "character": 4}}}
                for uri in sys.argv[2:]]})
        elif method == "shutdown":
            send({"jsonrpc": "2.0", "id": message["id"], "result": None})
        elif method == "exit":
            return
        elif "id" in message:
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": "not here"}})


main()
