# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A quorum-loss recovery's save step (druid/recovery.SaveSource) against a real etcd that serves its client URL over
TLS with client-cert-auth, as an Etcd with `spec.etcd.clientUrlTls` runs it: the `etcd` loop reads the surviving
member's data at its https client URL with the Etcd's own CA and client certificate Secrets (druid/client_tls.py),
verifies it and publishes it to the Etcd's store as a full snapshot (the engine's snapshot path)."""

from __future__ import annotations

import base64
import types

import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.druid import client_tls as ct
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import parse_etcd
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store

from steward_controller.etcd_druid import DruidOptions
from steward_controller.etcd_druid.loop import EtcdDruidLoop
from support.etcd_cluster import EtcdCluster, etcd_bin_dirs
from support.tls import make_pki

pytestmark = pytest.mark.skipif(not etcd_bin_dirs(), reason='no etcd binary: run make all')


def _b64(data):
    return base64.b64encode(data).decode()


def test_the_loop_saves_a_surviving_members_data_over_client_tls(tmp_path):
    pki = make_pki(str(tmp_path / 'pki'))
    cluster = EtcdCluster(str(tmp_path / 'etcd'), size=1, pki=pki)
    cluster.start()
    try:
        url = cluster.endpoints[0]
        for i in range(5):
            answer = requests.post(url + '/v3/kv/put', json={'key': _b64(b'k%d' % i), 'value': _b64(b'v')}, timeout=10,
                                   **cluster.http)
            assert answer.status_code == 200, answer.text
        revision = int(answer.json()['header']['revision'])
        obj = {'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
               'metadata': {'name': 'etcd-main', 'namespace': 'shoot'},
               'spec': {'replicas': 3, 'labels': {'app': 'etcd-main'},
                        'etcd': {'clientUrlTls': {'tlsCASecretRef': {'name': 'ca-etcd'},
                                                  'serverTLSSecretRef': {'name': 'etcd-server-tls'},
                                                  'clientTLSSecretRef': {'name': 'etcd-client-tls'}}},
                        'backup': {'store': {'provider': 'local', 'container': 'backups', 'prefix': 'shoot--etcd-main'}}}}
        spec = parse_etcd(obj)
        secrets = {'/api/v1/namespaces/shoot/secrets/ca-etcd': {'data': {'ca.crt': _b64(open(pki['ca'], 'rb').read())}},
                   '/api/v1/namespaces/shoot/secrets/etcd-client-tls': {'data': {
                       'tls.crt': _b64(open(pki['client_cert'], 'rb').read()),
                       'tls.key': _b64(open(pki['client_key'], 'rb').read())}}}
        root = str(tmp_path / 'stores')
        runtime = types.SimpleNamespace(
            client=types.SimpleNamespace(get_or_none=secrets.get), clock=lambda: 1_800_000_000.0,
            settings=types.SimpleNamespace(loop_options={'etcd-tasks': types.SimpleNamespace(local_store_root=root)}),
            health=types.SimpleNamespace(beat=lambda key: None, api_ok=lambda: None))
        loop = EtcdDruidLoop(runtime, DruidOptions())
        # the URL as the loop's SaveSource builds it from the pod's address: https, the Etcd's client port
        assert ct.member_client_urls(spec, ['127.0.0.1'])[0].startswith('https://127.0.0.1:')
        said = loop.save_source(obj, spec, url)
        assert 'revision %d' % revision in said, said
        (snap,) = open_store('%s/backups/shoot--etcd-main' % root).list()
        assert snap.is_full and snap.name.end_revision == revision
    finally:
        cluster.stop()
