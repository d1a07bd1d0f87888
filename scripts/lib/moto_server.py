"""moto in server mode, with each DynamoDB request applied atomically.

moto's server answers requests on many threads, and its DynamoDB backend checks a condition and
then writes without a lock, so two conditional PutItems racing for one key can both succeed (the
second silently replaces the first). DynamoDB never does that: a conditional write is atomic, and
sheetlog's append rests on it. Serialising DynamoDB requests restores that guarantee; the other
services (S3, SQS long polls, streams) keep moto's threads.

Usage: python moto_server.py -H 127.0.0.1 -p PORT   (the same arguments as moto_server)

SHEETLOG_MOTO_SWITCH_INTERVAL (seconds, e.g. 1e-6) makes Python switch threads that often, which
widens every race inside moto; the test of this guarantee runs with it so it cannot pass by luck.
"""

import os
import sys
import threading

from moto.dynamodb.responses import DynamoHandler
from moto.server import main

_lock = threading.Lock()
_call_action = DynamoHandler.call_action


def _atomic_call_action(self):
    with _lock:
        return _call_action(self)


DynamoHandler.call_action = _atomic_call_action

if os.environ.get("SHEETLOG_MOTO_SWITCH_INTERVAL"):
    sys.setswitchinterval(float(os.environ["SHEETLOG_MOTO_SWITCH_INTERVAL"]))

if __name__ == "__main__":
    sys.exit(main())
