"""kube/secrets: the one Secret decoder (stringData before data, strict or replacing) and read_secret against the
API emulator over HTTP: a missing Secret, a Secret without the opt-in label, a usable one."""

import base64

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.secrets import (
    USABLE_BY_CONTROLLER, read_secret, secret_data, secret_text)


def b64(raw):
    return base64.b64encode(raw).decode()


SECRET = {'data': {'user': b64(b'etcd'), 'password': b64('pässwörd'.encode()), 'binary': b64(b'\xff\xfe')},
          'stringData': {'user': 'root', 'token': 't'}}


def test_secret_text_prefers_string_data_and_says_none_for_a_missing_key():
    assert secret_text(SECRET, 'user') == 'root'
    assert secret_text(SECRET, 'password') == 'pässwörd'
    assert secret_text(SECRET, 'nothing') is None


def test_strict_refuses_what_is_not_base64_utf8_naming_the_key_never_the_value():
    with pytest.raises(InvalidInput) as caught:
        secret_text(SECRET, 'binary', 'spec.secretRef')
    assert (caught.value.field, caught.value.rule, caught.value.value) == ('spec.secretRef.binary', 'base64', None)
    with pytest.raises(InvalidInput, match='^x.k: is not base64'):
        secret_text({'data': {'k': 'not base64!'}}, 'k', 'x')


def test_lenient_replaces_and_secret_data_decodes_every_key():
    data = secret_data(SECRET, strict=False)
    assert data == {'user': 'root', 'password': 'pässwörd', 'binary': '\ufffd\ufffd', 'token': 't'}


def test_read_secret_over_http(kube):
    path = api_path('v1', 'secrets', 'team-a', 'creds')
    with pytest.raises(InvalidInput) as caught:
        read_secret(kube, 'team-a', 'creds', 'spec.etcd.authSecretRef')
    assert (caught.value.field, caught.value.rule) == ('spec.etcd.authSecretRef', 'exists')
    kube.create(api_path('v1', 'secrets', 'team-a'), {'apiVersion': 'v1', 'kind': 'Secret',
                                                      'metadata': {'name': 'creds', 'namespace': 'team-a'},
                                                      'data': {'password': b64(b'secret')}})
    with pytest.raises(InvalidInput) as caught:
        read_secret(kube, 'team-a', 'creds', 'spec.etcd.authSecretRef')
    assert caught.value.rule == 'secret-opt-in'
    assert read_secret(kube, 'team-a', 'creds', 'f', opt_in=False) == {'password': 'secret'}
    kube.merge_patch(path, {'metadata': {'labels': {USABLE_BY_CONTROLLER: 'true'}}})
    assert read_secret(kube, 'team-a', 'creds', 'f') == {'password': 'secret'}
