# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # Where snapshots live; matches ETCD_STORE_SPEC in module_utils/etcd/args.py.
    DOCUMENTATION = r'''
options:
  store:
    description:
      - The snapshot store, a local directory (C(/var/backups/etcd) or C(file:///var/backups/etcd))
        or an S3 location (C(s3://bucket/prefix)).
      - Snapshots are kept flat under C(<store>/v2/) as in etcd-backup-restore's v2 layout.
      - A local store's directories are created 0700 and its files 0600. Directories that already exist
        with a wider mode are left as they are and named in the result (C(store_notes)).
    type: str
    required: true
  s3_endpoint_url:
    description:
      - URL of an S3-compatible service (MinIO, Ceph RGW, ...). Leave unset for AWS S3.
      - Falls back to the E(AWS_ENDPOINT_URL_S3) or E(AWS_ENDPOINT_URL) environment variable.
    type: str
    aliases: [endpoint_url, aws_endpoint_url]
  aws_access_key_id:
    description:
      - Access key for S3. When unset, the standard AWS credential chain is used
        (environment, shared credentials file, instance profile).
      - The aliases are amazon.aws's names for this option.
    type: str
    aliases: [access_key, aws_access_key]
  aws_secret_access_key:
    description: Secret key of O(aws_access_key_id).
    type: str
    aliases: [secret_key, aws_secret_key]
  aws_session_token:
    description: Session token for temporary S3 credentials.
    type: str
    aliases: [session_token]
  region:
    description: S3 region. Falls back to E(AWS_REGION) / E(AWS_DEFAULT_REGION), then C(us-east-1).
    type: str
    aliases: [aws_region]
  encrypt:
    description:
      - Encrypt snapshot objects in S3 server-side. A snapshot holds every Kubernetes Secret of the
        cluster, so this is on by default, as in M(amazon.aws.s3_object).
      - Set to V(false) only for S3-compatible services without encryption support.
      - Local stores ignore it; their files are 0600 in 0700 directories instead.
    type: bool
    default: true
  encryption_mode:
    description:
      - V(AES256) encrypts with keys the store manages (SSE-S3); V(aws:kms) with a KMS key
        (O(encryption_kms_key_id), else the account's default key); V(SSE-C) with O(sse_customer_key).
      - Giving O(sse_customer_key) selects V(SSE-C).
    type: str
    choices: [AES256, 'aws:kms', SSE-C]
    default: AES256
  encryption_kms_key_id:
    description: KMS key id, ARN or alias for O(encryption_mode=aws:kms).
    type: str
  sse_customer_key:
    description:
      - SSE-C customer key (AES-256), 32 characters as etcd-backup-restore's C(sseCustomerKey), or base64.
      - The store never keeps it; every read needs it again. Lose it and the backups are lost.
    type: str
  store_timeout:
    description:
      - Seconds one store request may take, retries included (an S3 endpoint that accepts connections and never
        answers is given up on after this long; the error names the endpoint).
      - Positive, at most a week.
    type: float
    default: 30
requirements:
  - boto3 (for s3:// stores)
'''
