"""The sabakan driver against sabakan over real GraphQL/HTTP (lab/sabakan/server.py) and claims as Leases in the
API emulator: claim a healthy unclaimed server (rack-spread), one claim per server even when two machines race,
idempotent create, release (optionally RETIRING), listing with sabakan's states."""

import threading

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import ClassContext, MachineContext, VMState
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.sabakan_driver import SabakanDriver

NS = 'shoot--metal'


def cls_context(server, **spec):
    return ClassContext(NS, 'metal', 'class-uid-1', 'Sabakan', dict({'sabakanURL': server.url, 'role': 'cs'}, **spec), {})


def machine(i):
    return MachineContext(NS, 'metal-%d' % i, 'uid-%d' % i)


def claims(kube):
    return kube.list(api_path('coordination.k8s.io/v1', 'leases', NS), label_selector='machine.steward.io/sabakan-serial')


def test_claims_follow_the_contract_and_spread_over_racks(kube, sabakan_server):
    driver = SabakanDriver(kube)
    cls = cls_context(sabakan_server)
    results = [driver.create_machine(cls, machine(i)) for i in range(4)]
    by_serial = {m['spec']['serial']: m for m in sabakan_server.machines()}
    racks = sorted(by_serial[r.provider_id.rsplit('/', 1)[1]]['spec']['rack'] for r in results)
    assert racks == [0, 1, 2, 3]                            # one per rack before any rack gets a second
    for r, lease in zip(sorted(results, key=lambda r: r.provider_id), sorted(claims(kube), key=lambda c: c['metadata']['name'])):
        serial = r.provider_id[len('sabakan:///'):]
        assert r.provider_id.startswith('sabakan:///') and by_serial[serial]['spec']['role'] == 'cs'
        assert lease['metadata']['name'] == 'sabakan-claim-' + serial.lower()
        assert lease['metadata']['labels']['machine.steward.io/sabakan-serial'] == serial
        assert lease['metadata']['annotations']['machine.steward.io/sabakan-address'] == by_serial[serial]['spec']['ipv4'][0]
        assert r.node_name == by_serial[serial]['spec']['ipv4'][0]
    holders = sorted(c['spec']['holderIdentity'] for c in claims(kube))
    assert holders == ['uid-0', 'uid-1', 'uid-2', 'uid-3']
    assert driver.create_machine(cls, machine(0)).provider_id == results[0].provider_id      # idempotent
    assert len(claims(kube)) == 4


def test_two_machines_racing_never_share_a_server(kube, sabakan_server):
    cls = cls_context(sabakan_server, labels={})
    results, errors = [], []

    def create(i):
        try:
            results.append(SabakanDriver(kube).create_machine(cls, machine(i)))
        except DriverError as exc:
            errors.append(exc)
    threads = [threading.Thread(target=create, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    serials = [r.provider_id for r in results]
    assert not errors and len(set(serials)) == len(serials) == 6
    assert len(claims(kube)) == 6


def test_no_free_server_is_resource_exhausted(kube, sabakan_server):
    driver = SabakanDriver(kube)
    cls = cls_context(sabakan_server, role='nonexistent-role')
    with pytest.raises(DriverError) as info:
        driver.create_machine(cls, machine(0))
    assert info.value.code == Code.RESOURCE_EXHAUSTED


def test_delete_releases_only_its_own_claim_and_may_retire(kube, sabakan_server):
    driver = SabakanDriver(kube)
    cls = cls_context(sabakan_server, setRetiring=True)
    first = driver.create_machine(cls, machine(0))
    driver.create_machine(cls, machine(1))
    serial = first.provider_id.rsplit('/', 1)[1]
    stranger = MachineContext(NS, 'metal-9', 'uid-9', first.provider_id)
    driver.delete_machine(cls, stranger)                         # holds nothing: nothing released
    assert len(claims(kube)) == 2
    driver.delete_machine(cls, MachineContext(NS, 'metal-0', 'uid-0', first.provider_id))
    assert len(claims(kube)) == 1
    state = {m['spec']['serial']: m['status']['state'] for m in sabakan_server.machines()}[serial]
    assert state == 'RETIRING'
    driver.delete_machine(cls, MachineContext(NS, 'metal-0', 'uid-0', first.provider_id))    # again: fine


def test_listing_reports_sabakan_states(kube, sabakan_server):
    driver = SabakanDriver(kube)
    cls = cls_context(sabakan_server)
    a = driver.create_machine(cls, machine(0))
    b = driver.create_machine(cls, machine(1))
    sabakan_server.set_state(b.provider_id.rsplit('/', 1)[1], 'RETIRED')
    vms = {vm.provider_id: vm for vm in driver.list_vms(cls)}
    assert vms[a.provider_id].state == VMState.RUNNING and vms[a.provider_id].owner_uid == 'uid-0'
    assert vms[a.provider_id].machine_name == 'metal-0' and vms[a.provider_id].class_uid == 'class-uid-1'
    assert vms[b.provider_id].state == VMState.TERMINATED          # positive evidence: replaced at once
    assert driver.list_machines(cls) == {a.provider_id: 'metal-0'}


def test_a_bad_class_or_an_unreachable_sabakan(kube, sabakan_server):
    driver = SabakanDriver(kube)
    with pytest.raises(DriverError) as info:
        driver.create_machine(ClassContext(NS, 'm', 'u', 'Sabakan', {'racks': 'all'}, {}), machine(0))
    assert info.value.code == Code.INVALID_ARGUMENT and 'providerSpec' in str(info.value)
    sabakan_server.set_fault('http500')
    with pytest.raises(DriverError) as info:
        driver.create_machine(cls_context(sabakan_server), machine(0))
    assert info.value.code == Code.UNAVAILABLE
    assert claims(kube) == []


def test_update_in_place_keeps_the_server_records_the_class_and_refuses_a_server_the_class_does_not_match(
        kube, sabakan_server):
    driver = SabakanDriver(kube)
    made = driver.create_machine(cls_context(sabakan_server), machine(0))
    newer = ClassContext(NS, 'metal-v1-32-0', 'class-uid-2', 'Sabakan', {'sabakanURL': sabakan_server.url, 'role': 'cs'},
                         {}, labels={'machine.steward.io/kubelet-version': 'v1.32.0'})
    context = MachineContext(NS, 'metal-0', 'uid-0', provider_id=made.provider_id)
    driver.update_machine(newer, context)
    (claim,) = claims(kube)
    annotations = claim['metadata']['annotations']
    assert annotations['machine.steward.io/applied-class'] == 'metal-v1-32-0'
    assert annotations['machine.steward.io/kubelet-version'] == 'v1.32.0'
    assert annotations['machine.steward.io/class-uid'] == 'class-uid-1'      # still listed under its class
    other_role = ClassContext(NS, 'metal-ss', 'class-uid-3', 'Sabakan', {'sabakanURL': sabakan_server.url, 'role': 'ss'}, {})
    with pytest.raises(DriverError) as info:
        driver.update_machine(other_role, context)
    assert info.value.code == Code.PRECONDITION_FAILED and 'RollingUpdate' in str(info.value)
    with pytest.raises(DriverError) as info:
        driver.update_machine(newer, MachineContext(NS, 'metal-9', 'uid-9'))
    assert info.value.code == Code.NOT_FOUND
