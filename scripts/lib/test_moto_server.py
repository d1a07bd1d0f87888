"""The emulator launcher's changes to moto keep moto's answers: run with the project's venv,
`.venv/bin/python -m unittest scripts/lib/test_moto_server.py` (scripts/test does).

Each test drives moto in-process through boto3 with the launcher's patches installed, and checks
what a client sees: query results and their order, a cancelled transaction leaving every item and
the table's stream as they were, a committed one applied, SQS retention still honoured; and that
Cognito's SRP sign-in, done by a real client (pycognito's AWSSRP, installed by scripts/test), signs
in with the right password only, and that an app client's flows are enforced.
"""

import base64
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.argv = sys.argv[:1]

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402
from moto.core.utils import unix_time  # noqa: E402

import moto_server  # noqa: E402  (installs the patches)
from pycognito.aws_srp import AWSSRP  # noqa: E402
from pycognito.exceptions import ForceChangePasswordException  # noqa: E402

REGION = "us-east-1"


def _table(ddb, name, stream=False):
    kwargs = {}
    if stream:
        kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    ddb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
        **kwargs,
    )


def _stream_records(table):
    """The table's stream records, as moto holds them (the in-process mock has no
    DescribeStream)."""
    from moto.dynamodb.models import dynamodb_backends

    shard = dynamodb_backends["123456789012"][REGION].get_table(table).stream_shard
    return [r.record["eventName"] for r in shard.items]


@mock_aws
class QueryTest(unittest.TestCase):
    def test_a_query_sees_one_partition_in_key_order(self):
        ddb = boto3.client("dynamodb", region_name=REGION)
        _table(ddb, "t")
        for pk in ("a", "b", "c"):
            for sk in (5, 1, 3, 2, 4):
                ddb.put_item(TableName="t", Item={"pk": {"S": pk}, "sk": {"N": str(sk)}, "v": {"S": pk}})
        got = ddb.query(
            TableName="t",
            KeyConditionExpression="pk = :p AND sk >= :s",
            ExpressionAttributeValues={":p": {"S": "b"}, ":s": {"N": "2"}},
        )["Items"]
        self.assertEqual([int(i["sk"]["N"]) for i in got], [2, 3, 4, 5])
        self.assertTrue(all(i["v"]["S"] == "b" for i in got))
        newest = ddb.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "c"}},
            ScanIndexForward=False,
            Limit=1,
        )["Items"]
        self.assertEqual(newest[0]["sk"]["N"], "5")
        empty = ddb.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "zz"}},
        )
        self.assertEqual(empty["Items"], [])
        # Paging goes on where the last page stopped.
        page = ddb.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "a"}},
            Limit=2,
        )
        rest = ddb.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "a"}},
            ExclusiveStartKey=page["LastEvaluatedKey"],
        )
        self.assertEqual([int(i["sk"]["N"]) for i in page["Items"] + rest["Items"]], [1, 2, 3, 4, 5])


@mock_aws
class TransactionTest(unittest.TestCase):
    def setUp(self):
        self.ddb = boto3.client("dynamodb", region_name=REGION)
        _table(self.ddb, "entries", stream=True)
        _table(self.ddb, "clients")
        self.ddb.put_item(TableName="clients", Item={"pk": {"S": "c"}, "sk": {"N": "1"}, "n": {"N": "1"}})
        self.ddb.put_item(TableName="clients", Item={"pk": {"S": "c"}, "sk": {"N": "2"}, "n": {"N": "7"}})

    def _items(self, table):
        items = self.ddb.scan(TableName=table)["Items"]
        return sorted((i["pk"]["S"], int(i["sk"]["N"]), i.get("n", {}).get("N")) for i in items)

    def _transact(self, last_condition_holds):
        self.ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "entries", "Item": {"pk": {"S": "log"}, "sk": {"N": "1"}},
                         "ConditionExpression": "attribute_not_exists(pk)"}},
                {"Update": {"TableName": "clients", "Key": {"pk": {"S": "c"}, "sk": {"N": "1"}},
                            "UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": {"N": "2"}}}},
                {"Delete": {"TableName": "clients", "Key": {"pk": {"S": "c"}, "sk": {"N": "2"}}}},
                {"Put": {"TableName": "clients", "Item": {"pk": {"S": "c"}, "sk": {"N": "3"}},
                         "ConditionExpression": "attribute_not_exists(pk)" if last_condition_holds
                         else "attribute_exists(pk)"}},
            ]
        )

    def test_a_cancelled_transaction_changes_nothing(self):
        before = (self._items("entries"), self._items("clients"))
        with self.assertRaises(self.ddb.exceptions.TransactionCanceledException):
            self._transact(last_condition_holds=False)
        self.assertEqual((self._items("entries"), self._items("clients")), before)
        self.assertEqual(_stream_records("entries"), [])

    def test_a_committed_transaction_applies_every_item(self):
        self._transact(last_condition_holds=True)
        self.assertEqual(self._items("entries"), [("log", 1, None)])
        self.assertEqual(self._items("clients"), [("c", 1, "2"), ("c", 3, None)])
        records = _stream_records("entries")
        self.assertEqual(records, ["INSERT"])
        # The same put again fails on its condition and leaves the one stream record.
        with self.assertRaises(self.ddb.exceptions.TransactionCanceledException):
            self._transact(last_condition_holds=True)
        self.assertEqual(len(_stream_records("entries")), 1)
        self.assertEqual(self._items("clients"), [("c", 1, "2"), ("c", 3, None)])


@mock_aws
class SqsRetentionTest(unittest.TestCase):
    def test_a_message_past_its_retention_is_not_received(self):
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(
            QueueName="q.fifo",
            Attributes={"FifoQueue": "true", "MessageRetentionPeriod": "60"},
        )["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="1")
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        self.assertEqual([m["Body"] for m in got], ["x"])
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
        sqs.send_message(QueueUrl=url, MessageBody="old", MessageGroupId="g", MessageDeduplicationId="2")
        from moto.sqs.models import sqs_backends

        queue = sqs_backends["123456789012"][REGION].get_queue("q.fifo")
        for m in queue._messages:
            m.sent_timestamp = int((unix_time() - 61) * 1000)
        self.assertNotIn("Messages", sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10))


@mock_aws
class SqsLongPollTest(unittest.TestCase):
    def setUp(self):
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.url = self.sqs.create_queue(QueueName="lp.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]

    def _send(self, body, group="g"):
        self.sqs.send_message(QueueUrl=self.url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=body)

    def _receive(self, wait):
        got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=wait)
        return got.get("Messages", [])

    def test_a_group_freed_during_a_long_poll_is_delivered_before_the_wait_ends(self):
        self._send("a")
        first = self._receive(0)
        self.assertEqual([m["Body"] for m in first], ["a"])
        self._send("b")
        import threading

        def free():
            time.sleep(0.3)
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=first[0]["ReceiptHandle"])

        t = threading.Thread(target=free)
        t.start()
        t0 = time.time()
        got = self._receive(5)
        took = time.time() - t0
        t.join()
        self.assertEqual([m["Body"] for m in got], ["b"])
        self.assertLess(took, 3, "the long poll waited out its time with the group free")

    def test_a_long_poll_still_holds_back_a_group_in_flight_and_waits_its_time(self):
        self._send("a")
        self.assertEqual(len(self._receive(0)), 1)
        self._send("b")
        t0 = time.time()
        self.assertEqual(self._receive(1), [])
        self.assertGreaterEqual(time.time() - t0, 0.9)
        # Another group is not held back.
        self._send("c", group="h")
        self.assertEqual([m["Body"] for m in self._receive(1)], ["c"])


class DispatchTest(unittest.TestCase):
    def test_the_backend_for_a_host_is_the_same_as_uncached(self):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication

        app = DomainDispatcherApplication(create_app=lambda backend: None)
        hosts = [
            "dynamodb.us-east-1.amazonaws.com",
            "streams.dynamodb.us-east-1.amazonaws.com",
            "sqs.us-east-1.amazonaws.com",
            "s3.us-east-1.amazonaws.com",
            "bucket.s3.amazonaws.com",
            "cognito-idp.us-east-1.amazonaws.com",
            "sts.amazonaws.com",
            "moto_api",
            "dynamodb",
            None,
        ]
        for host in hosts * 2:
            self.assertEqual(
                app.get_backend_for_host(host),
                moto_server._backend_for_host(app, host),
                host,
            )
        self.assertIn("dynamodb.us-east-1.amazonaws.com", moto_server._backends_by_host)


@mock_aws
class CognitoSrpTest(unittest.TestCase):
    PASSWORD = "Right-password-1"

    def setUp(self):
        self.idp = boto3.client("cognito-idp", region_name=REGION)
        self.pool = self.idp.create_user_pool(PoolName="p")["UserPool"]["Id"]
        self.client_id = self._client(["ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"])
        self._user("ann@example.com", self.PASSWORD, permanent=True)

    def _client(self, flows):
        return self.idp.create_user_pool_client(
            UserPoolId=self.pool, ClientName="c", GenerateSecret=False, ExplicitAuthFlows=flows
        )["UserPoolClient"]["ClientId"]

    def _user(self, name, password, permanent):
        self.idp.admin_create_user(UserPoolId=self.pool, Username=name, MessageAction="SUPPRESS",
                                   TemporaryPassword=password)
        if permanent:
            self.idp.admin_set_user_password(UserPoolId=self.pool, Username=name, Password=password,
                                             Permanent=True)

    def _srp(self, name, password):
        return AWSSRP(username=name, password=password, pool_id=self.pool, client_id=self.client_id,
                      client=self.idp)

    def test_the_right_password_signs_in(self):
        tokens = self._srp("ann@example.com", self.PASSWORD).authenticate_user()
        result = tokens["AuthenticationResult"]
        self.assertTrue(result["AccessToken"])
        # The refresh token it got works (the client allows REFRESH_TOKEN_AUTH).
        again = self.idp.initiate_auth(ClientId=self.client_id, AuthFlow="REFRESH_TOKEN_AUTH",
                                       AuthParameters={"REFRESH_TOKEN": result["RefreshToken"]})
        self.assertTrue(again["AuthenticationResult"]["AccessToken"])

    def test_a_wrong_password_is_refused(self):
        for wrong in ("Right-password-2", "", self.PASSWORD.lower()):
            with self.assertRaises(self.idp.exceptions.NotAuthorizedException, msg=wrong):
                self._srp("ann@example.com", wrong).authenticate_user()

    def test_an_invited_user_must_choose_a_password_with_the_right_temporary_one(self):
        self._user("bo@example.com", "Temporary-pass-1", permanent=False)
        with self.assertRaises(self.idp.exceptions.NotAuthorizedException):
            self._srp("bo@example.com", "Temporary-pass-2").authenticate_user()
        with self.assertRaises(ForceChangePasswordException):
            self._srp("bo@example.com", "Temporary-pass-1").authenticate_user()
        # As Cognito, the challenge names the user's attributes (amazon-cognito-identity-js reads them).
        srp = self._srp("bo@example.com", "Temporary-pass-1")
        params = srp.get_auth_params()
        challenge = self.idp.initiate_auth(ClientId=self.client_id, AuthFlow="USER_SRP_AUTH", AuthParameters=params)
        answer = self.idp.respond_to_auth_challenge(
            ClientId=self.client_id, ChallengeName="PASSWORD_VERIFIER",
            ChallengeResponses=srp.process_challenge(challenge["ChallengeParameters"], params))
        self.assertEqual(answer["ChallengeName"], "NEW_PASSWORD_REQUIRED")
        self.assertEqual(json.loads(answer["ChallengeParameters"]["requiredAttributes"]), [])
        self.assertIsInstance(json.loads(answer["ChallengeParameters"]["userAttributes"]), dict)
        done = self.idp.respond_to_auth_challenge(
            ClientId=self.client_id, ChallengeName="NEW_PASSWORD_REQUIRED", Session=answer["Session"],
            ChallengeResponses={"USERNAME": "bo@example.com", "NEW_PASSWORD": "Own-password-1"})
        self.assertTrue(done["AuthenticationResult"]["AccessToken"])
        self._srp("bo@example.com", "Own-password-1").authenticate_user()

    def _challenge(self, name):
        srp = self._srp(name, self.PASSWORD)
        params = srp.get_auth_params()
        challenge = self.idp.initiate_auth(ClientId=self.client_id, AuthFlow="USER_SRP_AUTH",
                                           AuthParameters=params)
        return srp.process_challenge(challenge["ChallengeParameters"], params)

    def _respond(self, responses):
        return self.idp.respond_to_auth_challenge(ClientId=self.client_id, ChallengeName="PASSWORD_VERIFIER",
                                                  ChallengeResponses=responses)

    def test_a_proof_answers_one_challenge_once(self):
        responses = self._challenge("ann@example.com")
        self.assertTrue(self._respond(responses)["AuthenticationResult"]["AccessToken"])
        with self.assertRaises(self.idp.exceptions.NotAuthorizedException):
            self._respond(responses)
        # A signature that is off by one bit is refused.
        responses = self._challenge("ann@example.com")
        sig = bytearray(base64.b64decode(responses["PASSWORD_CLAIM_SIGNATURE"]))
        sig[0] ^= 1
        with self.assertRaises(self.idp.exceptions.NotAuthorizedException):
            self._respond({**responses, "PASSWORD_CLAIM_SIGNATURE": base64.b64encode(sig).decode()})

    def test_a_proof_signs_in_only_the_user_it_was_made_for(self):
        self._user("cy@example.com", "Other-password-1", permanent=True)
        responses = self._challenge("ann@example.com")
        with self.assertRaises(self.idp.exceptions.NotAuthorizedException):
            self._respond({**responses, "USERNAME": "cy@example.com"})

    def test_padding_matches_the_clients(self):
        # padHex: big-endian, a leading zero byte when the top bit is set, "00" for zero.
        self.assertEqual(moto_server.srp_pad(0).hex(), "00")
        self.assertEqual(moto_server.srp_pad(0x7F).hex(), "7f")
        self.assertEqual(moto_server.srp_pad(0x80).hex(), "0080")
        self.assertEqual(moto_server.srp_pad(0x1234).hex(), "1234")
        self.assertEqual(moto_server.srp_pad(0xABC).hex(), "0abc")
        from pycognito.aws_srp import pad_hex

        for n in (1, 0x80, 0xFFFF, moto_server.SRP_N, moto_server.SRP_N - 12345):
            self.assertEqual(moto_server.srp_pad(n).hex(), pad_hex(n).lower())

    def test_only_the_clients_flows_are_allowed(self):
        with self.assertRaises(self.idp.exceptions.InvalidParameterException):
            self.idp.initiate_auth(ClientId=self.client_id, AuthFlow="USER_PASSWORD_AUTH",
                                   AuthParameters={"USERNAME": "ann@example.com", "PASSWORD": self.PASSWORD})
        password_client = self._client(["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"])
        ok = self.idp.initiate_auth(ClientId=password_client, AuthFlow="USER_PASSWORD_AUTH",
                                    AuthParameters={"USERNAME": "ann@example.com", "PASSWORD": self.PASSWORD})
        self.assertTrue(ok["AuthenticationResult"]["AccessToken"])
        with self.assertRaises(self.idp.exceptions.InvalidParameterException):
            AWSSRP(username="ann@example.com", password=self.PASSWORD, pool_id=self.pool,
                   client_id=password_client, client=self.idp).authenticate_user()


if __name__ == "__main__":
    time.tzset()
    unittest.main()


class IamRecorderTest(unittest.TestCase):
    """The recorder (iam_recorder.py) in front of a real moto server: each call a role's key signs
    becomes the IAM actions and resources AWS authorizes it by; other keys are not recorded."""

    KEY = "role:sheetlog-api:p"

    @classmethod
    def setUpClass(cls):
        import tempfile

        import iam_recorder
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication
        from moto.server import ThreadedMotoServer

        cls.dir = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.dir.name, "calls.jsonl")
        cls.original = DomainDispatcherApplication.__call__
        iam_recorder.install(DomainDispatcherApplication, cls.path)
        cls.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        cls.server.start()
        host, port = cls.server.get_host_and_port()
        cls.endpoint = f"http://{host}:{port}"

    @classmethod
    def tearDownClass(cls):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication

        cls.server.stop()
        DomainDispatcherApplication.__call__ = cls.original
        cls.dir.cleanup()

    def client(self, service, key=KEY):
        from botocore.config import Config

        return boto3.client(service, region_name=REGION, endpoint_url=self.endpoint,
                            aws_access_key_id=key, aws_secret_access_key="x",
                            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))

    def recorded(self):
        with open(self.path, encoding="utf-8") as f:
            return {(c["key"], c["action"], c["resource"]) for c in map(json.loads, f)}

    def expect(self, *calls):
        got = self.recorded()
        for action, resource in calls:
            self.assertIn((self.KEY, action, resource), got)

    def test_dynamodb_calls_need_each_items_action_on_its_table_or_index(self):
        setup = self.client("dynamodb", key="test")
        setup.create_table(
            TableName="a", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"},
                                  {"AttributeName": "g", "AttributeType": "S"}],
            GlobalSecondaryIndexes=[{"IndexName": "byG", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                     "Projection": {"ProjectionType": "KEYS_ONLY"}}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
        setup.create_table(TableName="b", BillingMode="PAY_PER_REQUEST",
                           KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                           AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
        ddb = self.client("dynamodb")
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": "a", "Item": {"k": {"S": "1"}, "g": {"S": "x"}}}},
            {"Update": {"TableName": "b", "Key": {"k": {"S": "1"}}, "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": {"S": "v"}}}},
        ])
        ddb.query(TableName="a", IndexName="byG", KeyConditionExpression="g = :g",
                  ExpressionAttributeValues={":g": {"S": "x"}})
        ddb.batch_write_item(RequestItems={"b": [{"DeleteRequest": {"Key": {"k": {"S": "1"}}}}]})
        arn = setup.describe_table(TableName="a")["Table"]["LatestStreamArn"]
        streams = self.client("dynamodbstreams")
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        streams.get_records(ShardIterator=it["ShardIterator"])
        table = f"arn:aws:dynamodb:{REGION}:123456789012:table"
        self.expect(("dynamodb:PutItem", f"{table}/a"), ("dynamodb:UpdateItem", f"{table}/b"),
                    ("dynamodb:Query", f"{table}/a/index/byG"), ("dynamodb:BatchWriteItem", f"{table}/b"),
                    ("dynamodb:DescribeStream", arn), ("dynamodb:GetShardIterator", arn),
                    ("dynamodb:GetRecords", arn))
        self.assertNotIn("dynamodb:TransactWriteItems", {a for _, a, _ in self.recorded()})
        self.assertNotIn("test", {k for k, _, _ in self.recorded()}, "the set-up's key is not recorded")

    def test_s3_calls_need_the_operations_actions_and_a_presigned_url_its_signers(self):
        import urllib.request

        self.client("s3", key="test").create_bucket(Bucket="bkt")
        s3 = self.client("s3")
        s3.put_object(Bucket="bkt", Key="payloads/a", Body=b"x", Tagging="t=1")
        s3.copy_object(Bucket="bkt", Key="payloads/b", CopySource="bkt/payloads/a",
                       Tagging="t=2", TaggingDirective="REPLACE")
        s3.head_object(Bucket="bkt", Key="payloads/b")
        s3.list_objects_v2(Bucket="bkt", Prefix="payloads/")
        s3.delete_objects(Bucket="bkt", Delete={"Objects": [{"Key": "payloads/a"}, {"Key": "payloads/b"}]})
        url = s3.generate_presigned_url("put_object", Params={"Bucket": "bkt", "Key": "pushes/c"})
        # A browser's CORS preflight of the URL authorizes nothing (S3 answers it from CORS rules).
        try:
            urllib.request.urlopen(urllib.request.Request(
                url, method="OPTIONS", headers={"Origin": "http://x", "Access-Control-Request-Method": "PUT"}))
        except urllib.error.HTTPError:
            pass
        self.assertFalse([a for _, a, _ in self.recorded() if "OPTIONS" in a])
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=b"y", method="PUT")).read()
        except urllib.error.HTTPError as e:
            raise AssertionError(url + " " + e.read().decode()) from e
        self.expect(("s3:PutObject", "arn:aws:s3:::bkt/payloads/a"),
                    ("s3:PutObjectTagging", "arn:aws:s3:::bkt/payloads/a"),
                    ("s3:PutObject", "arn:aws:s3:::bkt/payloads/b"),
                    ("s3:GetObject", "arn:aws:s3:::bkt/payloads/a"),
                    ("s3:PutObjectTagging", "arn:aws:s3:::bkt/payloads/b"),
                    ("s3:GetObject", "arn:aws:s3:::bkt/payloads/b"),
                    ("s3:ListBucket", "arn:aws:s3:::bkt"),
                    ("s3:DeleteObject", "arn:aws:s3:::bkt/payloads/a"),
                    ("s3:DeleteObject", "arn:aws:s3:::bkt/payloads/b"),
                    ("s3:PutObject", "arn:aws:s3:::bkt/pushes/c"))

    def test_a_read_answered_404_needs_list_bucket_and_one_answered_200_does_not(self):
        from botocore.exceptions import ClientError

        setup = self.client("s3", key="test")
        for bucket in ("found-bkt", "missing-bkt"):
            setup.create_bucket(Bucket=bucket)
        setup.put_object(Bucket="found-bkt", Key="k", Body=b"x")
        s3 = self.client("s3")
        s3.head_object(Bucket="found-bkt", Key="k")
        with self.assertRaises(ClientError):
            s3.get_object(Bucket="missing-bkt", Key="k")
        got = self.recorded()
        self.assertIn((self.KEY, "s3:GetObject", "arn:aws:s3:::missing-bkt/k"), got)
        self.assertIn((self.KEY, "s3:ListBucket", "arn:aws:s3:::missing-bkt"), got)
        self.assertNotIn((self.KEY, "s3:ListBucket", "arn:aws:s3:::found-bkt"), got)

    def test_sqs_batches_need_the_single_message_action_and_cognito_the_pools_arn(self):
        url = self.client("sqs", key="test").create_queue(QueueName="q")["QueueUrl"]
        sqs = self.client("sqs")
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "m"}])
        got = sqs.receive_message(QueueUrl=url)["Messages"][0]
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "1", "ReceiptHandle": got["ReceiptHandle"]}])
        pool = self.client("cognito-idp", key="test").create_user_pool(PoolName="p")["UserPool"]["Id"]
        self.client("cognito-idp").list_users(UserPoolId=pool, Filter='sub = "x"')
        queue = f"arn:aws:sqs:{REGION}:123456789012:q"
        self.expect(("sqs:SendMessage", queue), ("sqs:ReceiveMessage", queue), ("sqs:DeleteMessage", queue),
                    ("cognito-idp:ListUsers", f"arn:aws:cognito-idp:{REGION}:123456789012:userpool/{pool}"))
