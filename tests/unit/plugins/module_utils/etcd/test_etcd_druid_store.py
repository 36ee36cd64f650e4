# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""druid's StoreSpec and backup Secret as our store (ETCD-04)."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SpecError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.druid_store import credentials, parse_store


@pytest.mark.parametrize('store,url', [
    ({'provider': 'aws', 'container': 'etcd-bkp', 'prefix': 'etcd-main', 'secretRef': {'name': 's'}},
     's3://etcd-bkp/etcd-main'),
    ({'provider': 'S3', 'container': 'b', 'prefix': '/a/b/'}, 's3://b/a/b'),
    ({'provider': 'local', 'container': '/var/etcd/bkp', 'prefix': 'main'}, '/var/etcd/bkp/main'),
])
def test_druid_stores_map_to_ours(store, url):
    parsed = parse_store(store)
    assert parsed.url == url and parsed.secret == (store.get('secretRef') or {}).get('name')


@pytest.mark.parametrize('store,field,words', [
    ({'provider': 'gcp', 'container': 'b', 'prefix': 'p'}, 'spec.backup.store.provider', 'not supported here'),
    ({'provider': 'ftp', 'container': 'b', 'prefix': 'p'}, 'spec.backup.store.provider', 'expected one of'),
    ({'provider': 'aws', 'container': 'b'}, 'spec.backup.store.prefix', 'required'),
    ({'provider': 'aws', 'container': 'b', 'prefix': 'a/../b'}, 'spec.backup.store.prefix', '..'),
    ({'provider': 'aws', 'prefix': 'p'}, 'spec.backup.store.container', 'bucket name is required'),
    ({'provider': 'local', 'container': 'rel', 'prefix': 'p'}, 'spec.backup.store.container', 'local store root'),
    ({'provider': 'local', 'container': 'a/b', 'prefix': 'p'}, 'spec.backup.store.container', 'one directory name'),
    ({'provider': 'aws', 'container': 'b', 'prefix': 'p', 'secretRef': {}}, 'spec.backup.store.secretRef.name', ''),
])
def test_bad_stores_are_refused_naming_the_field(store, field, words):
    with pytest.raises(Exception) as refused:
        parse_store(store)
    assert field in str(refused.value) and words in str(refused.value)
    assert isinstance(refused.value, (SpecError, ValueError))


def test_a_local_container_lives_under_the_local_store_root():
    assert parse_store({'provider': 'local', 'container': 'bkp', 'prefix': 'main'}, local_root='/srv/stores').url == \
        '/srv/stores/bkp/main'


def test_credentials_read_etcd_backup_restores_keys_and_never_show_secrets():
    found = credentials({'accessKeyID': 'AK', 'secretAccessKey': 'SK', 'region': 'eu-west-1',
                         'endpoint': 'http://127.0.0.1:9000', 's3ForcePathStyle': 'true'})
    assert (found.access_key, found.secret_key, found.region, found.endpoint, found.force_path_style) == (
        'AK', 'SK', 'eu-west-1', 'http://127.0.0.1:9000', True)
    assert 'SK' not in repr(found)
    assert credentials({'AWS_ACCESS_KEY_ID': 'A2', 'AWS_SECRET_ACCESS_KEY': 'S2'}).access_key == 'A2'
