"""The data a sheetlog stack retains after `cdk destroy`: its tables, its bucket, and with
authMode=cognito its user pool (every account).

    python stack_data.py names STACK
        Prints {"tables": [...], "bucket": "...", "userPool": "..." or null} from the stack's
        outputs (EntryTableName, SegmentTableName, PendingSnapshotsTableName, DedupeTableName,
        ClientsTableName, BucketName; CatalogTableName and UserPoolId when the stack has them).
        Exits 3 when the stack or a required output is missing.
    python stack_data.py delete NAMES_JSON
        Deletes each table (turning deletion protection off first), the bucket with every
        object version and delete marker, and the user pool (deletion protection off first),
        printing each as it goes. One already gone is reported and skipped, so running it again
        finishes an interrupted delete.

Credentials, region and endpoint come from the standard AWS chain (AWS_ENDPOINT_URL points it at
the emulator in tests).
"""

import json
import sys

try:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError:  # pragma: no cover - the script installs boto3 first
    sys.exit("error: boto3 is missing from the project venv; run scripts/deploy once")

TABLE_OUTPUTS = [
    "EntryTableName",
    "SegmentTableName",
    "PendingSnapshotsTableName",
    "DedupeTableName",
    "ClientsTableName",
]
# authMode=cognito only.
OPTIONAL_TABLE_OUTPUTS = ["CatalogTableName"]


def names(stack: str) -> dict:
    try:
        out = boto3.client("cloudformation").describe_stacks(StackName=stack)
    except (ClientError, BotoCoreError) as e:
        print(f"error: cannot read stack {stack}: {e}", file=sys.stderr)
        sys.exit(3)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in out["Stacks"][0].get("Outputs", [])}
    missing = [k for k in TABLE_OUTPUTS + ["BucketName"] if k not in outputs]
    if missing:
        print(f"error: stack {stack} has no output {', '.join(missing)}", file=sys.stderr)
        sys.exit(3)
    return {
        "tables": [outputs[k] for k in TABLE_OUTPUTS + OPTIONAL_TABLE_OUTPUTS if k in outputs],
        "bucket": outputs["BucketName"],
        "userPool": outputs.get("UserPoolId"),
    }


def delete_table(ddb, name: str) -> None:
    try:
        ddb.update_table(TableName=name, DeletionProtectionEnabled=False)
        ddb.delete_table(TableName=name)
        ddb.get_waiter("table_not_exists").wait(TableName=name)
        print(f"deleted table {name}")
    except ddb.exceptions.ResourceNotFoundException:
        print(f"table {name}: already gone")


def delete_bucket(s3, name: str) -> None:
    try:
        pages = s3.get_paginator("list_object_versions").paginate(Bucket=name)
        removed = 0
        for page in pages:
            keys = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            for i in range(0, len(keys), 1000):
                s3.delete_objects(Bucket=name, Delete={"Objects": keys[i : i + 1000], "Quiet": True})
                removed += len(keys[i : i + 1000])
        s3.delete_bucket(Bucket=name)
        print(f"deleted bucket {name} ({removed} object versions and delete markers)")
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") == "NoSuchBucket":
            print(f"bucket {name}: already gone")
        else:
            raise


def delete_user_pool(idp, pool: str) -> None:
    try:
        # UpdateUserPool resets what it is not given; the pool is deleted right after.
        idp.update_user_pool(UserPoolId=pool, DeletionProtection="INACTIVE")
        idp.delete_user_pool(UserPoolId=pool)
        print(f"deleted user pool {pool} (every account in it)")
    except idp.exceptions.ResourceNotFoundException:
        print(f"user pool {pool}: already gone")


def delete(spec: dict) -> None:
    ddb = boto3.client("dynamodb")
    for table in spec["tables"]:
        delete_table(ddb, table)
    delete_bucket(boto3.client("s3"), spec["bucket"])
    if spec.get("userPool"):
        delete_user_pool(boto3.client("cognito-idp"), spec["userPool"])


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("names", "delete"):
        sys.exit(__doc__)
    try:
        if sys.argv[1] == "names":
            print(json.dumps(names(sys.argv[2])))
        else:
            delete(json.loads(sys.argv[2]))
    except (ClientError, BotoCoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
