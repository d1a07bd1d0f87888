"""Where `scripts/deploy` would deploy, checked before anything is built.

Prints one JSON object: {"account", "region", "arn", "bootstrapVersion"} (bootstrapVersion is
null when the account/region has no CDK bootstrap stack, "unknown" when it cannot be read).
Exits 3 with a message on stderr when there are no usable credentials or no region; the
credentials and region come from the standard AWS chain (AWS_PROFILE, AWS_ACCESS_KEY_ID/…,
SSO, the instance role; AWS_REGION or the profile's region).

    python aws_target.py [QUALIFIER]     (the CDK bootstrap qualifier, default hnb659fds)
"""

import json
import os
import sys

try:
    import boto3
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ProfileNotFound,
        TokenRetrievalError,
    )
except ImportError:  # pragma: no cover - the script installs boto3 first
    sys.exit("error: boto3 is missing from the project venv; run scripts/deploy again")

CREDENTIALS_HELP = (
    "No AWS credentials found, so there is nowhere to deploy to. Give the standard AWS "
    "environment one of: AWS_PROFILE=<profile> (after `aws configure` or `aws sso login`), "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or an instance role; "
    "then run scripts/deploy again. Nothing was built or changed."
)


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(3)


def main() -> None:
    qualifier = sys.argv[1] if len(sys.argv) > 1 else "hnb659fds"
    try:
        session = boto3.Session()
    except ProfileNotFound as e:
        fail(f"{e}. Check AWS_PROFILE; nothing was built or changed.")
    # AWS_REGION first, as the CDK CLI and the AWS SDKs read it; botocore itself only knows
    # AWS_DEFAULT_REGION and the profile's region.
    region = os.environ.get("AWS_REGION") or session.region_name
    if not region:
        fail(
            "No AWS region set: set AWS_REGION (or a region in your AWS profile) to the region "
            "to deploy to. Nothing was built or changed."
        )
    try:
        ident = session.client("sts", region_name=region).get_caller_identity()
    except (NoCredentialsError, PartialCredentialsError):
        fail(CREDENTIALS_HELP)
    except TokenRetrievalError as e:
        fail(f"Your AWS SSO session has expired ({e}); run `aws sso login` and try again.")
    except ClientError as e:
        fail(f"AWS rejected the credentials ({e}). Nothing was built or changed.")
    except NoRegionError:
        fail("No AWS region set: set AWS_REGION. Nothing was built or changed.")
    except BotoCoreError as e:
        fail(f"Could not reach AWS to check the credentials ({e}). Nothing was built or changed.")

    version = "unknown"
    try:
        param = session.client("ssm", region_name=region).get_parameter(
            Name=f"/cdk-bootstrap/{qualifier}/version"
        )
        version = param["Parameter"]["Value"]
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") == "ParameterNotFound":
            version = None
    except BotoCoreError:
        pass
    print(
        json.dumps(
            {
                "account": ident["Account"],
                "region": region,
                "arn": ident["Arn"],
                "bootstrapVersion": version,
            }
        )
    )


if __name__ == "__main__":
    main()
