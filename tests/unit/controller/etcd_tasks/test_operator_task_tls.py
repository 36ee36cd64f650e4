"""On-demand maintenance of an Etcd with client TLS reaches its members over https with the Etcd's own CA and
client certificate Secrets (druid's TLSConfig), held in files only while the work runs; a missing Secret, key or
clientTLSSecretRef fails the task naming the field."""

import base64
import os
import types

import pytest

from steward_controller.etcd_tasks import operator_task as op


def _b64(data):
    return base64.b64encode(data).decode()


class Client:
    def __init__(self, objects):
        self.objects = objects

    def get_or_none(self, path):
        return self.objects.get(path)

    def list(self, path, label_selector=None):
        return self.objects.get(path, [])


POD = {'metadata': {'name': 'etcd-main-0'}, 'status': {'podIP': '127.0.100.1'}}
SECRETS = {'/api/v1/namespaces/shoot/secrets/ca-etcd': {'data': {'bundle.crt': _b64(b'CA PEM')}},
           '/api/v1/namespaces/shoot/secrets/etcd-client-tls': {'data': {'tls.crt': _b64(b'CERT PEM'),
                                                                         'tls.key': _b64(b'KEY PEM')}}}


def etcd(tls):
    spec = {'etcd': {'clientPort': 2379}}
    if tls is not None:
        spec['etcd']['clientUrlTls'] = tls
    return {'metadata': {'name': 'etcd-main', 'namespace': 'shoot'}, 'spec': spec}


def runtime(objects):
    return types.SimpleNamespace(client=Client(dict(objects, **{'/api/v1/namespaces/shoot/pods': [POD]})))


TLS = {'tlsCASecretRef': {'name': 'ca-etcd', 'dataKey': 'bundle.crt'}, 'serverTLSSecretRef': {'name': 'server'},
       'clientTLSSecretRef': {'name': 'etcd-client-tls'}}


def test_client_tls_gives_an_https_connection_with_the_secrets_files_removed_afterwards():
    with op._connection(runtime(SECRETS), etcd(TLS)) as conn:
        assert conn.endpoints == ('https://127.0.100.1:2379',)
        files = (conn.ca_cert, conn.client_cert, conn.client_key)
        assert [open(f, 'rb').read() for f in files] == [b'CA PEM', b'CERT PEM', b'KEY PEM']
        assert all(os.stat(f).st_mode & 0o777 == 0o600 for f in files)
    assert not any(os.path.exists(f) for f in files)


def test_without_tls_the_connection_is_plain_http():
    with op._connection(runtime({}), etcd(None)) as conn:
        assert conn.endpoints == ('http://127.0.100.1:2379',) and conn.ca_cert is None


@pytest.mark.parametrize('tls,objects,words', [
    (dict(TLS, clientTLSSecretRef=None), SECRETS, 'spec.etcd.clientUrlTls.clientTLSSecretRef: required'),
    (TLS, {k: v for k, v in SECRETS.items() if 'ca-etcd' not in k},
     'spec.etcd.clientUrlTls.tlsCASecretRef: Secret shoot/ca-etcd not found'),
    (dict(TLS, tlsCASecretRef={'name': 'ca-etcd'}), SECRETS,
     "spec.etcd.clientUrlTls.tlsCASecretRef: Secret shoot/ca-etcd has no key 'ca.crt'"),
])
def test_missing_tls_material_fails_the_task_naming_it(tls, objects, words):
    with pytest.raises(op.TaskFailed) as failed:
        with op._connection(runtime(objects), etcd(tls)):
            pass
    assert failed.value.code == 'ERR_TLS' and words in str(failed.value)


def test_defragmentation_takes_the_etcds_defrag_timeout_per_member(monkeypatch):
    """ETCD-40's rolling defragmentation (fully healthy, the leader last: etcd/cluster/defrag.rolling_defrag) with
    the Etcd's spec.etcd.etcdDefragTimeout (druid's default 8m), not a fixed one."""
    seen = []
    monkeypatch.setattr(op, 'rolling_defrag', lambda conn, **kw: seen.append((conn.endpoints, kw)) or {'members': []})
    task = types.SimpleNamespace(config={'maintenanceType': {'etcdCompaction': False, 'etcdDefragmentation': True}})
    body = etcd(None)
    op._maintenance(runtime({}), task, body)
    body['spec']['etcd']['etcdDefragTimeout'] = '2m'
    op._maintenance(runtime({}), task, body)
    assert seen == [(('http://127.0.100.1:2379',), {'defrag_timeout': 480.0}),
                    (('http://127.0.100.1:2379',), {'defrag_timeout': 120.0})]
