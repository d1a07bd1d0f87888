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

Two gaps in moto's Cognito user pools are closed, so that sign-in is tested against what Cognito
checks (see "Cognito" below):
- USER_SRP_AUTH checks the password: moto answers SRP_A with a random SALT and SRP_B and then
  accepts any PASSWORD_CLAIM_SIGNATURE, so any password signed in. Here the server side of
  Cognito's SRP-6a runs for real against the user's password, and a wrong one is refused.
- An app client's ExplicitAuthFlows are enforced: moto lets every client use every flow.
- Authenticator-app (TOTP) codes are checked: moto checks a code against the secret it hands out
  only with MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP, which is set here unless given.
"""

import base64
import copy
import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import time

os.environ.setdefault("MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP", "true")

from moto.cognitoidp.exceptions import InvalidParameterException, NotAuthorizedError
from moto.cognitoidp.models import CognitoIdpBackend
from moto.core.utils import unix_time
import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

import iam_recorder
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

# --- Cognito: SRP sign-in checks the password; app clients allow only their flows ---------------
#
# Cognito's variant of SRP-6a, as its clients compute it (amazon-cognito-identity-js's
# AuthenticationHelper, pycognito's aws_srp): the 3072-bit group of RFC 5054 with g = 2,
# k = H(N | g); numbers are hashed as "padded hex" (big-endian, with a leading zero byte when the
# top bit is set); x = H(salt | H(poolName | userIdForSrp | ":" | password)), where poolName is
# the pool id after its "_"; u = H(A | B); the key is HKDF-SHA256(S, salt = u,
# info = "Caldera Derived Key") cut to 16 bytes, and the client proves it knows the key with
# HMAC-SHA256(key, poolName | userIdForSrp | SECRET_BLOCK's bytes | TIMESTAMP). moto keeps the
# password itself, so the verifier v = g^x is computed from it at each sign-in.

SRP_N = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
    "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
    "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
    16,
)
SRP_G = 2


def srp_pad(n):
    """A non-negative integer as Cognito's clients hash it (their padHex, as bytes)."""
    return n.to_bytes((n.bit_length() + 8) // 8, "big")


def _srp_hash(*parts):
    return int.from_bytes(hashlib.sha256(b"".join(parts)).digest(), "big")


SRP_K = _srp_hash(srp_pad(SRP_N), srp_pad(SRP_G))


def srp_verifier(pool_id, user_id_for_srp, password, salt):
    """v = g^x, x = H(salt | H(poolName | userIdForSrp | ":" | password))."""
    inner = hashlib.sha256(f"{pool_id.split('_', 1)[1]}{user_id_for_srp}:{password}".encode()).digest()
    return pow(SRP_G, _srp_hash(srp_pad(salt), inner), SRP_N)


def srp_key(big_s, u):
    prk = hmac.new(srp_pad(u), srp_pad(big_s), hashlib.sha256).digest()
    return hmac.new(prk, b"Caldera Derived Key\x01", hashlib.sha256).digest()[:16]


class _SrpSignIn:
    """The server's half of one USER_SRP_AUTH sign-in, kept until its PASSWORD_VERIFIER answer."""

    def __init__(self, pool_id, user_id_for_srp, password, big_a):
        self.pool_id = pool_id
        self.user_id_for_srp = user_id_for_srp
        self.salt = int.from_bytes(secrets.token_bytes(16), "big")
        self.v = srp_verifier(pool_id, user_id_for_srp, password, self.salt)
        self.big_a = big_a
        while True:
            self.b = secrets.randbelow(SRP_N - 1) + 1
            self.big_b = (SRP_K * self.v + pow(SRP_G, self.b, SRP_N)) % SRP_N
            if self.big_b != 0:
                break

    def expected_signature(self, secret_block, timestamp):
        u = _srp_hash(srp_pad(self.big_a), srp_pad(self.big_b))
        if u == 0:
            return None
        big_s = pow(self.big_a * pow(self.v, u, SRP_N), self.b, SRP_N)
        message = (
            self.pool_id.split("_", 1)[1].encode()
            + self.user_id_for_srp.encode()
            + base64.b64decode(secret_block)
            + timestamp.encode()
        )
        return hmac.new(srp_key(big_s, u), message, hashlib.sha256).digest()


_srp_lock = threading.Lock()
_srp_sign_ins = {}  # SECRET_BLOCK -> _SrpSignIn
# What a client allows when it names no ExplicitAuthFlows (Cognito's default).
_DEFAULT_FLOWS = {"ALLOW_USER_SRP_AUTH", "ALLOW_CUSTOM_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"}
_FLOW_SETTING = {
    "USER_SRP_AUTH": "ALLOW_USER_SRP_AUTH",
    "USER_PASSWORD_AUTH": "ALLOW_USER_PASSWORD_AUTH",
    "REFRESH_TOKEN_AUTH": "ALLOW_REFRESH_TOKEN_AUTH",
    "REFRESH_TOKEN": "ALLOW_REFRESH_TOKEN_AUTH",
    "CUSTOM_AUTH": "ALLOW_CUSTOM_AUTH",
}
_initiate_auth = CognitoIdpBackend.initiate_auth
_respond_to_auth_challenge = CognitoIdpBackend.respond_to_auth_challenge


def _check_flow_allowed(backend, client_id, auth_flow):
    setting = _FLOW_SETTING.get(auth_flow)
    for pool in backend.user_pools.values():
        client = pool.clients.get(client_id)
        if client is None or setting is None:
            continue
        named = client.extended_config.get("ExplicitAuthFlows") or []
        # Each flow also has a legacy name without ALLOW_ (USER_PASSWORD_AUTH and the like).
        allowed = {f if f.startswith("ALLOW_") else f"ALLOW_{f}" for f in named} or _DEFAULT_FLOWS
        if setting not in allowed:
            raise InvalidParameterException(f"{auth_flow} flow not enabled for this client")


def _srp_initiate_auth(self, client_id, auth_flow, auth_parameters):
    _check_flow_allowed(self, client_id, auth_flow)
    answer = _initiate_auth(self, client_id, auth_flow, auth_parameters)
    if auth_flow != "USER_SRP_AUTH":
        return answer
    # moto checked the client, the user and its status and opened a session; the challenge it
    # made up is replaced by a real one.
    username, pool = self.sessions.pop(answer["Session"])
    user = self.admin_get_user(pool.id, username)
    try:
        big_a = int(auth_parameters.get("SRP_A", ""), 16)
    except ValueError:
        raise InvalidParameterException("SRP_A is not a hexadecimal number")
    if big_a % SRP_N == 0:
        raise NotAuthorizedError("Incorrect username or password.")
    sign_in = _SrpSignIn(pool.id, user.username, user.password or "", big_a)
    secret_block = base64.b64encode(secrets.token_bytes(64)).decode()
    # moto's respond_to_auth_challenge finds a PASSWORD_VERIFIER's session by its secret block.
    self.sessions[secret_block] = (user.username, pool)
    with _srp_lock:
        _srp_sign_ins[secret_block] = sign_in
    return {
        "ChallengeName": "PASSWORD_VERIFIER",
        "Session": secret_block,
        "ChallengeParameters": {
            "SALT": srp_pad(sign_in.salt).hex(),
            "SRP_B": format(sign_in.big_b, "x"),
            "USERNAME": user.username,
            "USER_ID_FOR_SRP": user.username,
            "SECRET_BLOCK": secret_block,
        },
    }


def _srp_respond_to_auth_challenge(self, session, client_id, challenge_name, challenge_responses):
    if challenge_name == "PASSWORD_VERIFIER":
        secret_block = challenge_responses.get("PASSWORD_CLAIM_SECRET_BLOCK") or ""
        with _srp_lock:
            sign_in = _srp_sign_ins.pop(secret_block, None)
        if sign_in is None:
            raise NotAuthorizedError("Invalid session for the user.")
        # The proof is for the user the challenge was made for, and signs in no one else.
        claimed_user = self.admin_get_user(sign_in.pool_id, challenge_responses.get("USERNAME") or "")
        if claimed_user.username != sign_in.user_id_for_srp:
            raise NotAuthorizedError("Incorrect username or password.")
        try:
            claimed = base64.b64decode(challenge_responses.get("PASSWORD_CLAIM_SIGNATURE") or "", validate=True)
        except ValueError:
            claimed = b""
        expected = sign_in.expected_signature(secret_block, challenge_responses.get("TIMESTAMP") or "")
        if expected is None or not hmac.compare_digest(claimed, expected):
            # One try per challenge, as Cognito: the session ends with a wrong password.
            self.sessions.pop(secret_block, None)
            raise NotAuthorizedError("Incorrect username or password.")
    answer = _respond_to_auth_challenge(self, session, client_id, challenge_name, challenge_responses)
    if challenge_name == "PASSWORD_VERIFIER" and answer.get("ChallengeName") == "NEW_PASSWORD_REQUIRED":
        # Cognito names the user's attributes and the ones still required (amazon-cognito-identity-js
        # parses both); moto names only the user.
        user = self.admin_get_user(sign_in.pool_id, sign_in.user_id_for_srp)
        attributes = {a["Name"]: a["Value"] for a in user.attributes if a["Name"] != "sub"}
        answer["ChallengeParameters"] = {
            **answer.get("ChallengeParameters", {}),
            "USER_ID_FOR_SRP": sign_in.user_id_for_srp,
            "userAttributes": json.dumps(attributes),
            "requiredAttributes": "[]",
        }
    return answer


CognitoIdpBackend.initiate_auth = _srp_initiate_auth
CognitoIdpBackend.respond_to_auth_challenge = _srp_respond_to_auth_challenge

if os.environ.get("SHEETLOG_MOTO_REQUEST_LOG") != "1":
    WSGIRequestHandler.log_request = lambda self, code="-", size="-": None

# SHEETLOG_IAM_RECORD=<file>: record the IAM action and resource of every request a function's
# role signs (scripts/lib/iam_recorder.py), for the IAM check of ./scripts/test.
iam_recorder.install_from_env(DomainDispatcherApplication)

if os.environ.get("SHEETLOG_MOTO_SWITCH_INTERVAL"):
    sys.setswitchinterval(float(os.environ["SHEETLOG_MOTO_SWITCH_INTERVAL"]))

if __name__ == "__main__":
    sys.exit(main())
