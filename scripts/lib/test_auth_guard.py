"""Tests of scripts/lib/auth_guard.py: an existing deployment keeps its authorization mode on an
upgrade unless the mode is set explicitly. The decision table, then the whole guard against a
deployed stack on the moto emulator (its CloudFormation keeps a stack's outputs), when moto is
installed (the project venv; cdk/test/upgrade-safety.test.ts runs this file with it).

    .venv/bin/python -m unittest test_auth_guard     (from scripts/lib)
"""

import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from unittest import mock

import auth_guard
from auth_guard import Refused, decide

try:
    from moto import mock_aws
except ImportError:  # pragma: no cover - system python without the venv
    mock_aws = None


class Decide(unittest.TestCase):
    def test_a_first_deployment_uses_the_named_mode_or_asks(self):
        self.assertEqual(decide("cognito", None, None, "s"), ("ok", "cognito", "-"))
        self.assertEqual(decide(None, "jwt", None, "s"), ("ok", "jwt", "-"))
        self.assertEqual(decide(None, None, None, "s"), ("ask", "-", "-"))

    def test_an_upgrade_without_a_mode_keeps_the_deployed_one(self):
        self.assertEqual(decide(None, None, "cognito", "s"), ("keep", "cognito", "-"))
        self.assertEqual(decide(None, None, "iam", "s"), ("keep", "iam", "-"))
        self.assertEqual(decide(None, "jwt", "jwt", "s"), ("ok", "jwt", "-"))

    def test_a_jwt_stack_whose_issuer_settings_went_missing_is_refused(self):
        with self.assertRaisesRegex(Refused, "deployed with authMode=jwt, but jwtIssuer and jwtAudience are not set"):
            decide(None, None, "jwt", "s")

    def test_issuer_settings_alone_do_not_switch_a_stack_to_jwt(self):
        for deployed in ("iam", "cognito"):
            with self.assertRaisesRegex(Refused, "also set authMode=jwt"):
                decide(None, "jwt", deployed, "s")

    def test_an_explicit_mode_is_kept_or_is_a_switch_to_confirm(self):
        self.assertEqual(decide("cognito", None, "cognito", "s"), ("ok", "cognito", "-"))
        self.assertEqual(decide("cognito", None, "iam", "s"), ("switch", "cognito", "iam"))
        self.assertEqual(decide("iam", None, "cognito", "s"), ("switch", "iam", "cognito"))
        self.assertEqual(decide("jwt", "jwt", "iam", "s"), ("switch", "jwt", "iam"))


TEMPLATE = {
    "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
    "Outputs": {"ApiAuthorization": {"Value": "PLACEHOLDER"}},
}


@unittest.skipIf(mock_aws is None, "moto is not installed (run with the project venv)")
class AgainstADeployedStack(unittest.TestCase):
    """The guard end to end: settings file and -c arguments in, one line (or a refusal) out."""

    def setUp(self):
        self.mock = mock_aws()
        self.mock.start()
        self.addCleanup(self.mock.stop)
        self.env = mock.patch.dict(
            os.environ,
            {
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "eu-west-1",
                "AWS_REGION": "eu-west-1",
            },
        )
        self.env.start()
        self.addCleanup(self.env.stop)
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
            os.environ.pop(name, None)
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.settings = os.path.join(self.dir.name, "sheetlog.config.json")
        os.environ["SHEETLOG_CONFIG"] = self.settings

    def deploy(self, stack: str, output: str) -> None:
        import boto3

        body = json.loads(json.dumps(TEMPLATE))
        body["Outputs"]["ApiAuthorization"]["Value"] = output
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName=stack, TemplateBody=json.dumps(body)
        )

    def guard(self, *args: str, settings: dict | None = None) -> tuple[int, str, str]:
        if settings is not None:
            with open(self.settings, "w", encoding="utf-8") as f:
                json.dump(settings, f)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = auth_guard.main(list(args))
        return code, out.getvalue().strip(), err.getvalue()

    def test_a_deployed_cognito_stack_stays_cognito_on_an_upgrade_without_settings(self):
        self.deploy("sheetlog", "COGNITO")
        self.assertEqual(self.guard(), (0, "keep cognito", ""))

    def test_a_deployed_iam_stack_stays_iam_even_when_asked_nothing(self):
        self.deploy("sheets-eu", "IAM")
        self.assertEqual(self.guard("-c", "stackName=sheets-eu"), (0, "keep iam", ""))

    def test_the_stack_name_from_the_settings_file_is_the_one_looked_up(self):
        self.deploy("from-file", "COGNITO")
        self.assertEqual(self.guard(settings={"stackName": "from-file"}), (0, "keep cognito", ""))
        self.assertEqual(self.guard(settings={"stackName": "other"}), (0, "ask -", ""))

    def test_an_explicit_different_mode_is_reported_as_a_switch(self):
        self.deploy("sheetlog", "IAM")
        self.assertEqual(self.guard("-c", "authMode=cognito"), (0, "switch iam cognito", ""))
        self.assertEqual(self.guard(settings={"authMode": "cognito"}), (0, "switch iam cognito", ""))
        self.assertEqual(self.guard("--context=authMode=iam"), (0, "ok iam", ""))

    def test_a_jwt_stack_missing_its_issuer_is_refused_not_turned_into_iam(self):
        self.deploy("sheetlog", "JWT")
        code, out, err = self.guard()
        self.assertEqual((code, out), (5, ""))
        self.assertIn("would turn it into an iam stack", err)
        self.assertEqual(
            self.guard(settings={"jwtIssuer": "https://i.example.com", "jwtAudience": "c"}), (0, "ok jwt", "")
        )

    def test_a_first_deployment_asks_unless_the_mode_is_given(self):
        self.assertEqual(self.guard(), (0, "ask -", ""))
        self.assertEqual(self.guard("-c", "authMode=cognito"), (0, "ok cognito", ""))

    def test_an_unknown_mode_is_refused(self):
        code, _, err = self.guard("-c", "authMode=oidc")
        self.assertEqual(code, 5)
        self.assertIn("expected one of iam, jwt, cognito", err)


FAKE_TOOL = """#!/bin/sh
# Records the call instead of running the real tool (no deploy, no npm install).
printf '%s\\n' "$(basename "$0") $*" >>"$SHEETLOG_TEST_CALLS"
"""


@unittest.skipIf(mock_aws is None, "moto is not installed (run with the project venv)")
class DeployScript(unittest.TestCase):
    """scripts/deploy itself, up to its `npx cdk deploy`: the arguments it deploys with.

    AWS is moto in server mode (STS, SSM's bootstrap parameter, CloudFormation's stacks); `npx`
    and `npm` are stand-ins that record their arguments, so nothing is built or deployed. The
    script runs without a terminal, as in automation.
    """

    @classmethod
    def setUpClass(cls):
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        cls.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
        cls.server.start()
        host, port = cls.server.get_host_and_port()
        cls.endpoint = f"http://{host}:{port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        import boto3
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")).read()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        bin_dir = os.path.join(self.dir.name, "bin")
        os.mkdir(bin_dir)
        for tool in ("npx", "npm"):
            path = os.path.join(bin_dir, tool)
            with open(path, "w", encoding="utf-8") as f:
                f.write(FAKE_TOOL)
            os.chmod(path, 0o755)
        self.calls = os.path.join(self.dir.name, "calls")
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "SHEETLOG_CONFIG"
        }
        self.env.update(
            {
                "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": "eu-west-1",
                "SHEETLOG_CONFIG": os.path.join(self.dir.name, "sheetlog.config.json"),
                "SHEETLOG_TEST_CALLS": self.calls,
            }
        )
        kw = {"region_name": "eu-west-1", "endpoint_url": self.endpoint,
              "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        boto3.client("ssm", **kw).put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
        self.cfn = boto3.client("cloudformation", **kw)

    def deployed(self, output: str) -> None:
        body = json.loads(json.dumps(TEMPLATE))
        body["Outputs"]["ApiAuthorization"]["Value"] = output
        self.cfn.create_stack(StackName="sheetlog", TemplateBody=json.dumps(body))

    def deploy(self, *args: str) -> tuple[int, str, str]:
        import subprocess

        script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "deploy")
        # An explicit architecture skips the script's probe of the Rust targets (rustup).
        run = subprocess.run(
            [script, *args, "-c", "architecture=arm64"], env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300
        )
        calls = ""
        if os.path.exists(self.calls):
            with open(self.calls, encoding="utf-8") as f:
                calls = f.read()
        cdk = [c for c in calls.splitlines() if c.startswith("npx cdk ")]
        return run.returncode, "\n".join(cdk), run.stderr

    def test_an_upgrade_keeps_the_deployed_cognito_mode(self):
        self.deployed("COGNITO")
        code, cdk, err = self.deploy("--yes")
        self.assertEqual(code, 0, err)
        self.assertIn("-c authMode=cognito", cdk)
        self.assertIn("cdk deploy", cdk)

    def test_a_first_deployment_without_a_terminal_uses_the_mode_given_or_iam(self):
        code, cdk, err = self.deploy("--yes", "--auth", "cognito")
        self.assertEqual(code, 0, err)
        self.assertIn("-c authMode=cognito", cdk)
        os.remove(self.calls)
        code, cdk, err = self.deploy("--yes")
        self.assertEqual(code, 0, err)
        self.assertIn("-c authMode=iam", cdk)

    def test_a_switch_without_a_terminal_needs_yes(self):
        self.deployed("IAM")
        code, cdk, err = self.deploy("--auth", "cognito")
        self.assertNotEqual(code, 0)
        self.assertIn("needs --yes", err)
        self.assertEqual(cdk, "")
        code, cdk, err = self.deploy("--auth", "cognito", "--yes")
        self.assertEqual(code, 0, err)
        self.assertIn("switches it to authMode=cognito", err)
        self.assertIn("-c authMode=cognito", cdk)

    def test_a_jwt_stack_without_its_issuer_is_not_deployed(self):
        self.deployed("JWT")
        code, cdk, err = self.deploy("--yes")
        self.assertEqual(code, 5, err)
        self.assertIn("would turn it into an iam stack", err)
        self.assertEqual(cdk, "")


if __name__ == "__main__":
    unittest.main()
