"""The `etcd` loop's reporting: an outcome that changes nothing is posted once per reason until its message changes;
lastOperation and lastErrors keep druid's shape."""

import types

from steward_controller.etcd_druid import DruidOptions
from steward_controller.etcd_druid.loop import EtcdDruidLoop


class Recorder:
    def __init__(self):
        self.posted = []

    def report(self, body, reason, message, warning=False, kind='', outcome=''):
        self.posted.append((reason, message))


def loop():
    runtime = types.SimpleNamespace(client=None, health=types.SimpleNamespace(beat=lambda k: None), clock=lambda: 0.0)
    recorder = Recorder()
    runtime.report = recorder.report
    return EtcdDruidLoop(runtime, DruidOptions()), recorder


def test_non_changing_outcomes_are_posted_once_per_reason():
    lp, rec = loop()
    key = ('ns', 'e')
    for reason, message in [('ReconcileSkipped', 'awaiting the annotation'), ('UpdatePostponed', 'waits for BackupReady')] * 3:
        lp.say_once(key, {}, reason, message)
    lp.say_once(key, {}, 'UpdatePostponed', 'waits for AllMembersReady')
    assert rec.posted == [('ReconcileSkipped', 'awaiting the annotation'), ('UpdatePostponed', 'waits for BackupReady'),
                          ('UpdatePostponed', 'waits for AllMembersReady')]
    lp.forget_said(key)
    lp.say_once(key, {}, 'ReconcileSkipped', 'awaiting the annotation')
    assert len(rec.posted) == 4


def test_last_operation_and_errors_shape():
    obj = {'status': {'observedGeneration': 1, 'lastOperation': {'type': 'Reconcile', 'state': 'Processing', 'runID': 'r1'},
                      'lastErrors': [{'code': 'ERR_A', 'description': 'old', 'observedAt': 'x'}]}}
    op = EtcdDruidLoop.operation(obj, 'Processing', 'scaling', 0.0)
    assert (op['type'], op['state'], op['runID'], op['description']) == ('Reconcile', 'Processing', 'r1', 'scaling')
    assert EtcdDruidLoop.operation({}, 'Succeeded', 'done', 0.0)['type'] == 'Create'
    errors = EtcdDruidLoop.errors(obj, 'ERR_B', 'new', 0.0)
    assert [e['code'] for e in errors] == ['ERR_B', 'ERR_A'] and set(errors[0]) == {'code', 'description', 'observedAt'}
    assert [e['code'] for e in EtcdDruidLoop.errors(obj, 'ERR_A', 'again', 0.0)] == ['ERR_A']
