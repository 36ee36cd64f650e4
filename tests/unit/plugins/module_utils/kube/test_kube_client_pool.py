"""KubeClient.with_pool: a client for many threads gets a connection pool as large, on a copy of the configuration
(the kubernetes client's default is 5 per CPU; the machines loop runs 50 workers)."""

import kubernetes

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient


def pool_size(client):
    return client.api.rest_client.pool_manager.connection_pool_kw['maxsize']


def test_a_client_for_many_threads_has_a_pool_as_large_and_leaves_the_original_alone():
    configuration = kubernetes.client.Configuration()
    configuration.host = 'http://127.0.0.1:1'
    configuration.api_key = {'authorization': 'Bearer t'}
    configuration.connection_pool_maxsize = 4
    base = KubeClient(configuration, timeout=7.0)
    wide = base.with_pool(55)
    assert pool_size(wide) == 55 and wide.timeout == 7.0 and wide.host == base.host
    assert wide.configuration.api_key == {'authorization': 'Bearer t'}
    assert pool_size(base) == 4 and configuration.connection_pool_maxsize == 4
    assert pool_size(base.with_pool(2)) == 4          # never smaller than configured
