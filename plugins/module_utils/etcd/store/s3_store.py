# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A snapshot store in S3 or an S3-compatible service (`s3://bucket/prefix`).

Data goes up with `upload_file` (multipart above the threshold): S3 makes an object visible
only when the whole upload completes, so a killed upload leaves at most an unfinished multipart
upload (listed as `partial`), never a short object. The metadata object is put only after the
data object's size was checked in the store. Every object is encrypted server-side (AES256 unless
the store is told otherwise, s3_encryption.py); SSE-C reads send the customer key again.

Time: every operation runs under a deadline, retries included - the one the caller shares across its calls (a
module run: `store_timeout` for the whole conversation) or `timeout` per operation (the controller). Its sockets
are watched (common/http_deadline.py), so a store that accepts and never answers, or drips its headers, is cut at
the deadline, and the error names the endpoint and the time spent. Work that grows with the store's contents is
granted time as it happens, never in advance: each snapshot's metadata read while listing, and each MiB moved
(a transfer slower than 1 MiB/s runs out).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Dict, Iterator, List, Optional
from urllib.parse import urlsplit

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline, DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.common.http_deadline import (
    ContextThreadPool,
    check_deadline,
    grant,
    watch_pool_classes,
    watching,
)

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotNotFound, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import (
    classify,
    remove_quietly,
    sort_snapshots,
    temp_name,
)
from ansible_collections.steward.cluster.plugins.module_utils.common.files import make_private
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_encryption import S3Encryption
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import (
    LAYOUT_V1,
    LAYOUT_V2,
    METADATA_SUFFIX,
    SnapshotName,
    try_parse_name,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import (
    STATUS_INCOMPLETE,
    STATUS_PARTIAL,
    Snapshot,
    SnapshotStore,
    mark_unrecorded,
)

try:
    import boto3
    from boto3.s3.transfer import S3Transfer, TransferConfig
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError
    from s3transfer.manager import TransferManager
    HAS_BOTO3 = True
except ImportError:  # reported by the module through missing_required_lib
    HAS_BOTO3 = False

MB = 1024 * 1024
OUR_MARK = 'steward-snapshot'  # user metadata on every data object we upload (tells ours from etcd-backup-restore's)
CREDENTIAL_CODES = ('InvalidAccessKeyId', 'SignatureDoesNotMatch', 'AccessDenied', 'InvalidToken',
                    'ExpiredToken', 'InvalidClientTokenId', 'UnrecognizedClientException', '403')
MISSING_BUCKET_CODES = ('NoSuchBucket',)
# Time granted as work that grows with the store happens: per MiB moved (a floor far below any usable store, so a
# large snapshot is not cut at store_timeout while a trickling store still runs out) and per snapshot whose
# metadata a listing reads.
SECONDS_PER_MB_MOVED = 1.0
SECONDS_PER_METADATA_READ = 0.2


def split_s3_url(url: str) -> tuple:
    """('bucket', 'prefix') from s3://bucket/prefix (prefix without slashes at either end)."""
    parts = urlsplit(url)
    if parts.scheme != 's3' or not parts.netloc:
        raise StoreError('%r is not an S3 store URL (expected s3://bucket/prefix)' % url)
    return parts.netloc, parts.path.strip('/')


def _missing_bucket(exc: Exception) -> Exception:
    """head_bucket answers a bare 404; say NoSuchBucket like the other calls do."""
    return ClientError({'Error': {'Code': 'NoSuchBucket', 'Message': 'The specified bucket does not exist'}},
                       'HeadBucket')


class S3Store(SnapshotStore):
    """Snapshots under `<prefix>/v2/` in one bucket."""

    def __init__(self, url: str, *, endpoint_url: Optional[str] = None, access_key: Optional[str] = None,
                 secret_key: Optional[str] = None, session_token: Optional[str] = None, region: Optional[str] = None,
                 multipart_threshold: int = 64 * MB, multipart_chunksize: int = 16 * MB, max_concurrency: int = 4,
                 timeout: float = 30.0, max_attempts: int = 3, encryption: Optional[S3Encryption] = None,
                 deadline: Optional[Deadline] = None):
        if not HAS_BOTO3:
            raise StoreError('the python library boto3 is required for s3:// stores')
        self.url = url
        self.encryption = encryption or S3Encryption()
        self.bucket, self.prefix = split_s3_url(url)
        self.endpoint_url = (endpoint_url or os.environ.get('AWS_ENDPOINT_URL_S3')
                             or os.environ.get('AWS_ENDPOINT_URL') or None)
        region = region or os.environ.get('AWS_REGION') or os.environ.get('AWS_DEFAULT_REGION') or 'us-east-1'
        if bool(access_key) != bool(secret_key):
            raise StoreError('S3 store %s: give both aws_access_key_id and aws_secret_access_key, or neither' % url)
        session = boto3.session.Session(aws_access_key_id=access_key or None, aws_secret_access_key=secret_key or None,
                                        aws_session_token=session_token or None, region_name=region)
        # per attempt; the deadline (shared, or `timeout` per operation) bounds them all, retries included
        config = Config(connect_timeout=min(5.0, timeout), read_timeout=timeout,
                        retries={'max_attempts': max_attempts, 'mode': 'standard'})
        self.client = session.client('s3', endpoint_url=self.endpoint_url, config=config)
        self.timeout = timeout
        self.deadline = deadline
        _watch_botocore(self.client)
        self.transfer = TransferConfig(multipart_threshold=multipart_threshold, multipart_chunksize=multipart_chunksize,
                                       max_concurrency=max_concurrency)

    def __repr__(self) -> str:
        return 'S3Store(%r, endpoint_url=%r)' % (self.url, self.endpoint_url)

    def _where(self) -> str:
        return 's3://%s/%s%s' % (self.bucket, self.prefix, ' at %s' % self.endpoint_url if self.endpoint_url else '')

    @contextlib.contextmanager
    def _within(self, action: str) -> Iterator[None]:
        """Run one operation under the deadline (the shared one, else `timeout` for this operation); running out
        is a StoreError naming the operation, the endpoint and the time spent."""
        deadline = self.deadline if self.deadline is not None else Deadline(self.timeout, action)
        try:
            with watching(deadline, self.endpoint_url or 'AWS S3'):
                yield
        except DeadlineExceeded as exc:
            raise StoreError('cannot %s in %s: %s' % (action, self._where(), exc)) from exc

    def _transfer(self) -> 'S3Transfer':
        """boto3's transfer, its threads in the caller's context (their sockets join the caller's deadline)."""
        return S3Transfer(manager=TransferManager(self.client, self.transfer, executor_cls=ContextThreadPool))

    def _moved(self, transferred: int) -> None:
        grant(transferred * SECONDS_PER_MB_MOVED / MB)
        self._progress(transferred)

    def error(self, action: str, exc: Exception) -> StoreError:
        """A StoreError that says what failed, where, and the likely reason."""
        where = self._where()
        if isinstance(exc, EndpointConnectionError):
            return StoreError('cannot %s: S3 endpoint %s is unreachable (%s)' % (action, self.endpoint_url or 'AWS', exc))
        if isinstance(exc, NoCredentialsError):
            return StoreError('cannot %s in %s: no S3 credentials found (set aws_access_key_id/aws_secret_access_key '
                              'or the AWS credential chain)' % (action, where))
        if isinstance(exc, ClientError):
            err = exc.response.get('Error', {})
            code = str(err.get('Code', ''))
            message = err.get('Message') or ''
            if code in MISSING_BUCKET_CODES:
                return StoreError('cannot %s: bucket %r does not exist (%s)' % (action, self.bucket, where))
            if code in CREDENTIAL_CODES:
                return StoreError('cannot %s in %s: S3 refused the credentials (%s: %s); check the access key, '
                                  'secret key and permissions' % (action, where, code, message))
            return StoreError('cannot %s in %s: %s %s' % (action, where, code, message))
        if HAS_BOTO3 and isinstance(exc, BotoCoreError):
            return StoreError('cannot %s in %s: %s' % (action, where, exc))
        return StoreError('cannot %s in %s: %s' % (action, where, exc))

    def key_of(self, rel: str) -> str:
        return '%s/%s' % (self.prefix, rel) if self.prefix else rel

    def rel_of(self, key: str) -> str:
        return key[len(self.prefix) + 1:] if self.prefix else key

    def check(self, create: bool = True) -> None:
        """Fail early (endpoint, credentials, bucket) before a big snapshot is streamed."""
        with self._within('use the store'):
            try:
                self.client.head_bucket(Bucket=self.bucket)
            except ClientError as exc:
                if exc.response.get('Error', {}).get('Code') in ('404', 'NotFound'):
                    raise self.error('use the store', _missing_bucket(exc)) from exc
                raise self.error('use the store', exc) from exc
            except BotoCoreError as exc:
                raise self.error('use the store', exc) from exc

    # --- listing -------------------------------------------------------------------------------
    def _objects(self, rel_prefix: str) -> Dict[str, Dict[str, Any]]:
        objects: Dict[str, Dict[str, Any]] = {}
        paginator = self.client.get_paginator('list_objects_v2')
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key_of(rel_prefix)):
            for obj in page.get('Contents', []) or []:
                objects[self.rel_of(obj['Key'])] = obj
        return objects

    def _uploads(self) -> List[Dict[str, Any]]:
        uploads: List[Dict[str, Any]] = []
        paginator = self.client.get_paginator('list_multipart_uploads')
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key_of(LAYOUT_V2 + '/')):
            uploads.extend(page.get('Uploads', []) or [])
        return uploads

    def _read(self, call: Any, extra_args_key: Optional[str] = None, **kwargs: Any) -> Any:
        """A read with the SSE-C key when one is set; an object written without SSE-C (before the key
        was configured) refuses the key with 400, so that answer is retried without it.
        `extra_args_key`: the transfer manager takes the key inside `ExtraArgs`."""
        extra = self.encryption.read_args()
        if not extra:
            return call(**kwargs)
        with_key = dict(kwargs, **({extra_args_key: extra} if extra_args_key else extra))
        try:
            return call(**with_key)
        except ClientError as exc:
            if str(exc.response.get('Error', {}).get('Code')) not in ('400', 'InvalidRequest', 'InvalidArgument'):
                raise
            return call(**kwargs)

    def _get(self, rel: str) -> Optional[bytes]:
        try:
            return self._read(self.client.get_object, Bucket=self.bucket, Key=self.key_of(rel))['Body'].read()
        except ClientError as exc:
            if exc.response.get('Error', {}).get('Code') in ('NoSuchKey', '404'):
                return None
            raise

    def list(self) -> List[Snapshot]:
        with self._within('list snapshots'):
            return self._list()

    def _list(self) -> List[Snapshot]:
        try:
            found = self._classify(self._objects(LAYOUT_V2 + '/'), v1=False)
            found += self._classify(self._objects(LAYOUT_V1 + '/'), v1=True)
            for upload in self._uploads():
                rel = self.rel_of(upload['Key'])
                base = rel.rsplit('/', 1)[-1]
                if base.endswith(METADATA_SUFFIX):
                    base = base[:-len(METADATA_SUFFIX)]
                found.append(Snapshot(try_parse_name(base), rel, 0, upload['Initiated'].timestamp(), STATUS_PARTIAL,
                                      {'upload_id': upload['UploadId']},
                                      'unfinished multipart upload (interrupted or still running)'))
        except (ClientError, BotoCoreError) as exc:
            raise self.error('list snapshots', exc) from exc
        return sort_snapshots(mark_unrecorded(found, self._written_by_us))

    def _written_by_us(self, snapshot: Snapshot) -> bool:
        try:
            head = self._head(self.key_of(snapshot.key))
        except (ClientError, BotoCoreError) as exc:
            raise self.error('read %s' % snapshot.key, exc) from exc
        return bool(head and OUR_MARK in (head.get('Metadata') or {}))

    def _classify(self, objects: Dict[str, Dict[str, Any]], v1: bool) -> List[Snapshot]:
        result: List[Snapshot] = []
        for rel, obj in sorted(objects.items()):
            directory, _sep, base = rel.rpartition('/')
            if v1 and not directory.startswith(LAYOUT_V1 + '/Backup-'):
                continue
            modified = obj['LastModified'].timestamp()
            if base.endswith(METADATA_SUFFIX):
                data_rel = rel[:-len(METADATA_SUFFIX)]
                name = try_parse_name(base[:-len(METADATA_SUFFIX)])
                if name is not None and data_rel not in objects:
                    result.append(classify(data_rel, name, 0, modified, self._get(rel), has_data=False))
                continue
            name = try_parse_name(base)
            if name is None:
                continue
            raw = None
            if (rel + METADATA_SUFFIX) in objects:
                grant(SECONDS_PER_METADATA_READ)
                raw = self._get(rel + METADATA_SUFFIX)
            result.append(classify(rel, name, int(obj['Size']), modified, raw))
        return result

    # --- publishing ----------------------------------------------------------------------------
    def _progress(self, transferred: int) -> None:
        """Upload progress hook (bytes since the last call); a seam for fault-injection tests."""

    def publish_data(self, name: SnapshotName, source_path: str) -> Snapshot:
        with self._within('upload snapshot %s' % name):
            return self._publish_data(name, source_path)

    def _publish_data(self, name: SnapshotName, source_path: str) -> Snapshot:
        rel = '%s/%s' % (LAYOUT_V2, name)
        key = self.key_of(rel)
        size = os.path.getsize(source_path)
        try:
            if self._head(key) is not None:
                raise StoreError('s3://%s/%s already exists; refusing to overwrite it' % (self.bucket, key))
            with self._transfer() as transfer:
                transfer.upload_file(source_path, self.bucket, key, callback=self._moved,
                                     extra_args=dict(self.encryption.write_args(), Metadata={OUR_MARK: '1'}))
            head = self._head(key)
        except (ClientError, BotoCoreError) as exc:
            raise self.error('upload snapshot %s' % name, exc) from exc
        except Exception as exc:  # boto3's S3UploadFailedError wraps the ClientError
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, (ClientError, BotoCoreError)):
                raise self.error('upload snapshot %s' % name, cause) from exc
            if isinstance(exc, StoreError):
                raise
            raise self.error('upload snapshot %s' % name, exc) from exc
        if head is None or int(head['ContentLength']) != size:
            raise StoreError('uploaded s3://%s/%s has %s bytes, expected %d' % (
                self.bucket, key, None if head is None else head['ContentLength'], size))
        self.last_head = head
        return Snapshot(name, rel, size, head['LastModified'].timestamp(), STATUS_INCOMPLETE, None,
                        'metadata not yet published')

    def encryption_confirmed(self) -> Optional[bool]:
        """Whether the store's answer to the last upload shows the encryption asked for (None: nothing uploaded)."""
        head = getattr(self, 'last_head', None)
        return None if head is None else self.encryption.confirmed_by(head)

    def _head(self, key: str) -> Optional[Dict[str, Any]]:
        try:
            return self._read(self.client.head_object, Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get('Error', {}).get('Code') in ('404', 'NoSuchKey', 'NotFound'):
                return None
            raise

    def publish_metadata(self, snapshot: Snapshot, metadata: Dict[str, Any]) -> Snapshot:
        with self._within('publish metadata of %s' % snapshot.key):
            return self._publish_metadata(snapshot, metadata)

    def _publish_metadata(self, snapshot: Snapshot, metadata: Dict[str, Any]) -> Snapshot:
        key = self.key_of(snapshot.key)
        body = json.dumps(metadata, indent=2, sort_keys=True).encode('utf-8')
        try:
            head = self._head(key)
            if head is None:
                raise StoreError('cannot publish metadata of s3://%s/%s: its data is not in the store' % (self.bucket, key))
            self.client.put_object(Bucket=self.bucket, Key=key + METADATA_SUFFIX, Body=body,
                                   ContentType='application/json', **self.encryption.write_args())
            raw = self._get(snapshot.key + METADATA_SUFFIX)
        except (ClientError, BotoCoreError) as exc:
            raise self.error('publish metadata of %s' % snapshot.key, exc) from exc
        return classify(snapshot.key, snapshot.name, int(head['ContentLength']), head['LastModified'].timestamp(), raw)

    def fetch(self, snapshot: Snapshot, dest_path: str) -> None:
        with self._within('download %s' % snapshot.key):
            self._fetch(snapshot, dest_path)

    def _fetch(self, snapshot: Snapshot, dest_path: str) -> None:
        key = self.key_of(snapshot.key)
        tmp = os.path.join(os.path.dirname(os.path.abspath(dest_path)), temp_name(os.path.basename(dest_path)))

        def download(Bucket: str, Key: str, Filename: str, ExtraArgs: Optional[Dict[str, Any]] = None) -> None:  # noqa: N803  # pylint: disable=invalid-name
            with self._transfer() as transfer:
                transfer.download_file(Bucket, Key, Filename, extra_args=ExtraArgs, callback=self._moved)
        try:
            self._read(download, 'ExtraArgs', Bucket=self.bucket, Key=key, Filename=tmp)
            make_private(tmp)
            os.rename(tmp, dest_path)
        except ClientError as exc:
            remove_quietly(tmp)
            if exc.response.get('Error', {}).get('Code') in ('404', 'NoSuchKey', 'NotFound'):
                raise SnapshotNotFound('snapshot s3://%s/%s is not in the store' % (self.bucket, key)) from exc
            raise self.error('download %s' % snapshot.key, exc) from exc
        except (BotoCoreError, OSError) as exc:
            remove_quietly(tmp)
            raise self.error('download %s' % snapshot.key, exc) from exc

    def delete(self, snapshot: Snapshot) -> None:
        with self._within('delete %s' % snapshot.key):
            self._delete(snapshot)

    def _delete(self, snapshot: Snapshot) -> None:
        key = self.key_of(snapshot.key)
        try:
            if snapshot.status == STATUS_PARTIAL and snapshot.metadata and snapshot.metadata.get('upload_id'):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=snapshot.metadata['upload_id'])
                return
            self.client.delete_object(Bucket=self.bucket, Key=key + METADATA_SUFFIX)
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise self.error('delete %s' % snapshot.key, exc) from exc


def _watch_botocore(client: Any) -> None:
    """Watch the sockets of `client` (common/http_deadline.py) and check the deadline before every attempt, so
    no retry starts after it. botocore has no public hook for its connection classes: its session's pool-class
    mapping (shared by its proxy managers) is changed in place; a botocore without it fails loudly here, not
    silently without the bound (tests/integration/test_etcd_store_deadlines.py: the header drip would hang)."""
    client.meta.events.register('before-send.s3', _before_send)
    try:
        classes = client._endpoint.http_session._pool_classes_by_scheme  # pylint: disable=protected-access
    except AttributeError as exc:
        raise StoreError('this botocore keeps its connection pools elsewhere: S3 requests cannot be bounded '
                         '(%s)' % exc) from exc
    watch_pool_classes(classes)


def _before_send(**_: Any) -> None:
    check_deadline()
