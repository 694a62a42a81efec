"""Credentials from an AWS profile (``AWS_PROFILE`` and a shared credentials file, no keys in the environment)
reach every client of an ``s3://`` store: deltalake (which reads no profile itself), pyarrow's file system
and the SQL read through it. Against moto's server with its IAM checks on: a request without the profile's
key fails."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.s3_support import s3_server_checking_keys  # noqa: F401 - fixture
from tests.test_store_s3 import _results, bedside


@pytest.fixture
def profile_env(s3_server_checking_keys, monkeypatch, tmp_path):  # noqa: F811 - the fixture above
    """The environment of a user whose keys live in a profile: the endpoint and region set, no keys."""
    server, key = s3_server_checking_keys
    import boto3

    bucket = f"team-{tmp_path.name.lower().replace('_', '-')[-40:]}"
    boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id=key["id"],
                 aws_secret_access_key=key["secret"]).create_bucket(Bucket=bucket)
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[team]\naws_access_key_id = {key['id']}\naws_secret_access_key = {key['secret']}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONDITIONAL_PUT",
                 "AWS_S3_LOCKING_PROVIDER", "AWS_ENDPOINT_URL_S3", "BEDSIDE_STORE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
                        "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
                        "AWS_CONFIG_FILE": str(tmp_path / "no-config"), "AWS_PROFILE": "team",
                        "XDG_STATE_HOME": str(tmp_path / "state")}.items():
        monkeypatch.setenv(name, value)
    return f"s3://{bucket}/store"


def test_a_profile_s_keys_reach_the_store_s_writes_and_reads(profile_env: str, tmp_path: Path, sample_dataset,
                                                             monkeypatch) -> None:
    store = ["--store", profile_env]
    files = _results(tmp_path / "results", sample_dataset, ["alpha", "beta"], rows=12)
    done = bedside(["import", str(tmp_path / "results"), *store])
    assert done.returncode == 0, done.stderr
    summary = bedside(["summary", "--all", "--json", "--samples", "200", *store])
    assert summary.returncode == 0 and set(json.loads(summary.stdout)) == {"alpha", "beta"}, summary.stderr
    sql = bedside(["sql", "SELECT run_id, count(*) AS n FROM answers GROUP BY run_id ORDER BY run_id", *store])
    assert sql.returncode == 0 and "alpha" in sql.stdout and "beta" in sql.stdout, sql.stderr
    local = tmp_path / "local"
    assert bedside(["import", str(tmp_path / "results"), "--store", str(local)]).returncode == 0
    assert json.loads(summary.stdout) == json.loads(bedside(["summary", "--all", "--json", "--samples", "200",
                                                             "--store", str(local)]).stdout)
    # The server checks keys: without the profile's, the same read is refused (one line, no traceback).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    refused = bedside(["runs", *store])
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert files


def test_a_profile_that_is_not_there_is_one_line(profile_env: str, monkeypatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nobody")
    done = bedside(["runs", "--store", profile_env])
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert "AWS_PROFILE=nobody" in done.stderr and "nobody" in done.stderr.split("AWS_PROFILE=nobody", 1)[1]


def _role_profiles(profile_env: str, tmp_path: Path, monkeypatch) -> None:
    """A role the team's key may assume, and profiles assuming it from that key and from a key the server
    does not know (``AWS_CONFIG_FILE``), with the region only in ``AWS_REGION``, as store.md documents."""
    import boto3

    endpoint, region = os.environ["AWS_ENDPOINT_URL"], os.environ["AWS_REGION"]
    team = boto3.Session(profile_name="team")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"},
                                                      "Action": "sts:AssumeRole"}]}
    iam = team.client("iam", endpoint_url=endpoint, region_name=region)
    name = f"writer-{tmp_path.name[-30:]}".replace("_", "-")
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    policy = next(p["Arn"] for p in iam.list_policies(Scope="Local")["Policies"] if p["PolicyName"] == "all")
    iam.attach_role_policy(RoleName=name, PolicyArn=policy)
    credentials = Path(os.environ["AWS_SHARED_CREDENTIALS_FILE"])
    credentials.write_text(credentials.read_text() + "[stranger]\naws_access_key_id = AKIANOBODY\n"
                           "aws_secret_access_key = nothing\n")
    config = tmp_path / "config"
    config.write_text(f"[profile writer]\nrole_arn = {arn}\nsource_profile = team\n\n"
                      f"[profile refused]\nrole_arn = {arn}\nsource_profile = stranger\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)


def test_a_role_profile_is_assumed_in_the_region_of_aws_region(profile_env: str, tmp_path: Path, sample_dataset,
                                                                monkeypatch) -> None:
    _role_profiles(profile_env, tmp_path, monkeypatch)
    _results(tmp_path / "results", sample_dataset, ["alpha"], rows=12)
    monkeypatch.setenv("AWS_PROFILE", "writer")
    done = bedside(["import", str(tmp_path / "results"), "--store", profile_env])
    assert done.returncode == 0, done.stderr  # botocore alone reads AWS_DEFAULT_REGION: "You must specify a region"
    # read back with the role's keys (in a process of its own: this one's would keep them): the run is there
    listing = bedside(["runs", "--json", "--store", profile_env])
    assert listing.returncode == 0, listing.stderr
    runs = json.loads(listing.stdout)
    assert [r["run_id"] for r in runs] == ["alpha"] and runs[0]["damaged"] is None, runs
    answers = bedside(["sql", "SELECT count(*) AS n FROM answers WHERE run_id = 'alpha'", "--format", "csv",
                       "--store", profile_env])
    assert answers.returncode == 0 and answers.stdout.split() == ["n", "12"], (answers.stdout, answers.stderr)


def test_a_role_the_server_refuses_to_give_is_one_line_naming_the_profile(profile_env: str, tmp_path: Path,
                                                                          monkeypatch) -> None:
    _role_profiles(profile_env, tmp_path, monkeypatch)
    monkeypatch.setenv("AWS_DEFAULT_REGION", os.environ["AWS_REGION"])  # whatever the region, the refusal is told
    monkeypatch.setenv("AWS_PROFILE", "refused")
    done = bedside(["runs", "--store", profile_env])
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("bedside: error: AWS_PROFILE=refused: ") and "internal error" not in done.stderr


def test_a_role_s_keys_are_renewed_before_they_expire(profile_env: str, tmp_path: Path, monkeypatch) -> None:
    """Assumed-role (and SSO) keys expire, an hour by default: a long `bedside run` must get fresh ones, not the
    first ones kept for the life of the process. A 900 s role is always within botocore's renewal window."""
    from toolkit.store import location

    _role_profiles(profile_env, tmp_path, monkeypatch)
    config = Path(os.environ["AWS_CONFIG_FILE"])
    config.write_text(config.read_text().replace("source_profile = team\n", "source_profile = team\n"
                                                 "duration_seconds = 900\n", 1))
    monkeypatch.setenv("AWS_PROFILE", "writer")
    first = location.credentials()
    assert first["AWS_SESSION_TOKEN"] and location.credentials()["AWS_ACCESS_KEY_ID"] != first["AWS_ACCESS_KEY_ID"]


def test_a_session_token_left_without_its_keys_is_one_line_not_a_failed_read(profile_env: str, monkeypatch) -> None:
    # delta-rs would send the lone token with the profile's keys and every request would fail: say what to do.
    monkeypatch.setenv("AWS_SESSION_TOKEN", "left-from-other-keys")
    done = bedside(["runs", "--store", profile_env])
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert "AWS_SESSION_TOKEN" in done.stderr and "unset" in done.stderr, done.stderr
