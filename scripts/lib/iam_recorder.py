"""Records which IAM action, on which resource, each request to the emulator needs.

moto enforces no IAM, so a call a function's role does not allow passes every local test and
fails in a customer's account with AccessDenied. Locally each function signs its requests with
credentials of its own whose access key id names it (`role:<binary>:<stack prefix>`, made by
`RoleConfigs` in functions/pipeline/src/roles.rs); this module, installed in front of moto's
dispatcher by moto_server.py when SHEETLOG_IAM_RECORD names a file, turns every request signed
with such a key (in the Authorization header or, for a presigned URL, in the query string) into
the IAM authorization requests AWS would evaluate for it, and appends each distinct one to that
file as a JSON line:

    {"kind": "call", "key": "role:sheetlog-api:t-x-1a2b", "action": "s3:PutObject",
     "resource": "arn:aws:s3:::t-x-1a2b-data/payloads/...", "call": "PUT /t-x-1a2b-data/payloads/..."}

`cdk/bin/iam-calls.ts` evaluates them against the role policies of the synthesized template with
an IAM policy simulator. Requests signed with any other key (the tests' own set-up) are not
recorded.

The mapping follows the services' authorization references ("Actions, resources, and condition
keys for ..."): a DynamoDB transaction needs each item's own action on its table, a batch needs
the batch action on every table it names, a Query of an index needs the index's ARN, a DynamoDB
Streams call needs the stream's ARN, SQS batch calls need the single-message action, and an S3
request needs the action of the operation (HEAD is GetObject, a multipart upload's parts are
PutObject, `x-amz-tagging` adds PutObjectTagging, CopyObject adds GetObject on the source, a
versioned read is GetObjectVersion, a multi-object delete is DeleteObject on every key).
"""

import io
import json
import os
import re
import threading
import urllib.parse
import xml.etree.ElementTree as ET

ROLE_KEY_PREFIX = "role:"
ACCOUNT = "123456789012"

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")


def _credential(environ):
    """(access key id, region, service) of a SigV4-signed request, header or query string."""
    m = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    if m:
        return m.group(1), m.group(2), m.group(3)
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    cred = (query.get("X-Amz-Credential") or [""])[0].split("/")
    if len(cred) == 5:
        return cred[0], cred[2], cred[3]
    return None


def _read_body(environ):
    """The request body, leaving an identical stream for moto to read."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _table(region, name, index=None):
    arn = f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{name}"
    return f"{arn}/index/{index}" if index else arn


def _dynamodb(region, operation, body):
    """IAM requests of one DynamoDB or DynamoDB Streams JSON call."""
    if operation in ("TransactWriteItems", "TransactGetItems"):
        kinds = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                 "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
        out = []
        for item in body.get("TransactItems", []):
            for kind, op in item.items():
                out.append((f"dynamodb:{kinds.get(kind, kind)}", _table(region, op.get("TableName", ""))))
        return out
    if operation in ("BatchWriteItem", "BatchGetItem"):
        return [(f"dynamodb:{operation}", _table(region, t)) for t in body.get("RequestItems", {})]
    if operation == "GetRecords":
        return [("dynamodb:GetRecords", body.get("ShardIterator", "").split("|")[0])]
    if "StreamArn" in body:
        return [(f"dynamodb:{operation}", body["StreamArn"])]
    if operation == "ListStreams":
        return [("dynamodb:ListStreams", "*")]
    if "TableName" in body:
        return [(f"dynamodb:{operation}", _table(region, body["TableName"], body.get("IndexName")))]
    return [(f"dynamodb:{operation}", "*")]


_SQS_SINGLE = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
               "ChangeMessageVisibilityBatch": "ChangeMessageVisibility"}


def _sqs(region, operation, body):
    url = body.get("QueueUrl", "")
    name = url.rstrip("/").rsplit("/", 1)[-1] if url else body.get("QueueName", "")
    action = _SQS_SINGLE.get(operation, operation)
    return [(f"sqs:{action}", f"arn:aws:sqs:{region}:{ACCOUNT}:{name}")]


def _cognito(region, operation, body):
    pool = body.get("UserPoolId")
    resource = f"arn:aws:cognito-idp:{region}:{ACCOUNT}:userpool/{pool}" if pool else "*"
    return [(f"cognito-idp:{operation}", resource)]


def _s3(environ, body_reader):
    """IAM requests of one S3 REST call (path-style addressing, as the local stack uses)."""
    method = environ.get("REQUEST_METHOD", "GET")
    path = urllib.parse.unquote(environ.get("PATH_INFO", ""))
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    bucket, _, key = path.lstrip("/").partition("/")
    bucket_arn = f"arn:aws:s3:::{bucket}"
    obj = f"{bucket_arn}/{key}"
    if not key:
        if method == "POST" and "delete" in query:
            root = ET.fromstring(body_reader() or b"<Delete/>")
            keys = [e.text or "" for e in root.iter() if e.tag.split("}")[-1] == "Key"]
            return [("s3:DeleteObject", f"{bucket_arn}/{k}") for k in keys]
        if method in ("GET", "HEAD"):
            if "versions" in query:
                return [("s3:ListBucketVersions", bucket_arn)]
            if "uploads" in query:
                return [("s3:ListBucketMultipartUploads", bucket_arn)]
            if "location" in query:
                return [("s3:GetBucketLocation", bucket_arn)]
            return [("s3:ListBucket", bucket_arn)]
        return [(f"s3:{method}Bucket", bucket_arn)]
    versioned = "versionId" in query
    tagged = "HTTP_X_AMZ_TAGGING" in environ
    if method in ("GET", "HEAD"):
        if "tagging" in query:
            return [("s3:GetObjectVersionTagging" if versioned else "s3:GetObjectTagging", obj)]
        if "uploadId" in query:
            return [("s3:ListMultipartUploadParts", obj)]
        if "attributes" in query:
            return [("s3:GetObjectVersionAttributes" if versioned else "s3:GetObjectAttributes", obj)]
        return [("s3:GetObjectVersion" if versioned else "s3:GetObject", obj)]
    if method == "PUT":
        if "tagging" in query:
            return [("s3:PutObjectVersionTagging" if versioned else "s3:PutObjectTagging", obj)]
        out = [("s3:PutObject", obj)]
        source = environ.get("HTTP_X_AMZ_COPY_SOURCE")
        if source and "uploadId" not in query:
            src = urllib.parse.unquote(source).lstrip("/")
            src, _, version = src.partition("?versionId=")
            out.append(("s3:GetObjectVersion" if version else "s3:GetObject", f"arn:aws:s3:::{src}"))
            if environ.get("HTTP_X_AMZ_TAGGING_DIRECTIVE", "COPY") == "REPLACE" and tagged:
                out.append(("s3:PutObjectTagging", obj))
        elif tagged:
            out.append(("s3:PutObjectTagging", obj))
        return out
    if method == "POST":
        # CreateMultipartUpload (?uploads) and CompleteMultipartUpload (?uploadId) are PutObject.
        out = [("s3:PutObject", obj)]
        if "uploads" in query and tagged:
            out.append(("s3:PutObjectTagging", obj))
        return out
    if method == "DELETE":
        if "tagging" in query:
            return [("s3:DeleteObjectVersionTagging" if versioned else "s3:DeleteObjectTagging", obj)]
        if "uploadId" in query:
            return [("s3:AbortMultipartUpload", obj)]
        return [("s3:DeleteObjectVersion" if versioned else "s3:DeleteObject", obj)]
    return [(f"s3:{method}Object", obj)]


def _json_body(body):
    try:
        parsed = json.loads(body or b"{}")
        return parsed if isinstance(parsed, dict) else {}
    except ValueError:
        return {}


def if_missing(environ):
    """What a read of a missing S3 object needs besides its own action to be answered 404 (S3
    answers 403 without `s3:ListBucket` on the bucket, and sheetlog tells a missing key by its
    404): the authorization requests to add when the answer is 404."""
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        return []
    bucket, _, key = urllib.parse.unquote(environ.get("PATH_INFO", "")).lstrip("/").partition("/")
    return [("s3:ListBucket", f"arn:aws:s3:::{bucket}")] if key else []


def authorization_requests(environ):
    """(access key id, [(action, resource)], call) for a request signed with a role's key, else
    None. Reads the body when the mapping needs it and puts it back for moto."""
    cred = _credential(environ)
    if not cred or not cred[0].startswith(ROLE_KEY_PREFIX):
        return None
    if environ.get("REQUEST_METHOD") == "OPTIONS":
        # A browser's CORS preflight of a presigned URL carries the URL's credential, but S3
        # answers preflights from the bucket's CORS rules without authorizing anyone.
        return None
    key, region, service = cred
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if service == "s3":
        call = f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')}"
        if environ.get("QUERY_STRING"):
            names = sorted({p.split("=", 1)[0] for p in environ["QUERY_STRING"].split("&")})
            call += "?" + "&".join(n for n in names if not n.startswith("X-Amz-"))
        return key, _s3(environ, lambda: _read_body(environ)), call.rstrip("?")
    prefix, _, operation = target.partition(".")
    body = _read_body(environ)
    if not operation:
        # A query-protocol call (Action=... in a form body).
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        operation = (form.get("Action") or ["?"])[0]
        parsed = {k: v[0] for k, v in form.items()}
    else:
        parsed = _json_body(body)
    if service == "dynamodb" or prefix.startswith("DynamoDB"):
        requests = _dynamodb(region, operation, parsed)
    elif service == "sqs":
        requests = _sqs(region, operation, parsed)
    elif service == "cognito-idp":
        requests = _cognito(region, operation, parsed)
    else:
        requests = [(f"{service}:{operation}", "*")]
    return key, requests, target or operation


class Recorder:
    """Appends each distinct (key, action, resource) once to a JSON-lines file."""

    def __init__(self, path):
        self.path = path
        self.seen = set()
        self.lock = threading.Lock()

    def requests_of(self, environ):
        try:
            return authorization_requests(environ)
        except Exception as err:  # noqa: BLE001 - a request we cannot map must fail the check, not moto
            return (ROLE_KEY_PREFIX + "?", [("unmapped", repr(err))], environ.get("PATH_INFO", ""))

    def write(self, key, requests, call):
        lines = []
        with self.lock:
            for action, resource in requests:
                if (key, action, resource) in self.seen:
                    continue
                self.seen.add((key, action, resource))
                lines.append(json.dumps({"kind": "call", "key": key, "action": action,
                                         "resource": resource, "call": call}))
            if lines:
                # One write per request, appended: other processes (other emulators, the local
                # Event API) append to the same file.
                with open(self.path, "a", encoding="utf-8") as out:
                    out.write("\n".join(lines) + "\n")


def install(dispatcher_class, path):
    """Wraps the dispatcher's WSGI entry point so every request signed with a role's key is
    recorded, with what its answer adds (a 404 for a missing object needs `s3:ListBucket`)."""
    recorder = Recorder(path)
    original = dispatcher_class.__call__

    def __call__(self, environ, start_response):
        found = recorder.requests_of(environ)
        if not found:
            return original(self, environ, start_response)
        key, requests, call = found
        statuses = []

        def capture(status, headers, *exc_info):
            statuses.append(status)
            return start_response(status, headers, *exc_info)

        response = original(self, environ, capture)
        if statuses and statuses[-1].startswith("404") and _credential(environ)[2] == "s3":
            requests = requests + if_missing(environ)
        recorder.write(key, requests, call)
        return response

    dispatcher_class.__call__ = __call__
    return recorder


def install_from_env(dispatcher_class):
    path = os.environ.get("SHEETLOG_IAM_RECORD")
    return install(dispatcher_class, path) if path else None
