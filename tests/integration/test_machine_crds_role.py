"""steward.cluster.machine_crds in real ansible-playbook runs with kubernetes.core against the API emulator
(lab/kube/api.py): check mode writes nothing, apply is idempotent, removal deletes the four CRDs once."""

from __future__ import annotations

from support.ansible import run_playbook

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

CRDS = ['machineclasses.machine.sapcloud.io', 'machinedeployments.machine.sapcloud.io', 'machines.machine.sapcloud.io',
        'machinesets.machine.sapcloud.io']


def crds(client):
    return sorted(c['metadata']['name'] for c in client.list(api_path('apiextensions.k8s.io/v1', 'customresourcedefinitions')))


def run(kubeconfig, state, check=False):
    # The emulator sets no Established condition on CRDs, so the role does not wait for it here.
    result = run_playbook([{'hosts': 'localhost', 'connection': 'local', 'gather_facts': False, 'tasks': [
        {'ansible.builtin.include_role': {'name': 'steward.cluster.machine_crds'},
         'vars': {'machine_crds_kubeconfig': kubeconfig, 'machine_crds_state': state, 'machine_crds_wait': False}}]}],
        check=check)
    assert result.rc == 0, 'rc=%s\nstderr=%s\nstdout=%s' % (result.rc, result.stderr[-3000:], result.stdout[-5000:])
    return result.changed()


def test_apply_is_idempotent_and_removal_deletes_the_crds(bare_kube, tmp_path):
    client, kubeconfig = bare_kube, bare_kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig'))
    assert run(kubeconfig, 'present', check=True) == 1 and crds(client) == []
    assert run(kubeconfig, 'present') == 1 and crds(client) == CRDS
    assert run(kubeconfig, 'present') == 0
    assert run(kubeconfig, 'absent', check=True) == 1 and crds(client) == CRDS
    assert run(kubeconfig, 'absent') == 1 and crds(client) == []
    assert run(kubeconfig, 'absent') == 0
