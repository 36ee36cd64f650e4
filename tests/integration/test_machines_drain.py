"""A deleting machine's drain end to end (inventory §2 acceptance 6-9, machines.md §(f)4): evictions through the
emulator's Eviction API with PodDisruptionBudgets, the blocking budget named in status, nothing forced before the
drain timeout unless the cloud says the instance is stopped or the Node was NotReady too long; pods with volumes
one at a time; force-deletion skips evictions; a Node can ask for its machine to be replaced; a create error is
CrashLoopBackOff with the cloud's message."""

import time

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.machines_bench import wait_for, when


def add_pod(bench, name, node, labels):
    pod = bench.kube.create(api_path('v1', 'pods', bench.namespace), {
        'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': name, 'namespace': bench.namespace, 'labels': labels,
                                                        'ownerReferences': [{'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
                                                                             'name': 'web', 'uid': 'rs-uid', 'controller': True}]},
        'spec': {'nodeName': node, 'containers': [{'name': 'c', 'image': 'nginx'}]}})
    bench.kube.merge_patch(api_path('v1', 'pods', bench.namespace, name, 'status'), {'status': {
        'phase': 'Running', 'conditions': [{'type': 'Ready', 'status': 'True'}]}})
    return pod


def pod_exists(bench, name):
    return bench.kube.get_or_none(api_path('v1', 'pods', bench.namespace, name)) is not None


def drained_condition(bench, name):
    m = bench.kube.get_or_none(bench.path('machines', name))
    return next((c for c in ((m or {}).get('status') or {}).get('conditions') or [] if c['type'] == 'Drained'), None)


def one_machine(bench, **controller_flags):
    bench.create_class()
    bench.create_deployment(replicas=1)
    bench.controller(*[x for k, v in controller_flags.items() for x in ('--' + k.replace('_', '-'), v)])
    [m] = bench.wait_running(1)
    return m


def test_a_blocking_budget_is_named_and_nothing_is_forced_before_the_drain_timeout(bench):
    m = one_machine(bench)
    node = m['metadata']['labels']['node']
    add_pod(bench, 'web-0', node, {'app': 'web'})
    add_pod(bench, 'free-0', node, {'app': 'free'})
    bench.kube.create(api_path('policy/v1', 'poddisruptionbudgets', bench.namespace), {
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': 'web', 'namespace': bench.namespace},
        'spec': {'minAvailable': 1, 'selector': {'matchLabels': {'app': 'web'}}}})
    started = time.monotonic()
    bench.kube.delete(bench.path('machines', m['metadata']['name']))
    cond = wait_for(lambda: when(drained_condition(bench, m['metadata']['name']),
                                 lambda c: c and 'PodDisruptionBudget' in c['message']), 60, 1.0,
                    what='Drained=False naming the budget')
    assert cond['status'] == 'False' and cond['reason'] == 'PodDisruptionBudget'
    assert '%s/web (minAvailable=1)' % bench.namespace in cond['message']
    marked = [c for c in bench.kube.get(api_path('v1', 'nodes', name=node))['status']['conditions'] if c['type'] == 'Terminating']
    assert [(c['status'], c['reason']) for c in marked] == [('True', 'ScaleDown')]     # MCM marks the Node it drains
    assert not pod_exists(bench, 'free-0') and pod_exists(bench, 'web-0')     # evicted / refused
    if time.monotonic() - started < 30:      # the 30 s drain timeout has not passed (a loaded machine may be later)
        assert pod_exists(bench, 'web-0')
    wait_for(lambda: not pod_exists(bench, 'web-0'), 90, 1.0, what='forced after the drain timeout')
    assert time.monotonic() - started >= 30
    wait_for(lambda: not bench.kube.get_or_none(bench.path('machines', m['metadata']['name'])), 90, 1.0, what='machine gone')


def test_max_evict_retries_deletes_a_pod_its_budget_keeps_refusing_long_before_the_drain_timeout(bench):
    """Acceptance 7 (MCM-22, both set: both respected): the machine's own maxEvictRetries 1 and drainTimeout 10m.
    A budget refuses the eviction; it is retried once, MCM's 20 s eviction interval later, and then the pod is
    deleted and the drain completes without being forced, 10 minutes before the drain timeout."""
    bench.create_class()
    bench.create_deployment(replicas=1, template={'metadata': {'labels': {'name': 'pool'}}, 'spec': {
        'class': {'kind': 'MachineClass', 'name': 'nodes'}, 'maxEvictRetries': 1, 'drainTimeout': '10m'}})
    bench.controller()
    [m] = bench.wait_running(1)
    name, node = m['metadata']['name'], m['metadata']['labels']['node']
    add_pod(bench, 'web-0', node, {'app': 'web'})
    bench.kube.create(api_path('policy/v1', 'poddisruptionbudgets', bench.namespace), {
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': 'web', 'namespace': bench.namespace},
        'spec': {'minAvailable': 1, 'selector': {'matchLabels': {'app': 'web'}}}})
    bench.kube.delete(bench.path('machines', name))
    cond = wait_for(lambda: when(drained_condition(bench, name), lambda c: c and 'PodDisruptionBudget' in c['message']), 60, 0.5,
                    what='Drained=False naming the budget')
    refused = time.monotonic()
    assert cond['reason'] == 'PodDisruptionBudget' and pod_exists(bench, 'web-0')
    wait_for(lambda: not pod_exists(bench, 'web-0'), 90, 0.5, what='the pod deleted after its eviction retry')
    assert time.monotonic() - refused >= 15        # one retry, 20 s after the first counted refusal
    wait_for(lambda: bench.kube.get_or_none(bench.path('machines', name)) is None, 90, 0.5, what='machine gone')
    reasons = {e['reason'] for e in bench.kube.list(api_path('v1', 'events', bench.namespace))}
    assert 'MachineDrainForced' not in reasons


def test_a_stopped_instance_bypasses_the_budget_at_once(bench):
    m = one_machine(bench, machine_drain_timeout='10m')
    node = m['metadata']['labels']['node']
    add_pod(bench, 'web-0', node, {'app': 'web'})
    bench.kube.create(api_path('policy/v1', 'poddisruptionbudgets', bench.namespace), {
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': 'web', 'namespace': bench.namespace},
        'spec': {'minAvailable': 1, 'selector': {'matchLabels': {'app': 'web'}}}})
    bench.ec2().stop_instances(InstanceIds=[m['spec']['providerID'].rsplit('/', 1)[1]])
    started = time.monotonic()
    bench.kube.delete(bench.path('machines', m['metadata']['name']))
    wait_for(lambda: not bench.kube.get_or_none(bench.path('machines', m['metadata']['name'])), 120, 1.0,
             what='machine deleted despite the budget')
    assert time.monotonic() - started < 120 and not pod_exists(bench, 'web-0')
    events = [e for e in bench.kube.list(api_path('v1', 'events', bench.namespace)) if e['reason'] == 'MachineDrainForced']
    assert events and 'stopped' in events[0]['message']


def test_force_deletion_label_skips_evictions_and_a_node_can_ask_for_replacement(bench):
    m = one_machine(bench)
    name, node = m['metadata']['name'], m['metadata']['labels']['node']
    add_pod(bench, 'web-0', node, {'app': 'web'})
    bench.kube.create(api_path('policy/v1', 'poddisruptionbudgets', bench.namespace), {
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': 'web', 'namespace': bench.namespace},
        'spec': {'minAvailable': 1, 'selector': {'matchLabels': {'app': 'web'}}}})
    bench.kube.merge_patch(bench.path('machines', name), {'metadata': {'labels': {'force-deletion': 'True'}}})
    bench.kube.merge_patch(api_path('v1', 'nodes', name=node), {       # "false" is no request (acceptance 9)
        'metadata': {'annotations': {'node.machine.sapcloud.io/trigger-deletion-by-mcm': 'false'}}})
    time.sleep(3)
    assert not bench.kube.get(bench.path('machines', name))['metadata'].get('deletionTimestamp') and pod_exists(bench, 'web-0')
    # the Node asks for its machine to be replaced (acceptance 9); the label makes the drain skip evictions (8)
    bench.kube.merge_patch(api_path('v1', 'nodes', name=node), {
        'metadata': {'annotations': {'node.machine.sapcloud.io/trigger-deletion-by-mcm': 'true'}}})
    wait_for(lambda: not bench.kube.get_or_none(bench.path('machines', name)), 90, 1.0, what='machine replaced')
    assert not pod_exists(bench, 'web-0')
    forced = [e for e in bench.kube.list(api_path('v1', 'events', bench.namespace)) if e['reason'] == 'MachineDrainForced']
    assert forced and 'label force-deletion=True' in forced[0]['message']
    bench.wait_running(1)                                            # the set made a replacement


def add_volume_pod(bench, name, node, volume):
    """A pod with a PersistentVolumeClaim bound to an EBS CSI volume (what GetVolumeIDs resolves)."""
    bench.kube.create(api_path('v1', 'persistentvolumes'), {
        'apiVersion': 'v1', 'kind': 'PersistentVolume', 'metadata': {'name': 'pv-' + name},
        'spec': {'capacity': {'storage': '1Gi'}, 'accessModes': ['ReadWriteOnce'],
                 'csi': {'driver': 'ebs.csi.aws.com', 'volumeHandle': volume}}})
    bench.kube.create(api_path('v1', 'persistentvolumeclaims', bench.namespace), {
        'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim', 'metadata': {'name': 'data-' + name, 'namespace': bench.namespace},
        'spec': {'accessModes': ['ReadWriteOnce'], 'resources': {'requests': {'storage': '1Gi'}}, 'volumeName': 'pv-' + name}})
    pod = add_pod(bench, name, node, {'app': 'db'})
    bench.kube.merge_patch(api_path('v1', 'pods', bench.namespace, name), {'spec': {'volumes': [
        {'name': 'data', 'persistentVolumeClaim': {'claimName': 'data-' + name}}]}})
    return pod


def attach(bench, node, volumes):
    """The Node's status.volumesAttached, as the attach-detach controller keeps it."""
    bench.kube.merge_patch(api_path('v1', 'nodes', name=node), {'status': {'volumesAttached': [
        {'name': 'kubernetes.io/csi/ebs.csi.aws.com^' + v, 'devicePath': ''} for v in volumes]}})


def event_time(bench, reason, name):
    return min(e['eventTime'] for e in bench.kube.list(api_path('v1', 'events', bench.namespace))
               if e['reason'] == reason and e['involvedObject']['name'] == name)


def test_stateless_pods_go_at_once_volume_pods_one_at_a_time_then_the_vm_the_node_and_the_finalizer(bench):
    """Acceptance 6: a plain drain evicts pods without volumes in parallel and pods with volumes serially, each
    after its volumes left the Node's volumesAttached (the test plays the attach-detach controller); then the VM
    is deleted, then the Node, then the finalizer."""
    m = one_machine(bench)
    name, node = m['metadata']['name'], m['metadata']['labels']['node']
    for pod in ('web-0', 'web-1'):
        add_pod(bench, pod, node, {'app': 'web'})
    add_volume_pod(bench, 'db-0', node, 'vol-00000000000000001')
    add_volume_pod(bench, 'db-1', node, 'vol-00000000000000002')
    attach(bench, node, ['vol-00000000000000001', 'vol-00000000000000002'])
    bench.kube.delete(bench.path('machines', name))
    wait_for(lambda: not pod_exists(bench, 'web-0') and not pod_exists(bench, 'web-1'), 60, 0.5, what='stateless pods evicted')
    first = wait_for(lambda: [p for p in ('db-0', 'db-1') if not pod_exists(bench, p)], 60, 0.5, what='one volume pod evicted')
    assert len(first) == 1
    second = 'db-1' if first == ['db-0'] else 'db-0'
    time.sleep(4)                                     # its volume is still attached: the other one waits
    assert pod_exists(bench, second) and bench.kube.get_or_none(bench.path('machines', name)) is not None
    attach(bench, node, ['vol-00000000000000002' if first == ['db-0'] else 'vol-00000000000000001'])
    wait_for(lambda: not pod_exists(bench, second), 60, 0.5, what='the second volume pod evicted after the first detached')
    time.sleep(3)
    assert bench.kube.get_or_none(bench.path('machines', name)) is not None     # its volume still attached: no VM deletion
    attach(bench, node, [])
    wait_for(lambda: bench.kube.get_or_none(bench.path('machines', name)) is None, 90, 0.5, what='machine gone')
    assert bench.kube.get_or_none(api_path('v1', 'nodes', name=node)) is None
    assert not [i for i in bench.all_instances() if i['State']['Name'] not in ('shutting-down', 'terminated')
                and m['spec']['providerID'].endswith(i['InstanceId'])]
    assert event_time(bench, 'MachineVMDeleted', name) < event_time(bench, 'MachineDeleted', name)


def test_a_node_not_ready_too_long_is_drained_by_force_and_its_volume_attachments_deleted(bench):
    """Acceptance 7, second half: Node Ready Unknown/False for more than --machine-node-not-ready-force (MCM: 5m)
    -> a forced drain at once (a blocking budget does not hold it; the 10 m drain timeout is not waited for) and
    the Node's VolumeAttachments deleted."""
    m = one_machine(bench, machine_node_not_ready_force='3s', machine_drain_timeout='10m', machine_health_timeout='10m')
    name, node = m['metadata']['name'], m['metadata']['labels']['node']
    add_pod(bench, 'web-0', node, {'app': 'web'})
    bench.kube.create(api_path('policy/v1', 'poddisruptionbudgets', bench.namespace), {
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': 'web', 'namespace': bench.namespace},
        'spec': {'minAvailable': 1, 'selector': {'matchLabels': {'app': 'web'}}}})
    for va, on in (('va-mine', node), ('va-other', 'ip-10-9-9-9.eu-west-1.compute.internal')):
        bench.kube.create(api_path('storage.k8s.io/v1', 'volumeattachments'), {
            'apiVersion': 'storage.k8s.io/v1', 'kind': 'VolumeAttachment', 'metadata': {'name': va + '-' + bench.namespace},
            'spec': {'attacher': 'ebs.csi.aws.com', 'nodeName': on, 'source': {'persistentVolumeName': 'pv-' + va}}})
    bench.kubelets.partition([node])
    time.sleep(4)
    started = time.monotonic()
    bench.kube.delete(bench.path('machines', name))
    wait_for(lambda: bench.kube.get_or_none(bench.path('machines', name)) is None, 120, 0.5, what='machine gone')
    assert time.monotonic() - started < 120 and not pod_exists(bench, 'web-0')
    forced = [e for e in bench.kube.list(api_path('v1', 'events', bench.namespace)) if e['reason'] == 'MachineDrainForced']
    assert forced and 'NotReady for more than 3s' in forced[0]['message']
    vas = {v['metadata']['name'] for v in bench.kube.list(api_path('storage.k8s.io/v1', 'volumeattachments'))}
    assert 'va-other-' + bench.namespace in vas and 'va-mine-' + bench.namespace not in vas


def test_a_gone_node_s_volume_attachments_are_deleted_before_the_vm(bench):
    """Issue 23: the Node is gone (its kubelet stopped, the object deleted) when its machine is deleted: nothing to
    drain, but the VolumeAttachments to its name go (as after a forced drain) before the VM and the machine."""
    m = one_machine(bench, machine_drain_timeout='10m')
    name, node = m['metadata']['name'], m['metadata']['labels']['node']
    for va, on in (('va-mine', node), ('va-other', 'ip-10-9-9-9.eu-west-1.compute.internal')):
        bench.kube.create(api_path('storage.k8s.io/v1', 'volumeattachments'), {
            'apiVersion': 'storage.k8s.io/v1', 'kind': 'VolumeAttachment', 'metadata': {'name': va + '-' + bench.namespace},
            'spec': {'attacher': 'ebs.csi.aws.com', 'nodeName': on, 'source': {'persistentVolumeName': 'pv-' + va}}})
    bench.kubelets.halt([node])
    bench.kube.delete(api_path('v1', 'nodes', name=node))
    bench.kube.delete(bench.path('machines', name))
    wait_for(lambda: bench.kube.get_or_none(bench.path('machines', name)) is None, 90, 0.5, what='machine gone')
    vas = {v['metadata']['name'] for v in bench.kube.list(api_path('storage.k8s.io/v1', 'volumeattachments'))}
    assert 'va-other-' + bench.namespace in vas and 'va-mine-' + bench.namespace not in vas
    assert not [i for i in bench.all_instances() if i['State']['Name'] not in ('shutting-down', 'terminated')
                and m['spec']['providerID'].endswith(i['InstanceId'])]


def test_a_create_error_is_crash_loop_back_off_with_the_clouds_message(bench):
    bench.create_class(networkInterfaces=[{'subnetID': 'subnet-00000000', 'securityGroupIDs': ['sg-00000000']}])
    bench.create_deployment(replicas=1)
    bench.controller()

    def crash_looping():
        ms = bench.machines()
        status = (ms[0].get('status') or {}) if ms else {}
        return status if (status.get('currentStatus') or {}).get('phase') == 'CrashLoopBackOff' else None
    status = wait_for(crash_looping, 90, 1.0, what='CrashLoopBackOff')
    op = status['lastOperation']
    assert (op['type'], op['state'], op['errorCode']) == ('Create', 'Failed', 'InvalidArgument')
    assert op['description'].startswith('Cloud provider message - RunInstances: ')
    assert bench.running_instances() == []
