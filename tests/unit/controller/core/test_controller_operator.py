"""kopf logs in with the credentials of the controller's own client (--kubeconfig), not only the default ones."""

import json

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import load_configuration

from steward_controller.core.operator import connection_info


def test_kopf_gets_the_server_and_token_of_the_kubeconfig_given(tmp_path, monkeypatch):
    monkeypatch.delenv('KUBECONFIG', raising=False)
    monkeypatch.setenv('HOME', str(tmp_path))                 # no ~/.kube/config: kopf alone would find nothing
    path = tmp_path / 'lab.kubeconfig'
    path.write_text(json.dumps({
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'lab',
        'clusters': [{'name': 'lab', 'cluster': {'server': 'http://127.0.0.1:45503'}}],
        'users': [{'name': 'u', 'user': {'token': 'lab-token'}}],
        'contexts': [{'name': 'lab', 'context': {'cluster': 'lab', 'user': 'u'}}]}))
    info = connection_info(load_configuration(str(path)))
    assert (info.server, info.scheme, info.token) == ('http://127.0.0.1:45503', 'Bearer', 'lab-token')
    assert info.certificate_path is None and info.username is None
