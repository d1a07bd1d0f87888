"""Tests of scripts/lib/integ.py, the steps of `scripts/integ` around its test suites: the check
that a stack is the mode asked for (against canned answers), and the two accounts of a cognito run
(against moto's user pool, when moto is installed: the project venv; ./scripts/test runs it so).

    .venv/bin/python -m unittest test_integ     (from scripts/lib)
"""

import json
import os
import tempfile
import unittest
from contextlib import redirect_stdout
from io import StringIO
from unittest import mock

import integ
from integ import CheckFailed, check

try:
    import boto3
    from moto import mock_aws
except ImportError:  # pragma: no cover - system python without the venv
    mock_aws = None

API = "https://abc.execute-api.eu-west-1.amazonaws.com/"


def gateway(mode: str, data_route: int = 401):
    """A stand-in for the deployed API's answers to the check's requests."""

    def fetch(url: str, token: str | None = None) -> tuple[int, bytes]:
        if url.endswith("/health"):
            return 200, b'{"status":"ok"}'
        if url.endswith("/config.json"):
            return 200, json.dumps({"auth": mode}).encode()
        assert "//logs/" not in url, url
        return data_route, b'{"message":"Unauthorized"}'

    return fetch


class Check(unittest.TestCase):
    def test_each_mode_is_recognised_by_its_output_and_its_answers(self):
        self.assertEqual(check("iam", {"ApiAuthorization": "IAM", "ApiUrl": API}, fetch=None), ["ApiAuthorization is IAM"])
        for mode, output in (("jwt", "JWT"), ("cognito", "COGNITO")):
            done = check(mode, {"ApiAuthorization": output, "ApiUrl": API}, fetch=gateway(mode))
            self.assertEqual(len(done), 4, done)

    def test_a_stack_of_another_mode_is_refused(self):
        with self.assertRaisesRegex(CheckFailed, "ApiAuthorization output is 'IAM', not 'COGNITO'"):
            check("cognito", {"ApiAuthorization": "IAM", "ApiUrl": API}, fetch=gateway("cognito"))
        with self.assertRaisesRegex(CheckFailed, "/config.json answered 200"):
            check("cognito", {"ApiAuthorization": "COGNITO", "ApiUrl": API}, fetch=gateway("jwt"))

    def test_a_data_route_open_without_a_token_is_refused(self):
        with self.assertRaisesRegex(CheckFailed, "without a token answered 200"):
            check("jwt", {"ApiAuthorization": "JWT", "ApiUrl": API}, fetch=gateway("jwt", data_route=200))

    def test_passwords_meet_the_pools_policy(self):
        for _ in range(50):
            pw = integ.password()
            self.assertGreaterEqual(len(pw), 12)
            for kind in (str.islower, str.isupper, str.isdigit, lambda c: not c.isalnum()):
                self.assertTrue(any(kind(c) for c in pw), pw)


@unittest.skipIf(mock_aws is None, "moto is not installed (use the project venv)")
class Users(unittest.TestCase):
    def test_two_confirmed_accounts_with_permanent_passwords_written_not_printed(self):
        env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
        with mock.patch.dict(os.environ, env), mock_aws():
            idp = boto3.client("cognito-idp", region_name="eu-west-1")
            pool = idp.create_user_pool(PoolName="p", UsernameAttributes=["email"])["UserPool"]["Id"]
            with tempfile.TemporaryDirectory() as d:
                outputs = os.path.join(d, "outputs.json")
                users_file = os.path.join(d, "users.json")
                with open(outputs, "w") as f:
                    json.dump({"UserPoolId": pool, "ApiUrl": API}, f)
                out = StringIO()
                with redirect_stdout(out):
                    self.assertEqual(integ.main(["integ.py", "users", outputs, users_file]), 0)
                self.assertEqual(os.stat(users_file).st_mode & 0o777, 0o600)
                with open(users_file) as f:
                    users = json.load(f)
            self.assertNotEqual(users["a"]["email"], users["b"]["email"])
            for who in users.values():
                self.assertNotIn(who["password"], out.getvalue())
                user = idp.admin_get_user(UserPoolId=pool, Username=who["email"])
                self.assertEqual(user["UserStatus"], "CONFIRMED")
                attrs = {a["Name"]: a["Value"] for a in user["UserAttributes"]}
                self.assertEqual(attrs["email"], who["email"])
                self.assertEqual(attrs["email_verified"], "true")


if __name__ == "__main__":
    unittest.main()
