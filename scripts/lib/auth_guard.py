"""`scripts/deploy`'s guard for the authorization mode (docs/deploy.md, "Authorization modes").

    python auth_guard.py [cdk args...]

An existing deployment never changes its mode on an upgrade unless the mode is set explicitly:
without `authMode` in the `-c` arguments or the settings file (`SHEETLOG_CONFIG` or
`sheetlog.config.json`), an iam stack stays iam and a cognito stack stays cognito, whatever the
defaults are, and a jwt stack whose issuer settings went missing is refused rather than turned
into an iam one. The deployed mode is read from the stack's `ApiAuthorization` output, which every
sheetlog stack has (IAM, JWT, COGNITO).

Prints one line for scripts/deploy:
    ok <mode>            the settings name the mode (or the stack is new and they imply one)
    keep <mode>          existing stack, no explicit mode: deploy with -c authMode=<mode>
    ask -                a first deployment with no mode: ask (or use the default, iam)
    switch <from> <to>   the settings change a deployed stack's mode: confirm first
Exits 5 with a message on stderr when the settings would change the mode without saying so.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ephemeral_guard import context, settings_file  # noqa: E402

MODES = ("iam", "jwt", "cognito")
OUTPUT_TO_MODE = {"IAM": "iam", "JWT": "jwt", "COGNITO": "cognito"}


class Refused(Exception):
    """The settings would switch a deployed stack's mode without naming it."""


def requested(ctx: dict) -> tuple[str | None, str | None]:
    """(explicit authMode or None, the mode the other settings imply or None)."""
    explicit = str(ctx["authMode"]).strip() if ctx.get("authMode") not in (None, "") else None
    implied = "jwt" if ctx.get("jwtIssuer") or ctx.get("jwtAudience") else None
    return explicit, implied


def decide(explicit: str | None, implied: str | None, deployed: str | None, stack: str) -> tuple[str, str, str]:
    """The guard's answer: (action, mode or `-`, the `from` mode for a switch or `-`)."""
    if deployed is None:
        if explicit is not None:
            return ("ok", explicit, "-")
        if implied is not None:
            return ("ok", implied, "-")
        return ("ask", "-", "-")
    if explicit is not None:
        if explicit == deployed:
            return ("ok", explicit, "-")
        return ("switch", explicit, deployed)
    if implied is not None:
        if implied == deployed:
            return ("ok", implied, "-")
        raise Refused(
            f"stack {stack} is deployed with authMode={deployed}, and jwtIssuer/jwtAudience are set, which "
            f"would switch it to jwt. To switch deliberately, also set authMode=jwt (-c authMode=jwt or "
            f"--auth jwt); otherwise remove the jwt* settings. Nothing was changed."
        )
    if deployed == "jwt":
        raise Refused(
            f"stack {stack} is deployed with authMode=jwt, but jwtIssuer and jwtAudience are not set, so "
            f"this deploy would turn it into an iam stack. Set them as before (sheetlog.config.json, "
            f"docs/deploy.md), or set authMode explicitly to switch. Nothing was changed."
        )
    return ("keep", deployed, "-")


def deployed_mode(stack: str) -> str | None:
    """The deployed stack's mode, or None when the stack does not exist (or has no such output)."""
    import boto3
    from botocore.exceptions import ClientError

    # AWS_REGION as scripts/deploy exports it: botocore itself reads only AWS_DEFAULT_REGION.
    region = os.environ.get("AWS_REGION") or None
    try:
        stacks = boto3.client("cloudformation", region_name=region).describe_stacks(StackName=stack)["Stacks"]
    except ClientError as e:
        if "does not exist" in str(e):
            return None
        print(f"error: cannot tell how stack {stack} is deployed ({e}); nothing was changed", file=sys.stderr)
        sys.exit(5)
    live = [s for s in stacks if s.get("StackStatus") != "DELETE_COMPLETE"]
    if not live:
        return None
    outputs = {o.get("OutputKey"): o.get("OutputValue") for o in live[0].get("Outputs", [])}
    return OUTPUT_TO_MODE.get(outputs.get("ApiAuthorization", ""))


def main(argv: list[str]) -> int:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ctx = {**settings_file(root), **context(argv)}
    stack = str(ctx.get("stackName") or "sheetlog")
    explicit, implied = requested(ctx)
    if explicit is not None and explicit not in MODES:
        print(f"error: authMode={explicit}: expected one of {', '.join(MODES)}", file=sys.stderr)
        return 5
    try:
        action, mode, before = decide(explicit, implied, deployed_mode(stack), stack)
    except Refused as e:
        print(f"error: {e}", file=sys.stderr)
        return 5
    print(f"switch {before} {mode}" if action == "switch" else f"{action} {mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
