"""The steps of `scripts/integ` that talk to a deployed stack, other than the test suites.

    python integ.py check MODE OUTPUTS_JSON
        The stack is the mode asked for, before anything is tested: its ApiAuthorization output
        is MODE's (IAM, JWT, COGNITO), and, for jwt and cognito, the API's open routes answer
        without a token (/health; /config.json naming the mode) while a data route refuses a
        request without a token, or with one that is not a JWT, with 401 (API Gateway's JWT
        authorizer). Standard library only.

    python integ.py users OUTPUTS_JSON USERS_JSON
        Two accounts in a cognito stack's user pool (UserPoolId from the outputs), as an
        administrator invites people: AdminCreateUser (no invitation email, email verified), then
        AdminSetUserPassword with Permanent=true, so they sign in without the new-password step.
        Random addresses under example.com and random passwords that meet the pool's policy;
        written to USERS_JSON (mode 0600) as {"a": {"email", "password"}, "b": {…}}, never
        printed. Needs boto3 (the project venv); credentials from the usual AWS environment, the
        region from the pool id (AWS_ENDPOINT_URL points it at an emulator).

OUTPUTS_JSON is the stack's outputs as one object ({"ApiUrl": …, "UserPoolId": …}).
"""

import json
import os
import secrets
import string
import sys
import urllib.error
import urllib.request
import uuid

AUTHORIZATION_OUTPUT = {"iam": "IAM", "jwt": "JWT", "cognito": "COGNITO"}


class CheckFailed(Exception):
    pass


def password() -> str:
    """A password the stack's pool accepts: 24 characters with lower and upper case, a digit and a symbol."""
    alphabet = string.ascii_letters + string.digits
    body = "".join(secrets.choice(alphabet) for _ in range(20))
    return f"Aa1!{body}"


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def check(mode: str, outputs: dict, fetch=get) -> list[str]:
    """What `check` verified, one line each; raises CheckFailed at the first thing that is wrong."""
    done = []
    want = AUTHORIZATION_OUTPUT[mode]
    if outputs.get("ApiAuthorization") != want:
        raise CheckFailed(f"the stack's ApiAuthorization output is {outputs.get('ApiAuthorization')!r}, not {want!r}")
    done.append(f"ApiAuthorization is {want}")
    if mode == "iam":
        return done
    api = outputs["ApiUrl"].rstrip("/")
    status, _ = fetch(f"{api}/health")
    if status != 200:
        raise CheckFailed(f"GET /health answered {status}, not 200")
    status, body = fetch(f"{api}/config.json")
    if status != 200 or json.loads(body).get("auth") != mode:
        raise CheckFailed(f"GET /config.json answered {status} {body[:200]!r}, not 200 with auth {mode!r}")
    done.append(f"the open routes answer without a token (/config.json says {mode})")
    route = f"{api}/logs/{uuid.uuid4()}"
    for token, what in ((None, "without a token"), ("not-a-jwt", "with a token that is not a JWT")):
        status, body = fetch(route, token)
        if status != 401:
            raise CheckFailed(f"GET /logs/<id> {what} answered {status} {body[:200]!r}, not 401")
        done.append(f"a data route {what} is refused with 401")
    return done


def create_users(outputs: dict, idp=None) -> dict:
    """Two confirmed accounts with permanent passwords in the stack's user pool."""
    pool = outputs["UserPoolId"]
    if idp is None:
        import boto3

        # A pool id starts with its region ("us-east-1_AbCdEf"); boto3 reads AWS_DEFAULT_REGION, not AWS_REGION.
        idp = boto3.client("cognito-idp", region_name=pool.split("_", 1)[0])
    tag = secrets.token_hex(4)
    users = {}
    for who in ("a", "b"):
        email = f"sheetlog-integ-{tag}-{who}@example.com"
        pw = password()
        idp.admin_create_user(
            UserPoolId=pool,
            Username=email,
            MessageAction="SUPPRESS",
            UserAttributes=[{"Name": "email", "Value": email}, {"Name": "email_verified", "Value": "true"}],
        )
        idp.admin_set_user_password(UserPoolId=pool, Username=email, Password=pw, Permanent=True)
        users[who] = {"email": email, "password": pw}
    return users


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "check" and argv[2] in AUTHORIZATION_OUTPUT:
        with open(argv[3]) as f:
            outputs = json.load(f)
        try:
            for line in check(argv[2], outputs):
                print(f"ok: {line}")
        except CheckFailed as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return 0
    if len(argv) == 4 and argv[1] == "users":
        with open(argv[2]) as f:
            outputs = json.load(f)
        users = create_users(outputs)
        fd = os.open(argv[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(users, f)
        print(f"created {users['a']['email']} and {users['b']['email']} in {outputs['UserPoolId']}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
