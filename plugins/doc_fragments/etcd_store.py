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
requirements:
  - boto3 (for s3:// stores)
'''
