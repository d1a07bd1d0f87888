"""`scripts/deploy`'s guard for `ephemeral=true` (docs/deploy.md, "Sandbox stacks").

    python ephemeral_guard.py [cdk args...]

Reads `-c`/`--context key=value` arguments (and the settings file, `SHEETLOG_CONFIG` or
`sheetlog.config.json`, for keys they do not set). Unless `ephemeral` is true and
`ephemeralConfirm` is unset, prints nothing. Otherwise asks CloudFormation whether the stack
exists: for a new stack prints the confirmation to add (`ephemeralConfirm=<stack>`); for an
existing one exits 4 with a message, so its tables are switched to DELETE only on an explicit
`-c ephemeralConfirm=<stack>`.
"""

import json
import os
import sys


def context(argv: list[str]) -> dict:
    out = {}
    it = iter(argv)
    for a in it:
        if a in ("-c", "--context"):
            kv = next(it, "")
        elif a.startswith("--context="):
            kv = a[len("--context="):]
        else:
            continue
        if "=" in kv:
            k, v = kv.split("=", 1)
            out[k] = v
    return out


def settings_file(root: str) -> dict:
    path = os.environ.get("SHEETLOG_CONFIG") or os.path.join(root, "sheetlog.config.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ctx = {**settings_file(root), **context(sys.argv[1:])}
    if str(ctx.get("ephemeral", "false")).strip().lower() != "true" or ctx.get("ephemeralConfirm"):
        return
    stack = str(ctx.get("stackName", "sheetlog"))
    import boto3
    from botocore.exceptions import ClientError

    try:
        stacks = boto3.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except ClientError as e:
        if "does not exist" in str(e):
            stacks = []
        else:
            sys.exit(f"error: cannot tell whether stack {stack} exists ({e}); nothing was changed")
    live = [s for s in stacks if s.get("StackStatus") != "DELETE_COMPLETE"]
    if live:
        print(
            f"error: stack {stack} already exists ({live[0]['StackStatus']}); ephemeral=true would let "
            f"its tables and bucket be deleted with it. If it holds nothing you need, confirm with "
            f"-c ephemeralConfirm={stack}; nothing was changed",
            file=sys.stderr,
        )
        sys.exit(4)
    print(f"ephemeralConfirm={stack}")


if __name__ == "__main__":
    main()
