"""The AWS driver against EC2 over HTTP (moto server): create, list (one paginated call), status, initialize,
delete, and the error codes EC2's answers become."""

import http.server
import threading
import uuid

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.machines.aws import AWSDriver
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import ClassContext, MachineContext, VMState
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError

from lab.env.machines_aws import ec2_client, instances, make_network, provider_spec, secret_data

REGION = 'eu-west-1'


@pytest.fixture
def aws(ec2):
    """A network on the EC2 fidelity server (fresh per test) and a class of its own cluster tag."""
    cluster = 'shoot--' + uuid.uuid4().hex[:8]
    net = make_network(ec2.url, REGION)
    requests = []
    driver = AWSDriver(endpoint_url=ec2.url, page_size=2, on_request=lambda op, outcome: requests.append((op, outcome)))
    cls = ClassContext('ns', 'c', 'class-' + cluster, 'AWS', provider_spec(net, REGION, cluster), secret_data())
    return driver, cls, cluster, net, ec2.url, requests


def machine(name='m1', provider_id=''):
    return MachineContext('ns', name, 'uid-' + name + '-' + uuid.uuid4().hex[:6], provider_id)


def test_create_tags_the_instance_and_the_listing_finds_it(aws):
    driver, cls, cluster, _net, url, requests = aws
    m = machine()
    created = driver.create_machine(cls, m)
    assert created.provider_id.startswith('aws:///eu-west-1/i-') and created.node_name.endswith('.compute.internal')
    [inst] = instances(url, REGION, cluster)
    tags = {t['Key']: t['Value'] for t in inst['Tags']}
    assert tags['Name'] == 'm1' and tags['machine.steward.io/owner-uid'] == m.uid
    assert tags['machine.steward.io/class-uid'] == cls.uid and tags['kubernetes.io/role/node'] == '1'
    [vm] = driver.list_vms(cls)
    assert (vm.provider_id, vm.owner_uid, vm.machine_name, vm.state) == (created.provider_id, m.uid, 'm1', VMState.RUNNING)
    assert vm.node_name == created.node_name and vm.launched is not None
    assert driver.get_machine_status(cls, m).provider_id == created.provider_id
    with pytest.raises(DriverError) as info:
        driver.get_machine_status(cls, machine('other'))
    assert info.value.code == Code.NOT_FOUND
    assert [op for op, _outcome in requests].count('DescribeImages') == 1


def test_the_ami_root_device_is_read_once(aws):
    driver, cls, _cluster, _net, _url, requests = aws
    for i in range(3):
        driver.create_machine(cls, machine('m%d' % i))
    assert [op for op, _outcome in requests].count('DescribeImages') == 1
    assert [op for op, _outcome in requests].count('RunInstances') == 3


def test_one_listing_pages_through_every_instance(aws):
    driver, cls, _cluster, _net, _url, requests = aws
    for i in range(5):
        driver.create_machine(cls, machine('m%d' % i))
    del requests[:]
    assert len(driver.list_vms(cls)) == 5
    pages = [op for op, _outcome in requests]
    assert set(pages) == {'DescribeInstances'} and len(pages) >= 3        # page size 2: one call, several pages


def test_delete_terminates_and_a_gone_instance_is_success(aws):
    driver, cls, cluster, _net, url, _requests = aws
    m = machine()
    created = driver.create_machine(cls, m)
    ctx = MachineContext('ns', 'm1', m.uid, created.provider_id)
    driver.delete_machine(cls, ctx)
    assert not instances(url, REGION, cluster)
    assert [vm.state for vm in driver.list_vms(cls)] == [VMState.TERMINATED]     # still listed: evidence
    driver.delete_machine(cls, ctx)                                              # again: fine
    driver.delete_machine(cls, MachineContext('ns', 'x', 'u', 'aws:///eu-west-1/i-0123456789abcdef0'))


def test_delete_without_a_provider_id_finds_the_instance_by_owner_tag(aws):
    driver, cls, cluster, _net, url, _requests = aws
    m = machine()
    driver.create_machine(cls, m)
    driver.delete_machine(cls, MachineContext('ns', 'm1', m.uid, ''))
    assert not instances(url, REGION, cluster)


def test_initialize_turns_the_source_destination_check_off(aws):
    driver, cls, _cluster, _net, url, _requests = aws
    nat = ClassContext('ns', 'nat', cls.uid, 'AWS', dict(cls.provider_spec, srcAndDstChecksEnabled=False), cls.secret)
    m = machine()
    created = driver.create_machine(nat, m)
    [vm] = driver.list_vms(nat)
    assert vm.needs_init
    driver.initialize_machine(nat, m)
    instance = created.provider_id.rsplit('/', 1)[1]
    attribute = ec2_client(url, REGION).describe_instance_attribute(InstanceId=instance, Attribute='sourceDestCheck')
    assert attribute['SourceDestCheck']['Value'] is False
    assert not driver.list_vms(nat)[0].needs_init
    with pytest.raises(DriverError) as info:
        driver.initialize_machine(cls, m)
    assert info.value.code == Code.UNIMPLEMENTED


def test_initialize_right_after_create_uses_the_provider_id_not_a_listing(aws, ec2):
    """The controller initializes a new VM in the same action as CreateMachine, before any listing shows it."""
    driver, cls, _cluster, _net, url, requests = aws
    ec2.set_describe_lag(60)                          # listings do not show the new instance
    nat = ClassContext('ns', 'nat', cls.uid, 'AWS', dict(cls.provider_spec, srcAndDstChecksEnabled=False), cls.secret)
    m = machine()
    created = driver.create_machine(nat, m)
    assert driver.list_vms(nat) == []
    del requests[:]
    done = driver.initialize_machine(nat, MachineContext('ns', m.name, m.uid, created.provider_id, created.node_name))
    assert done.provider_id == created.provider_id and [request[0] for request in requests] == ['ModifyInstanceAttribute']
    instance = created.provider_id.rsplit('/', 1)[1]
    attribute = ec2_client(url, REGION, lab=True).describe_instance_attribute(InstanceId=instance, Attribute='sourceDestCheck')
    assert attribute['SourceDestCheck']['Value'] is False
    gone = 'aws:///%s/i-0123456789abcdef0' % REGION    # an instance EC2 does not know (yet): retried, not skipped
    with pytest.raises(DriverError) as info:
        driver.initialize_machine(nat, MachineContext('ns', m.name, m.uid, gone, ''))
    assert info.value.code == Code.UNINITIALIZED


def test_a_missing_subnet_is_invalid_argument(aws):
    driver, cls, _cluster, _net, _url, _requests = aws
    spec = dict(cls.provider_spec, networkInterfaces=[{'subnetID': 'subnet-00000000', 'securityGroupIDs': ['sg-0']}])
    bad = ClassContext('ns', 'c', cls.uid, 'AWS', spec, cls.secret)
    with pytest.raises(DriverError) as info:
        driver.create_machine(bad, machine())
    assert info.value.code == Code.INVALID_ARGUMENT


class HtmlErrorPage(http.server.BaseHTTPRequestHandler):
    """An overloaded endpoint (or a proxy in front of it): an HTML 500 page instead of EC2's XML."""

    def do_POST(self):  # noqa: N802  (http.server's name)
        self.rfile.read(int(self.headers.get('Content-Length') or 0))
        body = b'<!doctype html><title>500 Internal Server Error</title><h1>Internal Server Error</h1>'
        self.send_response(500)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_an_unreadable_answer_is_unavailable_and_retried(aws):
    _driver, cls, _cluster, _net, _url, _requests = aws
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), HtmlErrorPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        driver = AWSDriver(endpoint_url='http://127.0.0.1:%d' % server.server_address[1])
        with pytest.raises(DriverError) as info:
            driver.list_vms(cls)
        assert info.value.code == Code.UNAVAILABLE and 'unreadable' in str(info.value)
    finally:
        server.shutdown()
        server.server_close()
