"""Credentials for moto's server (tests/mpi/remote_common.bash, BOOST_S3_STORE=moto).

moto checks no signature until its IAM authentication is switched on; then
it checks every request's SigV4 signature against the secret of an IAM
access key it made. So, while it still accepts anything: an IAM user with a
policy allowing s3:*, an access key of that user; then authentication on
(/moto-api/reset-auth with 0 requests left unchecked). Prints
"ACCESS_KEY_ID SECRET" on stdout.

    python remote_moto_keys.py http://127.0.0.1:PORT
"""

import json
import sys
import urllib.request

import boto3  # moto depends on it: it is in moto's virtual environment

endpoint = sys.argv[1]
iam = boto3.client(
    "iam",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="setup",
    aws_secret_access_key="setup",
)
iam.create_user(UserName="boost")
allow_s3 = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
iam.put_user_policy(UserName="boost", PolicyName="s3", PolicyDocument=json.dumps(allow_s3))
key = iam.create_access_key(UserName="boost")["AccessKey"]
switch_on = urllib.request.Request(
    endpoint + "/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
)
with urllib.request.urlopen(switch_on, timeout=30) as answer:
    json.loads(answer.read())  # {"status": "ok", ...}
print(key["AccessKeyId"], key["SecretAccessKey"])
