"""A server that lies (issue 19 §6, found by the outside sweep): an HTTP server at the kubeconfig's address that
answers 200 with JSON of another shape - a proxy, a captive portal, another service. The client refuses the answer
(BadAnswer, a KubeError the modules report cleanly) instead of handing `"items": "not a list"` to code that would
crash on it. Real HTTP: the bad-input suite's liar."""

import kubernetes
import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import BadAnswer, KubeError
from support.bad_input import Liar


@pytest.fixture(scope='module')
def liar():
    server = Liar()
    configuration = kubernetes.client.Configuration()
    configuration.host = 'http://127.0.0.1:%d' % server.port
    client = KubeClient(configuration, timeout=5)
    yield client
    client.close()
    server.close()


def test_a_list_answer_that_is_not_the_api_servers_is_refused(liar):
    with pytest.raises(BadAnswer, match='not a Kubernetes object'):   # the list itself: metadata 5
        liar.list('/api/v1/nodes')


def test_an_object_whose_metadata_is_not_a_mapping_is_refused(liar):
    with pytest.raises(BadAnswer, match='metadata is not a mapping') as caught:
        liar.get('/api/v1/nodes/n1')
    assert isinstance(caught.value, KubeError) and '127.0.0.1' in str(caught.value)
