"""The drivers' output: one JSON object per line, each written whole.

A driver prints from the client's listener threads and from its main thread at once, and
`print` writes a line and its newline separately: two threads could interleave them into a
line the test cannot parse, and a message the client delivered would look lost.
"""

import json
import sys
import threading

_LOCK = threading.Lock()


def emit(fields):
    line = json.dumps(fields) + "\n"
    with _LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()
