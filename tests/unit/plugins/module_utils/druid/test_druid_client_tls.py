# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""druid/client_tls.py: an Etcd's client TLS Secrets -> the PEM material and the connection to its members, with
every missing piece named (field, Secret, key) before etcd is asked."""

import base64
import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import client_tls as ct
from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import DruidError
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import parse_etcd

TLS = {'tlsCASecretRef': {'name': 'ca-etcd', 'dataKey': 'bundle.crt'}, 'serverTLSSecretRef': {'name': 'server'},
       'clientTLSSecretRef': {'name': 'etcd-client-tls'}}


def _b64(data):
    return base64.b64encode(data).decode()


SECRETS = {('shoot', 'ca-etcd'): {'data': {'bundle.crt': _b64(b'CA PEM')}},
           ('shoot', 'etcd-client-tls'): {'data': {'tls.crt': _b64(b'CERT PEM'), 'tls.key': _b64(b'KEY PEM')}}}


def spec(tls=None, port=2379):
    etcd = {'clientPort': port}
    if tls is not None:
        etcd['clientUrlTls'] = tls
    return parse_etcd({'metadata': {'name': 'etcd-main', 'namespace': 'shoot'},
                       'spec': {'replicas': 3, 'labels': {'app': 'etcd-main'}, 'etcd': etcd, 'backup': {}}})


def reader(secrets, reads=None):
    def read(namespace, name):
        if reads is not None:
            reads.append((namespace, name))
        return secrets.get((namespace, name))
    return read


def test_no_client_tls_is_plain_http_and_reads_no_secret():
    reads = []
    assert ct.client_pem(spec().etcd.client_tls, reader(SECRETS, reads)) is None and reads == []
    assert ct.member_client_urls(spec(port=3379), ['10.0.0.1', '', '10.0.0.2']) == (
        'http://10.0.0.1:3379', 'http://10.0.0.2:3379')
    with ct.member_connection(spec(), ('http://10.0.0.1:2379',), reader({})) as conn:
        assert conn.endpoints == ('http://10.0.0.1:2379',) and conn.ca_cert is None and conn.client_key is None


def test_the_secrets_keys_are_druids_and_each_secret_is_read_once():
    reads = []
    pem = ct.client_pem(spec(TLS).etcd.client_tls, reader(SECRETS, reads))
    assert (pem.ca, pem.cert, pem.key) == (b'CA PEM', b'CERT PEM', b'KEY PEM')
    assert sorted(reads) == [('shoot', 'ca-etcd'), ('shoot', 'etcd-client-tls')]
    assert 'KEY PEM' not in repr(pem)     # the key reaches no log
    keys = ct.secret_keys(spec(dict(TLS, tlsCASecretRef={'name': 'ca-etcd', 'namespace': 'garden'})).etcd.client_tls)
    assert [(k.field, k.namespace, k.name, k.key) for k in keys] == [
        ('spec.etcd.clientUrlTls.tlsCASecretRef', 'garden', 'ca-etcd', 'ca.crt'),
        ('spec.etcd.clientUrlTls.clientTLSSecretRef', 'shoot', 'etcd-client-tls', 'tls.crt'),
        ('spec.etcd.clientUrlTls.clientTLSSecretRef', 'shoot', 'etcd-client-tls', 'tls.key')]


def test_the_connection_is_https_with_the_material_in_files_removed_afterwards():
    with ct.member_connection(spec(TLS), ct.member_client_urls(spec(TLS), ['10.0.0.1']), reader(SECRETS)) as conn:
        assert conn.endpoints == ('https://10.0.0.1:2379',)
        files = (conn.ca_cert, conn.client_cert, conn.client_key)
        assert [open(f, 'rb').read() for f in files] == [b'CA PEM', b'CERT PEM', b'KEY PEM']
        assert all(os.stat(f).st_mode & 0o777 == 0o600 for f in files)
        assert os.stat(os.path.dirname(conn.client_key)).st_mode & 0o777 == 0o700
    assert not any(os.path.exists(f) for f in files) and not os.path.exists(os.path.dirname(files[0]))


@pytest.mark.parametrize('tls,secrets,field,secret,key,words', [
    (dict(TLS, clientTLSSecretRef=None), SECRETS, 'spec.etcd.clientUrlTls.clientTLSSecretRef', '', '',
     'spec.etcd.clientUrlTls.clientTLSSecretRef: required'),
    (TLS, {k: v for k, v in SECRETS.items() if k[1] != 'ca-etcd'}, 'spec.etcd.clientUrlTls.tlsCASecretRef',
     'shoot/ca-etcd', 'bundle.crt', 'spec.etcd.clientUrlTls.tlsCASecretRef: Secret shoot/ca-etcd not found'),
    (dict(TLS, tlsCASecretRef={'name': 'ca-etcd'}), SECRETS, 'spec.etcd.clientUrlTls.tlsCASecretRef',
     'shoot/ca-etcd', 'ca.crt', "Secret shoot/ca-etcd has no key 'ca.crt'"),
    (TLS, {**SECRETS, ('shoot', 'etcd-client-tls'): {'data': {'tls.crt': _b64(b'C')}}},
     'spec.etcd.clientUrlTls.clientTLSSecretRef', 'shoot/etcd-client-tls', 'tls.key',
     "spec.etcd.clientUrlTls.clientTLSSecretRef: Secret shoot/etcd-client-tls has no key 'tls.key'"),
    (TLS, {**SECRETS, ('shoot', 'etcd-client-tls'): {'data': {'tls.crt': 'not base64!', 'tls.key': 'eA=='}}},
     'spec.etcd.clientUrlTls.clientTLSSecretRef', 'shoot/etcd-client-tls', 'tls.crt', "key 'tls.crt' is not base64"),
])
def test_missing_material_is_named_before_any_connection(tls, secrets, field, secret, key, words):
    with pytest.raises(ct.ClientTLSError) as failed:
        with ct.member_connection(spec(tls), ('https://10.0.0.1:2379',), reader(secrets)):
            pytest.fail('no connection without the material')
    assert isinstance(failed.value, DruidError) and words in str(failed.value)
    assert (failed.value.field, failed.value.secret, failed.value.key) == (field, secret, key)
