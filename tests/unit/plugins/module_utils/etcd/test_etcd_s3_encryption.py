"""S3 server-side encryption settings: AES256 by default, KMS, SSE-C with a customer key, or off on request."""

from __future__ import annotations

import base64
import hashlib

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_encryption import s3_encryption

KEY = 'k' * 32
KEY_B64 = base64.b64encode(b'\x01' * 32).decode()


def test_default_is_sse_s3():
    enc = s3_encryption()
    assert enc.write_args() == {'ServerSideEncryption': 'AES256'}
    assert enc.read_args() == {}
    assert enc.describe() == {'mode': 'AES256'}


def test_kms_with_and_without_key_id():
    assert s3_encryption(mode='aws:kms').write_args() == {'ServerSideEncryption': 'aws:kms'}
    enc = s3_encryption(mode='aws:kms', kms_key_id='alias/etcd')
    assert enc.write_args() == {'ServerSideEncryption': 'aws:kms', 'SSEKMSKeyId': 'alias/etcd'}
    assert enc.confirmed_by({'ServerSideEncryption': 'aws:kms'}) and not enc.confirmed_by({})


@pytest.mark.parametrize('key, raw', [(KEY, KEY.encode()), (KEY_B64, b'\x01' * 32)], ids=['raw-32', 'base64'])
def test_sse_c_key_raw_or_base64(key, raw):
    for enc in (s3_encryption(customer_key=key), s3_encryption(mode='SSE-C', customer_key=key)):
        assert enc.mode == 'SSE-C'
        assert enc.write_args() == enc.read_args() == {'SSECustomerAlgorithm': 'AES256', 'SSECustomerKey': raw}
        md5 = base64.b64encode(hashlib.md5(raw).digest()).decode()
        assert enc.describe() == {'mode': 'SSE-C', 'customer_key_md5': md5}
        assert key not in repr(enc) and key not in str(enc.describe())
        assert enc.confirmed_by({'SSECustomerAlgorithm': 'AES256', 'SSECustomerKeyMD5': md5})


def test_encryption_off_only_when_asked():
    assert s3_encryption(encrypt=False).write_args() == {}
    assert s3_encryption(encrypt=False).confirmed_by({})


@pytest.mark.parametrize('args, field, rule', [
    ({'mode': 'rot13'}, 'encryption_mode', 'one-of'),
    ({'mode': 'SSE-C'}, 'sse_customer_key', 'required'),
    ({'customer_key': 'short'}, 'sse_customer_key', 'sse-c-key'),
    ({'mode': 'aws:kms', 'customer_key': KEY}, 'sse_customer_key', 'conflict'),
    ({'kms_key_id': 'alias/x'}, 'encryption_kms_key_id', 'conflict'),
    ({'encrypt': False, 'customer_key': KEY}, 'encrypt', 'conflict'),
    ({'encrypt': False, 'kms_key_id': 'alias/x'}, 'encrypt', 'conflict'),
], ids=['unknown-mode', 'sse-c-without-key', 'short-key', 'kms-and-key', 'key-id-without-kms', 'off-with-key',
        'off-with-kms-id'])
def test_bad_settings_name_the_option(args, field, rule):
    with pytest.raises(InvalidInput) as err:
        s3_encryption(**args)
    assert (err.value.field, err.value.rule) == (field, rule)
    assert KEY not in str(err.value) and err.value.value in (None, args.get('mode'))


def test_fields_can_be_named_as_the_custom_resource_names_them():
    with pytest.raises(InvalidInput, match=r'^spec.store.encryption.mode: '):
        s3_encryption(mode='nope', fields={'mode': 'spec.store.encryption.mode'})
