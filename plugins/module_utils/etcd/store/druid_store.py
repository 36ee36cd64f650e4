# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-druid's StoreSpec (`provider`, `container`, `prefix`, `secretRef`; seed 004 ETCD-04) and its backup
Secret (etcd-backup-restore's keys `accessKeyID`, `secretAccessKey`, `region`, `endpoint`, `s3ForcePathStyle`)
as one of our stores: the one reading, used by the `Etcd` resource, `EtcdCopyBackupsTask` and the member
program's etcdbrctl flags (`--storage-provider`, `--store-container`, `--store-prefix`).

Providers: `aws` (as druid's setup writes it) and `S3` (as its sample does) are S3 and S3-compatible stores;
`local` is a directory: `container` names it under a local store root (etcd-backup-restore's local provider is
`<container>/<prefix>` from its working directory; druid's CRD allows only a bucket-like name there), which the
caller gives (`local_root`); an absolute `container` is taken as it is. azure, gcp, openstack, alicloud, dell and openshift
are refused by name: this collection has no client for them (docs/etcd-druid.md lists the difference).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SpecError

S3_PROVIDERS = ('aws', 'S3')
LOCAL_PROVIDERS = ('local', 'Local')
KNOWN_ELSEWHERE = ('azure', 'gcp', 'openstack', 'alicloud', 'dell', 'openshift', 'ABS', 'GCS', 'Swift', 'OSS', 'ECS', 'OCS')


@dataclasses.dataclass(frozen=True)
class DruidStore:
    """`url`: our store URL (s3://bucket/prefix or /dir/prefix); snapshots under `<url>/v2` as etcd-backup-restore
    writes them; `secret`: the Secret name of `secretRef` (None: none given)."""
    provider: str
    url: str
    secret: Optional[str]


@dataclasses.dataclass(frozen=True)
class StoreCredentials:
    """What a druid backup Secret says. Holds secrets: never logged, never put in a status."""
    access_key: Optional[str] = None
    secret_key: Optional[str] = dataclasses.field(default=None, repr=False)
    session_token: Optional[str] = dataclasses.field(default=None, repr=False)
    region: Optional[str] = None
    endpoint: Optional[str] = None
    force_path_style: bool = False


def store_prefix(prefix: Any, field: str = 'store') -> str:
    """`<field>.prefix` of a druid StoreSpec: required, one line, no `..` component (snapshots go under
    `<prefix>/v2/`, and a prefix must not climb out of its container). Returns it without surrounding slashes.
    The one home of this rule: the Etcd spec (druid/spec.py), the member program and the operator tasks use it."""
    text = validate.text(prefix, field + '.prefix') if prefix is not None else ''
    clean = text.strip('/')
    if not clean:
        raise SpecError(field + '.prefix', 'required', 'required (snapshots go under <prefix>/v2/)')
    if '..' in clean.split('/'):
        raise SpecError(field + '.prefix', 'path-component', 'must not contain ".." (%r)' % (text,), text)
    return clean


def store_container(provider: Any, container: Any, field: str = 'store') -> str:
    """`<field>.container` of a druid StoreSpec, by provider: a cloud provider's bucket is required and one name;
    a local container is an absolute directory or one directory name (under the local store root), if given.
    Returns the container ('' for a local store without one)."""
    if provider not in LOCAL_PROVIDERS:
        if not isinstance(container, str) or not container or '/' in container:
            raise SpecError(field + '.container', 'required', 'the bucket name is required for provider %s, got %r' % (
                provider, container), container)
        return container
    if container is None or container == '':
        return ''
    if isinstance(container, str) and container.startswith('/'):
        return validate.absolute_path(container, field + '.container')
    name = validate.text(container, field + '.container')
    if '/' in name or name in ('.', '..'):
        raise SpecError(field + '.container', 'directory-name', 'a local container is one directory name, got %r' % (
            name,), name)
    return name


def store_location(provider: Any, container: Any, prefix: Any, field: str = 'store', local_root: str = '') -> str:
    """Our store URL for druid's provider/container/prefix; SpecError names `<field>.<key>`."""
    if provider in KNOWN_ELSEWHERE:
        raise SpecError(field + '.provider', 'supported', 'provider %r is not supported here (only %s and %s)' % (
            provider, '/'.join(S3_PROVIDERS), '/'.join(LOCAL_PROVIDERS)), provider)
    if provider not in S3_PROVIDERS + LOCAL_PROVIDERS:
        raise SpecError(field + '.provider', 'one-of', 'expected one of %s, got %r' % (
            ', '.join(S3_PROVIDERS + LOCAL_PROVIDERS), provider), provider)
    clean = store_prefix(prefix, field)
    if provider in S3_PROVIDERS:
        return 's3://%s/%s' % (store_container(provider, container, field), clean)
    if container is None or container == '':
        validate.text(container, field + '.container')   # a local store acted on needs its directory
    name = store_container(provider, container, field)
    if name.startswith('/'):
        return os.path.join(name, clean)
    if not local_root:
        raise SpecError(field + '.container', 'local-root', 'the local container %r needs a local store root to live '
                        'under, and none is configured' % (name,), name)
    return os.path.join(validate.absolute_path(local_root, 'local store root'), name, clean)


def parse_store(store: Any, field: str = 'spec.backup.store', local_root: str = '') -> DruidStore:
    """A druid StoreSpec mapping, checked (`local_root`: where `local` containers live)."""
    store = validate.mapping(store, field, required=True)
    secret = store.get('secretRef')
    name = None
    if secret is not None:
        secret = validate.mapping(secret, field + '.secretRef')
        name = validate.text(secret.get('name'), field + '.secretRef.name')
    location = store_location(store.get('provider'), store.get('container'), store.get('prefix'), field, local_root)
    return DruidStore(str(store.get('provider')), location, name)


def credentials(data: Mapping[str, str]) -> StoreCredentials:
    """A druid backup Secret's decoded data (etcd-backup-restore's key names; the AWS environment names too)."""
    def first(*keys: str) -> Optional[str]:
        return next((str(data[k]).strip() for k in keys if data.get(k)), None)
    return StoreCredentials(access_key=first('accessKeyID', 'AWS_ACCESS_KEY_ID'),
                            secret_key=first('secretAccessKey', 'AWS_SECRET_ACCESS_KEY'),
                            session_token=first('sessionToken', 'AWS_SESSION_TOKEN'),
                            region=first('region', 'AWS_REGION'), endpoint=first('endpoint'),
                            force_path_style=(first('s3ForcePathStyle') or '').lower() == 'true')
