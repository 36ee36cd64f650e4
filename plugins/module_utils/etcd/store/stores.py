# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Open a snapshot store from its URL: a local directory or s3://bucket/prefix."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Budget, Deadline
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import LocalStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_encryption import (
    S3Encryption,
    s3_encryption,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_store import S3Store
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import SnapshotStore

SUPPORTED = ('/absolute/path', 'file:///absolute/path', 's3://bucket/prefix')


def open_store(url: str, *, endpoint_url: Optional[str] = None, access_key: Optional[str] = None,
               secret_key: Optional[str] = None, session_token: Optional[str] = None,
               region: Optional[str] = None, encryption: Optional[S3Encryption] = None,
               timeout: float = 30.0, budget: Optional[Deadline] = None) -> SnapshotStore:
    """The store for `url`; StoreError names the supported forms when the URL fits none. `timeout` bounds one S3
    operation with its retries; `budget` (a Budget), when given, bounds all of them together instead."""
    url = (url or '').strip()
    if not url:
        raise StoreError('no snapshot store given; expected one of %s' % ', '.join(SUPPORTED))
    if url.startswith('s3://'):
        return S3Store(url, endpoint_url=endpoint_url, access_key=access_key, secret_key=secret_key,
                       session_token=session_token, region=region, encryption=encryption, timeout=timeout,
                       deadline=budget)
    if url.startswith('file://') or url.startswith('/'):
        return LocalStore(url)
    scheme = url.split('://', 1)[0] if '://' in url else ''
    if scheme:
        raise StoreError('snapshot store %r: unsupported scheme %r; expected one of %s' % (url, scheme, ', '.join(SUPPORTED)))
    raise StoreError('snapshot store %r is neither an absolute path nor a URL; expected one of %s' % (url, ', '.join(SUPPORTED)))


def encryption_from_params(params: Dict[str, Any]) -> S3Encryption:
    """Server-side encryption from the `etcd_store` options (checked even for local stores: a typo is a typo)."""
    return s3_encryption(encrypt=params.get('encrypt', True), mode=params.get('encryption_mode'),
                         kms_key_id=params.get('encryption_kms_key_id'), customer_key=params.get('sse_customer_key'))


# An S3 region as AWS and S3-compatible servers name them (us-east-1, eu-central-1, garage, local): botocore
# builds hostnames and signatures from it, and a control character there ends in its traceback, not a refusal.
_REGION = re.compile(r'^[A-Za-z0-9]([A-Za-z0-9._-]{0,62})$')


def check_store_params(params: Dict[str, Any]) -> float:
    """The `etcd_store` options that need no store to be opened, checked for every module that has them (also
    when this run restores a local snapshot file and opens no store); the store_timeout in seconds."""
    timeout = params.get('store_timeout')
    timeout = 30.0 if timeout is None else validate.timeout(timeout, 'store_timeout')
    if params.get('s3_endpoint_url'):
        validate.endpoint_url(params['s3_endpoint_url'], 's3_endpoint_url')
    for option in ('aws_access_key_id', 'aws_secret_access_key', 'aws_session_token'):
        if params.get(option) is not None:
            validate.credential(params[option], option)
    region = params.get('region')
    if region is not None and not _REGION.match(validate.text(region, 'region', max_length=63)):
        raise InvalidInput('region', 'region-name', 'expected a region name such as us-east-1 (letters, digits, '
                           '".", "_", "-"), got %s' % shown(region), region)
    return timeout


def store_from_params(params: Dict[str, Any], must_exist: bool = True) -> SnapshotStore:
    """From the `etcd_store` argspec options. A local store must exist unless the caller creates it (`must_exist`
    False: etcd_snapshot): a typo must not read as "no backup" during a recovery. `store_timeout` is one budget for
    every S3 request of this run, retries included (its time runs only while a request is under way)."""
    timeout = check_store_params(params)
    store = open_store(params.get('store') or '', endpoint_url=params.get('s3_endpoint_url'),
                       access_key=params.get('aws_access_key_id'), secret_key=params.get('aws_secret_access_key'),
                       session_token=params.get('aws_session_token'), region=params.get('region'),
                       encryption=encryption_from_params(params), timeout=timeout,
                       budget=Budget(timeout, 'the S3 requests of this run (store_timeout)'))
    if must_exist and isinstance(store, LocalStore):
        validate.existing_dir(store.root, 'store')
    return store


def store_report(store: SnapshotStore) -> Dict[str, Any]:
    """What a module says about the store beside its own result: the encryption used (S3) and store
    directories others may read (local; left alone, but said). Never a key."""
    report: Dict[str, Any] = {}
    notes = getattr(store, 'mode_notes', None)
    if notes is not None:
        report['store_notes'] = [n.to_dict() for n in notes()]
    encryption = getattr(store, 'encryption', None)
    if encryption is not None:
        report['encryption'] = encryption.describe()
    return report
