"""moto in server mode, with each DynamoDB request applied atomically.

moto's server answers requests on many threads, and its DynamoDB backend checks a condition and
then writes without a lock, so two conditional PutItems racing for one key can both succeed (the
second silently replaces the first). DynamoDB never does that: a conditional write is atomic, and
sheetlog's append rests on it. Serialising DynamoDB requests restores that guarantee; the other
services (S3, SQS long polls, streams) keep moto's threads.

Usage: python moto_server.py -H 127.0.0.1 -p PORT   (the same arguments as moto_server)

SHEETLOG_MOTO_SWITCH_INTERVAL (seconds, e.g. 1e-6) makes Python switch threads that often, which
widens every race inside moto; the test of this guarantee runs with it so it cannot pass by luck.

Two costs of moto's that AWS does not have are removed, because under many concurrent editors
they, not sheetlog, set the local stack's pace (py-spy over `./scripts/bench hot` at 64 editors:
a third of the server's busy samples formatted and wrote one log line per request under the
logging lock, and SQS receives spent a quarter of the rest recomputing every queue attribute):
- the per-request access log line (werkzeug's), unless SHEETLOG_MOTO_REQUEST_LOG=1; errors are
  still logged;
- SQS ReceiveMessage checks each message's retention against the whole attribute map, which
  counts every message of the queue (visible, delayed, in flight) for each message it returns;
  here it reads the one attribute it needs. The result is the same.
- SQS reads the clock through datetime arithmetic, three times per queued message for every
  SendMessage of a FIFO queue (it recounts the queue's messages to look up one attribute), so a
  backlog made every send slower; here its clock is `time.time()`, the same instant.
- A DynamoDB Query on a table's key lists and sorts every item of the table to find one
  partition's; here it starts from that partition's items. The result is the same.
- TransactWriteItems deep-copies each table an item of the transaction names, once per item,
  to roll back a cancelled transaction (ten range items and an entry copied the Clients table
  ten times per group commit, so a commit slowed as the table grew); here it saves the items the
  transaction names and the tables' stream length, and a cancelled transaction puts those back.
  The outcome is the same: a cancelled transaction leaves no item and no stream record changed.
- An SQS long poll took the FIFO groups in flight once, when it started, and then spun without
  sleeping while any message was visible: a message group freed by a DeleteMessage during the
  wait stayed blocked for the rest of the wait, and the spin held the interpreter from every
  other request. Here a long poll is a series of immediate receives, each with the groups in
  flight as they are then, 10 ms apart (or at once when a message arrives) until the wait ends,
  as SQS answers a long poll as soon as a message may be delivered.
- Every request found its backend from the host name by listing moto's package directory (a
  `stat` per service) and then trying each service's URL patterns in turn, under the dispatcher's
  one lock; here the answer for a host is kept after the first request (it depends on the host
  name alone).
"""

import copy
import os
import sys
import threading
import time

from moto.core.utils import unix_time
import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import main
import moto.sqs.models as sqs_models
from moto.sqs.models import SQSBackend
from werkzeug.serving import WSGIRequestHandler

_lock = threading.Lock()
_call_action = DynamoHandler.call_action


def _atomic_call_action(self):
    with _lock:
        return _call_action(self)


DynamoHandler.call_action = _atomic_call_action


def _retained(self, queue_name, message):
    queue = self.get_queue(queue_name)
    retain_until = int(queue.message_retention_period) + message.sent_timestamp / 1000
    return retain_until > unix_time()


SQSBackend.is_message_valid_based_on_retention_period = _retained


def _unix_time(dt=None):
    return time.time() if dt is None else unix_time(dt)


def _unix_time_millis(dt=None):
    return _unix_time(dt) * 1000.0


sqs_models.unix_time = _unix_time
sqs_models.unix_time_millis = _unix_time_millis

# --- SQS long polls: a FIFO group freed during the wait is delivered -------------------------

_receive_message = SQSBackend.receive_message
# How often a long poll looks again while nothing it may deliver is visible.
_LONG_POLL_STEP = 0.01


def _long_poll(self, queue_name, count, wait_seconds_timeout, visibility_timeout, message_attribute_names=None):
    end = time.time() + wait_seconds_timeout
    while True:
        got = _receive_message(self, queue_name, count, 0, visibility_timeout, message_attribute_names)
        left = end - time.time()
        if got or left <= 0:
            return got
        queue = self.get_queue(queue_name)
        with queue._messages_lock:
            queue._messages_lock.wait(min(_LONG_POLL_STEP, left))


SQSBackend.receive_message = _long_poll

# --- Query: one partition, not the whole table -------------------------------------------------

_scope = threading.local()
_all_items = Table.all_items
_query = Table.query


def _scoped_all_items(self):
    scoped = getattr(_scope, "partition", None)
    if scoped is not None and scoped[0] is self:
        return scoped[1]
    return _all_items(self)


def _partition_query(self, hash_key, *args, **kwargs):
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    if index_name is not None or hash_key is None or not self.range_key_attr:
        return _query(self, hash_key, *args, **kwargs)
    part = self.items.get(hash_key)
    items = sorted(part.values(), key=lambda i: i.range_key) if part else []
    _scope.partition = (self, items)
    try:
        return _query(self, hash_key, *args, **kwargs)
    finally:
        _scope.partition = None


Table.all_items = _scoped_all_items
Table.query = _partition_query

# --- TransactWriteItems: roll back the items, not copies of whole tables -----------------------


class _TablesNotCopied:
    """moto's `copy` module as transact_write_items sees it: a Table "copy" is the table itself
    (the items are saved and restored by `_itemwise_transaction` instead); anything else is
    copied as before."""

    def deepcopy(self, x, memo=None):
        if isinstance(x, Table):
            return x
        return copy.deepcopy(x, memo)

    def __getattr__(self, name):
        return getattr(copy, name)


dynamodb_models.copy = _TablesNotCopied()
_transact_write_items = DynamoDBBackend.transact_write_items


def _item_key(table, op_type, op):
    attrs = op.get("Item") if op_type == "Put" else op.get("Key")
    if not isinstance(attrs, dict) or table.hash_key_attr not in attrs:
        return None
    h = DynamoType(attrs[table.hash_key_attr])
    if table.range_key_attr is None:
        return (h, None)
    if table.range_key_attr not in attrs:
        return None
    return (h, DynamoType(attrs[table.range_key_attr]))


def _get(table, h, r):
    if table.range_key_attr is None:
        return table.items.get(h)
    part = table.items.get(h)
    return part.get(r) if part else None


def _restore(table, h, r, old):
    if table.range_key_attr is None:
        if old is None:
            table.items.pop(h, None)
        else:
            table.items[h] = old
        return
    part = table.items.get(h)
    if old is None:
        if part is not None:
            part.pop(r, None)
    else:
        table.items[h][r] = old


def _itemwise_transaction(self, transact_items):
    saved = []
    streams = {}
    for item in transact_items if isinstance(transact_items, list) else []:
        if not isinstance(item, dict) or len(item) != 1:
            continue
        op_type, op = next(iter(item.items()))
        table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
        if table is None:
            continue
        key = _item_key(table, op_type, op)
        if key is None:
            continue
        old = _get(table, *key)
        saved.append((table, key[0], key[1], copy.deepcopy(old) if old is not None else None))
        if table.stream_shard is not None and id(table) not in streams:
            streams[id(table)] = (table.stream_shard, len(table.stream_shard.items))
    try:
        return _transact_write_items(self, transact_items)
    except BaseException:
        for table, h, r, old in reversed(saved):
            _restore(table, h, r, old)
        for shard, length in streams.values():
            del shard.items[length:]
        raise


DynamoDBBackend.transact_write_items = _itemwise_transaction

# --- Request dispatch: the backend for a host is looked up once -------------------------------

_backend_for_host = DomainDispatcherApplication.get_backend_for_host
_backends_by_host = {}


def _cached_backend_for_host(self, host):
    if host not in _backends_by_host:
        _backends_by_host[host] = _backend_for_host(self, host)
    return _backends_by_host[host]


DomainDispatcherApplication.get_backend_for_host = _cached_backend_for_host

if os.environ.get("SHEETLOG_MOTO_REQUEST_LOG") != "1":
    WSGIRequestHandler.log_request = lambda self, code="-", size="-": None

if os.environ.get("SHEETLOG_MOTO_SWITCH_INTERVAL"):
    sys.setswitchinterval(float(os.environ["SHEETLOG_MOTO_SWITCH_INTERVAL"]))

if __name__ == "__main__":
    sys.exit(main())
