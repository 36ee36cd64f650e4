"""MCM's creation flow end to end (inventory §2 acceptance 2, 3, 16) and the MachineClass Secret opt-in: the real
controller process, the API emulator, EC2 on moto with the fidelity layer over HTTP, kubelets registering Nodes.

* 3: GetMachineStatus (the class's listing) decides: a VM made before (by MCM: its Name tag) is adopted and
  CreateMachine is not called; none -> CreateMachine once; two for one name -> OutOfRange, nothing created.
* 2: the cloud unreachable (the controller's link to EC2 cut): CrashLoopBackOff with errorCode Unavailable and
  the cloud's message, Failed after creationTimeout, replaced; the link back -> one Running machine, one instance.
* 16: InitializeMachine answering Uninitialized(17) -> CrashLoopBackOff naming InstanceInitialization, retried;
  Unimplemented -> Running as normal. EC2 gives neither answer, so a test double of a driver does
  (support/fault_driver.py: real instances on the same EC2), registered in the real controller program.
* the Secret opt-in (--secret-opt-in, on by default): Secrets a MachineClass names without the label
  cluster.steward.io/usable-by-controller=true are refused before any driver call, named on the machines and in a
  Warning Event on the class; labelling them lets the machines go on at once.
"""

import time

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from support.fault_driver import ALLOW_TAG, INITIALIZED_TAG, PROVIDER
from lab.kube.api import repo_path
from lab.env.machines_aws import secret_data
from lab.env.machines_bench import API, REGION, wait_for, when
from support.netcut import CuttableLink

LAUNCHER = repo_path('tests', 'support', 'controller_with_fault_driver.py')
USABLE = 'cluster.steward.io/usable-by-controller'


def status(machine):
    return (machine or {}).get('status') or {}


def phase(machine):
    return (status(machine).get('currentStatus') or {}).get('phase') or ''


def operation(machine):
    return status(machine).get('lastOperation') or {}


def standalone_machine(bench, name, cls='nodes'):
    return bench.kube.create(bench.path('machines'), {
        'apiVersion': API, 'kind': 'Machine', 'metadata': {'name': name, 'namespace': bench.namespace},
        'spec': {'class': {'kind': 'MachineClass', 'name': cls}}})


def events(bench, reason):
    return [e for e in bench.kube.list(api_path('v1', 'events', bench.namespace)) if e['reason'] == reason]


def test_get_machine_status_adopts_an_existing_vm_creates_a_missing_one_and_refuses_two(bench, ec2):
    """Acceptance 3 (and MCM migration: a VM made by MCM has its Name tag and none of ours)."""
    bench.create_class()
    made_by_mcm = bench.launch({'Name': 'adopted'})
    twins = {bench.launch({'Name': 'twin'}), bench.launch({'Name': 'twin'})}
    for name in ('adopted', 'twin', 'fresh'):
        standalone_machine(bench, name)
    ec2.reset_counts()
    bench.controller()

    adopted = wait_for(lambda: when(bench.machine_named('adopted'), lambda m: phase(m) == 'Running'), 90, 0.5,
                       what='the machine with an MCM-made VM Running')
    assert adopted['spec']['providerID'] == 'aws:///%s/%s' % (REGION, made_by_mcm)
    fresh = wait_for(lambda: when(bench.machine_named('fresh'), lambda m: phase(m) == 'Running'), 90, 0.5,
                     what='the machine without a VM created and Running')
    twin = wait_for(lambda: when(bench.machine_named('twin'), lambda m: phase(m) == 'CrashLoopBackOff'), 60, 0.5,
                    what='OutOfRange surfaced on the machine with two VMs')
    op = operation(twin)
    assert (op['type'], op['state'], op['errorCode']) == ('Create', 'Failed', 'OutOfRange')
    assert '2 VMs found for machine twin' in op['description'] and not twin['spec'].get('providerID')
    assert ec2.calls('RunInstances') == 1                     # for `fresh` only
    [made] = [i for i in bench.running_instances() if fresh['spec']['providerID'].endswith(i['InstanceId'])]
    assert {t['Key']: t['Value'] for t in made['Tags']}['machine.steward.io/owner-uid'] == fresh['metadata']['uid']
    time.sleep(3)                                             # more passes (1 s cloud sync): still nothing created
    assert ec2.calls('RunInstances') == 1 and phase(bench.machine_named('twin')) == 'CrashLoopBackOff'
    assert twins <= {i['InstanceId'] for i in bench.running_instances()}


def test_an_unreachable_cloud_is_crash_loop_back_off_then_failed_after_the_creation_timeout_and_replaced(bench, ec2):
    """Acceptance 2: EC2 does not answer (Unavailable, 14): CrashLoopBackOff, Create/Failed with the message,
    retried; Failed creationTimeout after creationTimestamp, and the MachineSet replaces the machine."""
    link = CuttableLink(ec2.url).start()
    try:
        link.cut()
        bench.create_class()
        bench.create_deployment(replicas=1)
        bench.controller('--machine-creation-timeout', '8s', env={'AWS_ENDPOINT_URL': link.url})
        first = wait_for(lambda: when(bench.machines(), lambda ms: ms and phase(ms[0]) == 'CrashLoopBackOff'), 60, 0.3,
                         what='CrashLoopBackOff while EC2 does not answer')[0]
        op = operation(first)
        assert (op['type'], op['state'], op['errorCode']) == ('Create', 'Failed', 'Unavailable')
        assert op['description'].startswith('Cloud provider message - DescribeInstances: the EC2 endpoint did not answer')
        name = first['metadata']['name']
        wait_for(lambda: [e for e in events(bench, 'MachineFailed') if name in e['message']], 60, 0.5,
                 what='the machine Failed after its creation timeout')
        failed = [e for e in events(bench, 'MachineFailed') if name in e['message']][0]
        assert 'creation did not succeed within 8s' in failed['message']
        wait_for(lambda: [m for m in bench.machines() if m['metadata']['name'] != name], 60, 0.5, what='a replacement')
        link.restore()
        wait_for(lambda: name not in {m['metadata']['name'] for m in bench.machines()}, 90, 0.5, what='the failed one gone')
        [machine] = bench.wait_running(1, timeout=120)
        assert machine['metadata']['name'] != name and len(bench.all_instances()) == 1
    finally:
        link.stop()


def init_fault_class(bench, name, initialize):
    spec = {'ami': bench.net['ami'], 'subnet': bench.net['subnet'], 'region': REGION, 'initialize': initialize,
            'tags': {'kubernetes.io/cluster/%s' % bench.cluster: '1', 'kubernetes.io/role/node': '1'}}
    return bench.create_class(name, provider=PROVIDER, spec=spec)


def test_uninitialized_is_crash_loop_back_off_retried_until_initialized_and_unimplemented_goes_on(bench, ec2):
    """Acceptance 16 with a driver double (EC2 never answers Uninitialized)."""
    init_fault_class(bench, 'init-fails', 'uninitialized')
    init_fault_class(bench, 'no-init', 'unimplemented')
    bench.create_deployment('fails', replicas=1, cls='init-fails')
    bench.create_deployment('plain', replicas=1, cls='no-init')
    proc = bench.controller(program=LAUNCHER)

    def of(deployment):
        return [m for m in bench.machines() if m['metadata']['labels'].get('name') == deployment]
    plain = wait_for(lambda: when(of('plain'), lambda ms: ms and phase(ms[0]) == 'Running'), 90, 0.5,
                     what='Unimplemented initialization: Running as normal')[0]
    assert operation(plain)['description'].startswith('Machine is now ready')
    looping = wait_for(lambda: when(of('fails'), lambda ms: ms and phase(ms[0]) == 'CrashLoopBackOff'), 90, 0.5,
                       what='Uninitialized: CrashLoopBackOff')[0]
    op = operation(looping)
    assert (op['type'], op['state'], op['errorCode'], op['step']) == ('Create', 'Failed', 'Uninitialized', 'InstanceInitialization')
    assert 'InstanceInitialization' in op['description'] and 'network interface is not attached yet' in op['description']
    calls = {'provider': PROVIDER, 'operation': 'InitializeMachine', 'code': 'Uninitialized'}
    wait_for(lambda: (proc.metric('steward_machines_driver_calls_total', calls) or 0) >= 3, 60, 0.5,
             what='InitializeMachine retried')
    assert phase(bench.machine_named(looping['metadata']['name'])) == 'CrashLoopBackOff'
    instance = looping['spec']['providerID'].rsplit('/', 1)[1]
    bench.ec2().create_tags(Resources=[instance], Tags=[{'Key': ALLOW_TAG, 'Value': 'true'}])
    wait_for(lambda: phase(bench.machine_named(looping['metadata']['name'])) == 'Running', 90, 0.5,
             what='Running once initialization succeeds')
    assert ec2.calls('RunInstances') == 2                   # one VM per machine: retries never created another
    tags = {t['Key'] for i in bench.running_instances() if i['InstanceId'] == instance for t in i['Tags']}
    assert INITIALIZED_TAG in tags


def test_a_class_secret_without_the_opt_in_label_is_refused_before_any_cloud_call(bench, ec2):
    """issue 19 §5 for the machines loop: secretRef and credentialsSecretRef both need the label; the refusal
    names the field, the rule and the label on the machine and in a Warning Event on the class."""
    keys = {k: v for k, v in secret_data().items() if k != 'userData'}
    bench.create_secret('nodes-userdata', {'userData': '#cloud-config\n'}, usable=False)
    bench.create_secret('nodes-keys', keys, usable=False)
    cls = bench.create_class('nodes')
    bench.kube.merge_patch(bench.path('machineclasses', 'nodes'), {
        'secretRef': {'name': 'nodes-userdata', 'namespace': bench.namespace},
        'credentialsSecretRef': {'name': 'nodes-keys', 'namespace': bench.namespace}})
    bench.create_deployment(replicas=1)
    ec2.reset_counts()
    bench.controller('--machine-medium-retry', '10m')      # a refused class is retried after MediumRetry ...

    def refused(field):
        def check():
            ms = bench.machines()
            op = operation(ms[0]) if ms else {}
            return op if phase(ms[0] if ms else None) == 'CrashLoopBackOff' and op.get('description', '').startswith(
                'MachineClass %s/nodes: %s:' % (bench.namespace, field)) else None
        return wait_for(check, 60, 0.5, what='the machine refused for %s' % field)
    op = refused('secretRef')
    assert op['errorCode'] == 'InvalidArgument' and '(rule secret-opt-in' in op['description']
    assert 'kubectl label secret -n %s nodes-userdata %s=true' % (bench.namespace, USABLE) in op['description']
    warning = wait_for(lambda: events(bench, 'MachineClassNotReady'), 30, 0.5, what='a Warning Event on the class')[0]
    assert warning['type'] == 'Warning' and warning['involvedObject']['uid'] == cls['metadata']['uid']
    assert 'secret-opt-in' in warning['message'] and '%s=true' % USABLE in warning['message']
    assert ec2.calls() == 0                                   # no driver call reached the cloud

    bench.kube.merge_patch(api_path('v1', 'secrets', bench.namespace, 'nodes-userdata'), {'metadata': {'labels': {USABLE: 'true'}}})
    op = refused('credentialsSecretRef')
    assert 'nodes-keys' in op['description'] and ec2.calls() == 0
    bench.kube.merge_patch(api_path('v1', 'secrets', bench.namespace, 'nodes-keys'), {'metadata': {'labels': {USABLE: 'true'}}})
    bench.wait_running(1, timeout=60)                         # ... or at once when the class changes
    assert events(bench, 'MachineClassReady')
