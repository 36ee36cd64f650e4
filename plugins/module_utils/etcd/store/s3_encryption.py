# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Server-side encryption of snapshot objects in S3: on by default, because a snapshot holds every
Secret of the cluster.

Modes (as amazon.aws.s3_object and etcd-backup-restore name them):
* `AES256` (default): SSE-S3, keys managed by the store;
* `aws:kms`: SSE-KMS, with the store's default KMS key or `kms_key_id`;
* `SSE-C`: a customer key the store never keeps (etcd-backup-restore's `sseCustomerKey`); every read
  needs the same key, so losing it loses the backups;
* `none`: for S3-compatible stores without encryption support; must be asked for explicitly.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
from typing import Any, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

MODE_SSE_S3 = 'AES256'
MODE_KMS = 'aws:kms'
MODE_SSE_C = 'SSE-C'
MODE_NONE = 'none'
MODES = (MODE_SSE_S3, MODE_KMS, MODE_SSE_C, MODE_NONE)
CUSTOMER_KEY_BYTES = 32  # AES-256


@dataclasses.dataclass(frozen=True)
class S3Encryption:
    mode: str = MODE_SSE_S3
    kms_key_id: Optional[str] = None
    customer_key: Optional[bytes] = dataclasses.field(default=None, repr=False)

    def write_args(self) -> Dict[str, Any]:
        """Extra arguments of put_object / upload_file (CreateMultipartUpload)."""
        if self.mode == MODE_SSE_S3:
            return {'ServerSideEncryption': MODE_SSE_S3}
        if self.mode == MODE_KMS:
            args = {'ServerSideEncryption': MODE_KMS}
            if self.kms_key_id:
                args['SSEKMSKeyId'] = self.kms_key_id
            return args
        return self.read_args()

    def read_args(self) -> Dict[str, Any]:
        """Extra arguments of get_object / head_object / download_file: only SSE-C needs any."""
        if self.mode == MODE_SSE_C and self.customer_key:
            return {'SSECustomerAlgorithm': 'AES256', 'SSECustomerKey': self.customer_key}
        return {}

    def confirmed_by(self, head: Dict[str, Any]) -> bool:
        """Whether a head_object answer shows the encryption that was asked for."""
        if self.mode == MODE_NONE:
            return True
        if self.mode == MODE_SSE_C:
            return head.get('SSECustomerAlgorithm') == 'AES256' and head.get('SSECustomerKeyMD5') == self.key_md5()
        return head.get('ServerSideEncryption') == self.mode

    def key_md5(self) -> Optional[str]:
        if not self.customer_key:
            return None
        return base64.b64encode(hashlib.md5(self.customer_key).digest()).decode('ascii')  # nosec - S3's key check

    def describe(self) -> Dict[str, Any]:
        """For results, status and metadata: never the key, only its MD5 (what S3 itself shows)."""
        data: Dict[str, Any] = {'mode': self.mode}
        if self.kms_key_id:
            data['kms_key_id'] = self.kms_key_id
        if self.customer_key:
            data['customer_key_md5'] = self.key_md5()
        return data


def customer_key_bytes(value: str, field: str) -> bytes:
    """The 32-byte AES-256 key from its raw text (etcd-backup-restore's sseCustomerKey) or base64."""
    raw = value.encode('utf-8')
    if len(raw) == CUSTOMER_KEY_BYTES:
        return raw
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        decoded = b''
    if len(decoded) == CUSTOMER_KEY_BYTES:
        return decoded
    raise InvalidInput(field, 'sse-c-key', 'must be a 32-byte AES-256 key, as 32 characters or base64 '
                       '(got %d characters)' % len(value), secret=True)


def s3_encryption(*, encrypt: Any = True, mode: Any = MODE_SSE_S3, kms_key_id: Any = None,
                  customer_key: Any = None, fields: Optional[Dict[str, str]] = None) -> S3Encryption:
    """Checked settings; InvalidInput names the option (or CR field, through `fields`) that is wrong."""
    names = {'encrypt': 'encrypt', 'mode': 'encryption_mode', 'kms_key_id': 'encryption_kms_key_id',
             'customer_key': 'sse_customer_key'}
    names.update(fields or {})
    mode = mode or MODE_SSE_S3
    if customer_key and mode == MODE_SSE_S3:
        mode = MODE_SSE_C  # a customer key asks for SSE-C; AWS refuses it together with SSE-S3
    if mode not in MODES:
        raise InvalidInput(names['mode'], 'one-of', 'expected one of %s, got %s' % (', '.join(MODES), shown(mode)), mode)
    if not encrypt or mode == MODE_NONE:
        if customer_key or kms_key_id:
            raise InvalidInput(names['encrypt'], 'conflict', 'server-side encryption is off, but %s is set' % (
                names['customer_key'] if customer_key else names['kms_key_id']))
        return S3Encryption(MODE_NONE)
    if kms_key_id and mode != MODE_KMS:
        raise InvalidInput(names['kms_key_id'], 'conflict', 'only used with %s: %s' % (names['mode'], MODE_KMS))
    if mode == MODE_SSE_C:
        if not customer_key:
            raise InvalidInput(names['customer_key'], 'required', 'required for %s: %s' % (names['mode'], MODE_SSE_C))
        return S3Encryption(MODE_SSE_C, customer_key=customer_key_bytes(str(customer_key), names['customer_key']))
    if customer_key:
        raise InvalidInput(names['customer_key'], 'conflict', 'a customer key (SSE-C) cannot be combined with %s: %s'
                           % (names['mode'], mode), secret=True)
    return S3Encryption(mode, kms_key_id=str(kms_key_id) if kms_key_id else None)
