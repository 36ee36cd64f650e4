"""Safety beyond MCM, end to end (machines.md §(f)2-3, inventory §2 acceptance 4, 5, 14, 15, and 10's Failed-first
scale-down): the real controller, the API emulator, EC2 on moto over HTTP and kubelets. Timings come from the
controller's flags (health timeout 6 s, orphan period 3 s)."""

import datetime
import time
import uuid

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.machines_bench import stamp, wait_for, when
from support.netcut import CuttableLink


def frozen(bench, name='pool'):
    md = bench.kube.get(bench.path('machinedeployments', name))
    return next((c for c in (md.get('status') or {}).get('conditions') or [] if c['type'] == 'Frozen'), None)


def epoch(stamp_text):
    return datetime.datetime.fromisoformat(stamp_text.replace('Z', '+00:00')).timestamp()


def replaced_or_failing(bench, machines=None):
    return [m['metadata']['name'] for m in (bench.machines() if machines is None else machines)
            if m['metadata'].get('deletionTimestamp') or ((m.get('status') or {}).get('currentStatus') or {}).get('phase')
            in ('Failed', 'Terminating')]


def test_a_fleet_wide_partition_freezes_replaces_nothing_and_heals_without_replacement(bench):
    bench.create_class()
    bench.create_deployment(replicas=4)
    proc = bench.controller('--machine-health-timeout', '20s')
    bench.wait_running(4)
    instances = {i['InstanceId'] for i in bench.running_instances()}
    bench.kubelets.partition()
    cond = wait_for(lambda: when(frozen(bench), lambda c: c and '4 of 4 machines' in c['message']), 60, 1.0,
                    what='Frozen condition naming 4 of 4 machines')
    assert cond['status'] == 'True' and cond['reason'] == 'FleetFreeze'
    time.sleep(25)     # past the 20 s health timeout: an unfrozen controller would be replacing machines now
    assert replaced_or_failing(bench) == [] and {i['InstanceId'] for i in bench.running_instances()} == instances
    assert proc.metric('steward_machines_frozen', {'rule': 'FleetFreeze'}) == 1.0
    bench.kubelets.heal()
    wait_for(lambda: frozen(bench) is None and bench.phases() == ['Running'] * 4, 60, 1.0, what='thaw')
    assert {i['InstanceId'] for i in bench.running_instances()} == instances
    assert proc.metric('steward_machines_replacements_total') is None


def test_one_unreachable_machine_is_replaced_and_a_terminated_instance_at_once(bench):
    bench.create_class()
    bench.create_deployment(replicas=4)
    bench.controller()
    bench.wait_running(4)
    victim = bench.kubelets.node_names()[0]
    machine = next(m['metadata']['name'] for m in bench.machines() if m['metadata']['labels']['node'] == victim)
    bench.kubelets.partition([victim])
    wait_for(lambda: machine not in {m['metadata']['name'] for m in bench.machines()} and len(bench.running_instances()) == 4
             and bench.phases() == ['Running'] * 4, 180, 1.0, what='replacement of the unreachable machine')
    bench.kubelets.heal()
    assert frozen(bench) is None
    # out of band: the cloud says terminated -> replaced without waiting for the 6 s health timeout... or more
    gone = bench.running_instances()[0]['InstanceId']
    started = time.monotonic()
    bench.ec2().terminate_instances(InstanceIds=[gone])
    wait_for(lambda: not any(m['spec'].get('providerID', '').endswith(gone) for m in bench.machines()), 90, 1.0,
             what='the machine of the terminated instance replaced')
    wait_for(lambda: bench.phases() == ['Running'] * 4 and len(bench.running_instances()) == 4, 120, 1.0, what='4 again')
    failed = [e for e in bench.kube.list(api_path('v1', 'events', bench.namespace)) if e['reason'] == 'MachineFailed'
              and gone in e['message']]
    assert failed and 'without waiting for the health timeout' in failed[0]['message'], time.monotonic() - started

    # acceptance 4, the Node missing: its kubelet stops for good (the instance runs on) and the Node object is
    # deleted -> Unknown, Failed only after the 6 s health timeout, replaced
    victim = bench.kubelets.node_names()[0]
    machine = next(m['metadata']['name'] for m in bench.machines() if m['metadata']['labels']['node'] == victim)
    bench.kubelets.halt([victim])
    bench.kube.delete(api_path('v1', 'nodes', name=victim))
    unknown = wait_for(lambda: when(bench.machine_named(machine), lambda m: m['status']['currentStatus']['phase'] == 'Unknown'),
                       30, 0.2, what='the machine of the missing Node Unknown')
    assert unknown['status']['lastOperation']['description'].startswith('Node object went missing')
    wait_for(lambda: machine not in {m['metadata']['name'] for m in bench.machines()} and len(bench.running_instances()) == 4
             and bench.phases() == ['Running'] * 4, 120, 1.0, what='replacement of the machine whose Node went missing')
    failed = [e for e in bench.kube.list(api_path('v1', 'events', bench.namespace)) if e['reason'] == 'MachineFailed'
              and e['involvedObject']['name'] == machine]
    assert failed and 'health checks failing since last 6s' in failed[0]['message'] and 'node object missing' in failed[0]['message']
    assert epoch(failed[0]['eventTime']) - epoch(unknown['status']['currentStatus']['lastUpdateTime']) > 6


def test_unknown_machines_of_one_deployment_are_replaced_one_at_a_time(bench):
    """Acceptance 5 (meltdown limit): two machines report DiskPressure (reachable, so no fleet freeze)."""
    bench.create_class()
    bench.create_deployment(replicas=3)
    bench.controller()
    bench.wait_running(3)
    bad_nodes = bench.kubelets.node_names()[:2]
    bad = {m['metadata']['name'] for m in bench.machines() if m['metadata']['labels']['node'] in bad_nodes}
    for name in bad_nodes:
        bench.kube.merge_patch(api_path('v1', 'nodes', name=name), {'status': {'conditions': [
            {'type': 'Ready', 'status': 'True'}, {'type': 'DiskPressure', 'status': 'True', 'reason': 'KubeletHasDiskPressure'}]}})
    most = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        most = max(most, len(replaced_or_failing(bench)))
        names = {m['metadata']['name'] for m in bench.machines()}
        if not names & bad and bench.phases() == ['Running'] * 3:
            break
        time.sleep(0.5)
    else:
        raise AssertionError('the two machines were not replaced; phases %s' % bench.phases())
    assert most == 1


def labelled(bench, name):
    return [m for m in bench.machines() if m['metadata']['labels'].get('name') == name]


def test_after_a_restart_at_most_two_of_a_deployment_are_replaced_at_once_and_a_set_scales_down_failed_first(bench, ec2):
    """§(f)3 (--machine-max-replacements 2, 30 % of a deployment's machines bad: never more than 2 replaced at
    once) and acceptance 10 (a MachineSet scaled down: a Failed machine goes before Running ones, then the
    oldest), both from what a controller finds when it starts. While it is stopped, 3 of the deployment's 10
    Nodes lose their kubelets (Ready=Unknown; 3 of 13 is no fleet freeze), one of the newer machines of a
    standalone MachineSet of 3 is Failed (as a previous controller left it) and the set is scaled to 2. The new
    controller's first pass marks the three Unknown together, so their 6 s health timeouts end in one pass."""
    bench.create_class()
    bench.create_deployment(replicas=10)
    bench.create_set('solo', replicas=1)
    proc = bench.controller('--machine-max-replacements', '2')
    [oldest] = wait_for(lambda: labelled(bench, 'solo'), 30, 0.2, what="the solo set's first machine")
    time.sleep(1.1)                                      # creationTimestamps have seconds: the others are younger
    bench.kube.merge_patch(bench.path('machinesets', 'solo'), {'spec': {'replicas': 3}})
    bench.wait_running(13, timeout=180)
    oldest = oldest['metadata']['name']
    failed, kept = sorted(m['metadata']['name'] for m in labelled(bench, 'solo') if m['metadata']['name'] != oldest)
    pool = {m['metadata']['labels']['node']: m['metadata']['name'] for m in labelled(bench, 'pool')}
    bad = {pool[n] for n in sorted(pool)[:3]}
    proc.stop()

    bench.kubelets.partition(sorted(pool)[:3])
    now = stamp(time.time())
    bench.kube.merge_patch(bench.path('machines', failed, status=True), {'status': {
        'currentStatus': {'phase': 'Failed', 'timeoutActive': False, 'lastUpdateTime': now},
        'lastOperation': {'type': 'HealthCheck', 'state': 'Failed', 'lastUpdateTime': now,
                          'description': 'Machine %s health checks failing since last 10m minutes.' % failed}}})
    bench.kube.merge_patch(bench.path('machinesets', 'solo'), {'spec': {'replicas': 2}})
    ec2.reset_counts()
    bench.controller('--machine-max-replacements', '2')
    most = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        machines = labelled(bench, 'pool')
        most = max(most, len(replaced_or_failing(bench, machines)))
        solo = {m['metadata']['name'] for m in labelled(bench, 'solo')}
        assert oldest in solo and kept in solo, 'the set removed a Running machine: %s left' % sorted(solo)
        if solo == {oldest, kept} and not bad & {m['metadata']['name'] for m in machines} and bench.phases() == ['Running'] * 12:
            break
        time.sleep(0.3)
    else:
        raise AssertionError('not replaced; phases %s' % bench.phases())
    assert most == 2, 'at most %d machine(s) of the deployment were replaced at once' % most
    assert frozen(bench) is None
    assert ec2.calls('RunInstances') == 3                # the three replacements; the set made none
    bench.kube.merge_patch(bench.path('machinesets', 'solo'), {'spec': {'replicas': 1}})
    wait_for(lambda: {m['metadata']['name'] for m in labelled(bench, 'solo')} == {kept}, 60, 0.5, what='the oldest removed')


def test_an_active_watchdog_scale_down_freezes_replacement(bench):
    bench.create_class()
    bench.create_deployment(replicas=3)
    bench.controller()
    bench.wait_running(3)
    annotations = {'dependency-watchdog.gardener.cloud/meltdown-protection-active': '',
                   'dependency-watchdog.gardener.cloud/replicas': '1'}
    bench.kube.create(api_path('apps/v1', 'deployments', bench.namespace), {
        'apiVersion': 'apps/v1', 'kind': 'Deployment',
        'metadata': {'name': 'kube-controller-manager', 'namespace': bench.namespace, 'annotations': annotations},
        'spec': {'replicas': 0, 'selector': {'matchLabels': {'app': 'kcm'}},
                 'template': {'metadata': {'labels': {'app': 'kcm'}}, 'spec': {'containers': [{'name': 'c', 'image': 'x'}]}}}})
    victim = bench.kubelets.node_names()[0]
    machine = next(m['metadata']['name'] for m in bench.machines() if m['metadata']['labels']['node'] == victim)
    bench.kubelets.partition([victim])
    cond = wait_for(lambda: frozen(bench), 60, 1.0, what='Frozen by the watchdog')
    assert cond['reason'] == 'DependencyWatchdogMeltdownProtection' and 'Deployment/kube-controller-manager' in cond['message']
    time.sleep(12)
    assert replaced_or_failing(bench) == []
    bench.kube.merge_patch(api_path('apps/v1', 'deployments', bench.namespace, 'kube-controller-manager'), {
        'metadata': {'annotations': {'dependency-watchdog.gardener.cloud/meltdown-protection-active': None}}})
    wait_for(lambda: machine not in {m['metadata']['name'] for m in bench.machines()} and bench.phases() == ['Running'] * 3,
             180, 1.0, what='replacement after the watchdog scaled back up')


def test_orphans_are_collected_on_positive_evidence_only(bench):
    """Acceptance 15 and §(f)2: owned by a machine UID that does not exist and tagged with this class -> deleted,
    but only once older than --machine-orphan-min-age (12 s here; collection cycles every 3 s); no owner tag, or
    another class's tag -> kept; tagged with a class that has no machines in the store (an empty store looks
    exactly like a wiped or unsynced one) -> kept."""
    cls = bench.create_class()
    spare = bench.create_class('spare')
    bench.create_deployment(replicas=1)
    proc = bench.controller('--machine-orphan-min-age', '12s')
    bench.wait_running(1)
    ec2 = bench.ec2()
    unowned = bench.launch({'Name': 'spare-machine', 'machine.steward.io/owner-uid': str(uuid.uuid4()),
                            'machine.steward.io/class-uid': spare['metadata']['uid']})
    orphan = bench.launch({'Name': 'gone-machine', 'machine.steward.io/owner-uid': str(uuid.uuid4()),
                           'machine.steward.io/class-uid': cls['metadata']['uid']})
    hand_made = bench.launch({'Name': 'made-by-hand'})
    foreign = bench.launch({'Name': 'other-controller', 'machine.steward.io/owner-uid': str(uuid.uuid4()),
                            'machine.steward.io/class-uid': str(uuid.uuid4())})

    def instance(instance_id):
        return ec2.describe_instances(InstanceIds=[instance_id])['Reservations'][0]['Instances'][0]

    def state(instance_id):
        return instance(instance_id)['State']['Name']
    launched = instance(orphan)['LaunchTime'].timestamp()
    oldest_running = 0.0            # the orphan's age when last seen running
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        seen = time.time()
        if state(orphan) in ('shutting-down', 'terminated'):
            break
        oldest_running = seen - launched
        time.sleep(0.5)
    else:
        raise AssertionError('the orphan was not terminated')
    # Two cycles (3 s apart) found it without its owner long before that; only its age kept it.
    assert oldest_running >= 8, 'the orphan was collected %.1f s after its launch, younger than 12 s' % oldest_running
    events = [e for e in bench.kube.list(api_path('v1', 'events', bench.namespace)) if e['reason'] == 'OrphanVMDeleted']
    assert len(events) == 1 and orphan in events[0]['message'] and 'older than 12s' in events[0]['message']
    time.sleep(3.5)                 # one more cycle: the older, equally ownerless VM of the empty class is still kept
    assert state(unowned) == 'running' and state(hand_made) == 'running' and state(foreign) == 'running'
    assert 'orphan collection of class %s/spare skipped: the class has no machines in the store' % bench.namespace in proc.log()
    assert len(bench.machines()) == 1


def test_overshoot_freezes_scale_up_until_the_count_is_back(bench):
    """Acceptance 14: machines >= replicas + maxSurge + safety-up freeze the set (label and condition). Two machines
    whose deletion is held by someone else's finalizer keep counting, as replacements of stuck machines would."""
    bench.create_class()
    bench.create_deployment(replicas=1)
    bench.controller('--safety-up', '1', '--safety-down', '1')
    bench.wait_running(1)
    ms = bench.kube.list(bench.path('machinesets'))[0]
    owner = {'apiVersion': 'machine.sapcloud.io/v1alpha1', 'kind': 'MachineSet', 'name': ms['metadata']['name'],
             'uid': ms['metadata']['uid'], 'controller': True}
    for i in range(2):    # 3 machines >= 1 + surge 1 + safety-up 1
        bench.kube.create(bench.path('machines'), {
            'apiVersion': 'machine.sapcloud.io/v1alpha1', 'kind': 'Machine',
            'metadata': {'name': 'extra-%d' % i, 'namespace': bench.namespace, 'labels': ms['spec']['template']['metadata']['labels'],
                         'ownerReferences': [owner], 'finalizers': ['test.steward.io/hold']},
            'spec': {'class': {'kind': 'MachineClass', 'name': 'nodes'}}})

    def labels(kind, name):
        return bench.kube.get(bench.path(kind, name))['metadata'].get('labels') or {}
    wait_for(lambda: labels('machinesets', ms['metadata']['name']).get('freeze') == 'True', 90, 1.0, what='the freeze label')
    cond = [c for c in bench.kube.get(bench.path('machinesets', ms['metadata']['name']))['status']['machineSetCondition']
            if c['type'] == 'Frozen'][0]
    assert cond['reason'] == 'OverShootingReplicaCount' and '3 >= 3' in cond['message']
    wait_for(lambda: labels('machinedeployments', 'pool').get('freeze') == 'True', 60, 1.0, what='the deployment frozen too')
    for i in range(2):
        bench.kube.merge_patch(bench.path('machines', 'extra-%d' % i), {'metadata': {'finalizers': None}})
    wait_for(lambda: 'freeze' not in labels('machinesets', ms['metadata']['name']), 120, 1.0, what='thaw')
    wait_for(lambda: bench.phases() == ['Running'] and len(bench.running_instances()) == 1, 120, 1.0, what='1 machine')


def test_an_unreachable_api_server_freezes_every_mutation_and_the_health_clock_restarts_after(bench, ec2):
    """Acceptance 14, second half (MCM's API-server freeze): the controller's link to the API server is cut
    (support/netcut.py; the test still reaches the emulator). After --machine-safety-apiserver-statuscheck-timeout
    of failed probes the machines freeze: no cloud call changes anything (an orphan-looking VM is kept, no machine
    is failed) although a machine's health timeout passes meanwhile. When the link is back, that machine's health
    clock restarts instead of it being failed at once; it recovers and stays (acceptance 4: back to Running); the
    orphan is collected only now. The lease renew deadline is set above the outage, as the freeze needs: with the
    default 10 s a leader cut off from its API server for longer stops (docs/machines.md, Safety limits)."""
    link = CuttableLink(bench.kube.server.url).start()
    try:
        cls = bench.create_class()
        bench.create_deployment(replicas=3)
        proc = bench.controller('--machine-health-timeout', '15s', '--lease-duration', '120', '--renew-deadline', '90',
                                api=link)
        bench.wait_running(3)
        victim = bench.kubelets.node_names()[0]
        machine = next(m['metadata']['name'] for m in bench.machines() if m['metadata']['labels']['node'] == victim)
        bench.kubelets.partition([victim])              # 1 of 3: no fleet freeze, its 15 s health clock runs
        wait_for(lambda: (((bench.machine_named(machine) or {}).get('status') or {}).get('currentStatus') or {}).get('phase')
                 == 'Unknown', 30, 0.2, what='the partitioned machine Unknown')
        unknown_since = time.time()
        link.cut()
        wait_for(lambda: proc.metric('steward_machines_apiserver_frozen') == 1.0, 30, 0.5, what='the API-server freeze')
        ec2.reset_counts()
        orphan = bench.launch({'Name': 'gone-machine', 'machine.steward.io/owner-uid': str(uuid.uuid4()),
                               'machine.steward.io/class-uid': cls['metadata']['uid']})
        while time.time() < unknown_since + 15 + 10:    # past the health timeout, and 3+ orphan cycles (3 s)
            time.sleep(1)
        assert ec2.calls('TerminateInstances') == 0 and ec2.calls('RunInstances') == 0
        assert orphan in {i['InstanceId'] for i in bench.running_instances()}
        assert 'API server unreachable' in proc.log()
        restored = time.time()
        link.restore()
        wait_for(lambda: proc.metric('steward_machines_apiserver_frozen') == 0.0, 60, 0.5, what='the freeze ends')
        status = wait_for(lambda: when(bench.machine_named(machine)['status']['currentStatus'],
                                       lambda s: s['lastUpdateTime'] >= stamp(restored)), 30, 0.5,
                          what='a fresh health clock for the Unknown machine')
        assert status['phase'] == 'Unknown'
        time.sleep(5)                                   # its original deadline is long gone: an unfrozen clock would fail it
        assert replaced_or_failing(bench) == [] and machine in {m['metadata']['name'] for m in bench.machines()}
        bench.kubelets.heal()
        wait_for(lambda: bench.phases() == ['Running'] * 3, 60, 0.5, what='the machine back to Running')
        assert machine in {m['metadata']['name'] for m in bench.machines()}
        assert proc.metric('steward_machines_replacements_total') is None
        wait_for(lambda: orphan not in {i['InstanceId'] for i in bench.running_instances()}, 60, 0.5,
                 what='the orphan collected once the freeze is over')
    finally:
        bench.stop()                                    # while its API server is reachable: a clean, quick stop
        link.stop()
