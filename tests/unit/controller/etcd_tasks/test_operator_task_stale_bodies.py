"""A kopf timer is handed the newest body its watch has seen, which can predate this process's own final write.
Such a stale body must neither run a finished task again nor mark it Failed as "interrupted by a restart"."""

import types

from prometheus_client import CollectorRegistry

from steward_controller.etcd_tasks.operator_task import OperatorTasks, TaskMetrics


class Client:
    """Records every call; a stale body must cause none."""

    def __init__(self):
        self.calls = []

    def merge_patch(self, path, body):
        self.calls.append(('patch', path, body))

    def list(self, path):
        self.calls.append(('list', path))
        return []

    def get_or_none(self, path):
        self.calls.append(('get', path))

    def delete(self, path):
        self.calls.append(('delete', path))


def tasks():
    client = Client()
    runtime = types.SimpleNamespace(client=client, clock=lambda: 1_800_000_000.0, report=lambda *a, **k: None,
                                    settings=types.SimpleNamespace(work_dir='/nonexistent'))
    return OperatorTasks(runtime, TaskMetrics(CollectorRegistry())), client


def body(state=None, uid='u-1'):
    obj = {'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'EtcdOperatorTask',
           'metadata': {'name': 'full', 'namespace': 'default', 'uid': uid},
           'spec': {'type': 'OnDemandSnapshotTask', 'config': 'type: full', 'ttlSecondsAfterFinished': 2,
                    'ownerEtcdRefrence': {'name': 'etcd-main', 'namespace': 'default'}}}
    if state:
        obj['status'] = {'state': state}
    return obj


def test_a_stale_in_progress_body_of_a_task_this_process_finished_changes_nothing():
    op, client = tasks()
    op.finished_here['u-1'] = 'Succeeded'
    op.tick(body('InProgress'))
    op.tick(body())            # an even older body: Pending
    assert client.calls == []


def test_an_in_progress_task_this_process_never_ran_is_marked_failed_not_run_again():
    op, client = tasks()
    op.tick(body('InProgress', uid='u-2'))
    [(verb, path, patch)] = client.calls
    assert verb == 'patch' and path.endswith('/etcdoperatortasks/full/status')
    assert patch['status']['state'] == 'Failed'
    assert patch['status']['lastErrors'][0]['code'] == 'ERR_INTERRUPTED'


def test_a_finished_task_past_its_ttl_is_deleted_and_forgotten():
    op, client = tasks()
    op.finished_here['u-1'] = 'Succeeded'
    done = body('Succeeded')
    done['status']['lastOperation'] = {'lastTransitionTime': '2020-01-01T00:00:00Z'}
    op.tick(done)
    assert [c[0] for c in client.calls] == ['delete']
    assert 'u-1' not in op.finished_here
