"""The AWS driver's pure parts: an MCM AWS MachineClass read unchanged, RunInstances parameters (tags, ClientToken),
EC2 error codes as MCM codes, the shared token bucket and the throttle retry loop."""

import copy

import botocore.exceptions
import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.machines import aws_spec
from ansible_collections.steward.cluster.plugins.module_utils.machines.aws import AWSDriver, map_error
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import ClassContext, MachineContext
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.common.ratelimit import TokenBucket
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import jittered_backoff

# A MachineClass as MCM's AWS provider documents it (kubernetes/machine_classes/aws-machine-class.yaml).
MCM_SPEC = {
    'ami': 'ami-123456', 'region': 'eu-west-1', 'machineType': 'm5.large', 'iam': {'name': 'shoot--foo-nodes'},
    'keyName': 'shoot--foo-ssh', 'srcAndDstChecksEnabled': False,
    'networkInterfaces': [{'subnetID': 'subnet-1', 'securityGroupIDs': ['sg-1', 'sg-2']}],
    'blockDevices': [{'ebs': {'volumeSize': 50, 'volumeType': 'gp3', 'deleteOnTermination': True, 'encrypted': True}},
                     {'deviceName': '/dev/sdf', 'ebs': {'volumeSize': 100, 'volumeType': 'io1', 'iops': 3000}}],
    'tags': {'kubernetes.io/cluster/shoot--foo': '1', 'kubernetes.io/role/node': '1', 'Name': 'ignored', 'team': 'a'},
}
SECRET = {'userData': '#cloud-config\n', 'providerAccessKeyId': 'AKID', 'providerSecretAccessKey': 'very-secret'}


def spec_with(**changes):
    spec = copy.deepcopy(MCM_SPEC)
    spec['blockDevices'][0]['deviceName'] = '/root'
    for k, v in changes.items():
        if v is None:
            spec.pop(k, None)
        else:
            spec[k] = v
    return spec


def test_an_mcm_aws_class_is_read_unchanged():
    spec = aws_spec.parse('AWS', spec_with(), SECRET)
    assert (spec.region, spec.ami, spec.machine_type) == ('eu-west-1', 'ami-123456', 'm5.large')
    assert (spec.cluster_tag, spec.role_tag) == ('kubernetes.io/cluster/shoot--foo', 'kubernetes.io/role/node')
    assert spec.credentials.access_key_id == 'AKID' and 'very-secret' not in repr(spec.credentials)
    alt = aws_spec.parse('AWS', spec_with(), {'userData': 'x', 'accessKeyID': 'K', 'secretAccessKey': 'S'})
    assert alt.credentials.secret_access_key == 'S'


@pytest.mark.parametrize('provider, spec, secret, field', [
    ('Azure', spec_with(), SECRET, 'provider'),
    ('AWS', spec_with(ami=None), SECRET, 'providerSpec.ami'),
    ('AWS', spec_with(iam={'name': 'a', 'arn': 'b'}), SECRET, 'providerSpec.iam'),
    ('AWS', spec_with(tags={'kubernetes.io/role/node': '1'}), SECRET, 'providerSpec.tags'),
    ('AWS', spec_with(networkInterfaces=[{'subnetID': 's'}]), SECRET, 'providerSpec.networkInterfaces[0].securityGroupIDs'),
    ('AWS', spec_with(networkInterfaces=[]), SECRET, 'providerSpec.networkInterfaces'),
    ('AWS', spec_with(blockDevices=[{'ebs': {'volumeSize': 0, 'volumeType': 'gp3'}}]), SECRET, 'providerSpec.blockDevices[0].ebs.volumeSize'),
    ('AWS', spec_with(blockDevices=[{'ebs': {'volumeSize': 1, 'volumeType': 'fast'}}]), SECRET, 'providerSpec.blockDevices[0].ebs.volumeType'),
    ('AWS', spec_with(blockDevices=[{'deviceName': '/dev/sdb', 'ebs': {'volumeSize': 1, 'volumeType': 'gp3'}},
                                    {'deviceName': '/dev/sdc', 'ebs': {'volumeSize': 1, 'volumeType': 'gp3'}}]), SECRET,
     'providerSpec.blockDevices'),
    ('AWS', spec_with(), {'providerAccessKeyId': 'K', 'providerSecretAccessKey': 'S'}, 'secretRef.userData'),
    ('AWS', spec_with(), {'userData': 'x', 'providerAccessKeyId': 'K'}, 'secretRef.providerSecretAccessKey'),
])
def test_bad_classes_name_the_field_and_never_echo_secrets(provider, spec, secret, field):
    with pytest.raises(InvalidInput) as info:
        aws_spec.parse(provider, spec, secret)
    assert info.value.field == field
    assert 'very-secret' not in str(info.value) and info.value.value != 'very-secret'


def test_run_instances_parameters():
    spec = aws_spec.parse('AWS', spec_with(), SECRET)
    params = aws_spec.run_instances_params(spec, 'shoot-m1', 'uid-1', 'class-uid', '/dev/xvda')
    assert params['ClientToken'] == 'steward-uid-1' and (params['MinCount'], params['MaxCount']) == (1, 1)
    tags = {t['Key']: t['Value'] for t in params['TagSpecifications'][0]['Tags']}
    assert tags['Name'] == 'shoot-m1'                              # MCM: Name forced to the machine
    assert tags['machine.steward.io/owner-uid'] == 'uid-1' and tags['machine.steward.io/class-uid'] == 'class-uid'
    assert tags['kubernetes.io/cluster/shoot--foo'] == '1' and tags['team'] == 'a'
    assert [t['ResourceType'] for t in params['TagSpecifications']] == ['instance', 'volume', 'network-interface']
    assert params['BlockDeviceMappings'][0]['DeviceName'] == '/dev/xvda'
    assert params['BlockDeviceMappings'][1] == {'DeviceName': '/dev/sdf', 'Ebs': {
        'Encrypted': False, 'VolumeSize': 100, 'VolumeType': 'io1', 'DeleteOnTermination': True, 'Iops': 3000}}
    assert params['NetworkInterfaces'] == [{'DeviceIndex': 0, 'SubnetId': 'subnet-1', 'Groups': ['sg-1', 'sg-2'],
                                            'DeleteOnTermination': True}]
    assert params['IamInstanceProfile'] == {'Name': 'shoot--foo-nodes'} and params['KeyName'] == 'shoot--foo-ssh'
    assert params['UserData'] == '#cloud-config\n'                 # boto3 base64-encodes it


def test_the_client_token_is_stable_and_fits_ec2s_limit():
    assert aws_spec.client_token('a' * 36) == aws_spec.client_token('a' * 36)
    assert len(aws_spec.client_token('x' * 100)) == 64


def test_wave_filters_provider_ids_and_volume_ids():
    spec = aws_spec.parse('AWS', spec_with(), SECRET)
    filters = aws_spec.describe_filters(spec)
    assert filters[0] == {'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/shoot--foo']}
    assert 'terminated' in filters[2]['Values']
    assert aws_spec.instance_id('aws:///eu-west-1/i-0abc') == ('eu-west-1', 'i-0abc')
    with pytest.raises(InvalidInput):
        aws_spec.instance_id('gce://x/y')
    assert aws_spec.volume_id({'awsElasticBlockStore': {'volumeID': 'aws://eu-west-1a/vol-1'}}) == 'vol-1'
    assert aws_spec.volume_id({'csi': {'driver': 'ebs.csi.aws.com', 'volumeHandle': 'vol-2'}}) == 'vol-2'
    assert aws_spec.volume_id({'nfs': {}}) is None


@pytest.mark.parametrize('ec2_code, status, expected', [
    ('RequestLimitExceeded', 503, Code.THROTTLED), ('Throttling', 400, Code.THROTTLED),
    ('InsufficientInstanceCapacity', 500, Code.RESOURCE_EXHAUSTED), ('VcpuLimitExceeded', 400, Code.RESOURCE_EXHAUSTED),
    ('InvalidInstanceID.NotFound', 400, Code.NOT_FOUND), ('IdempotentParameterMismatch', 400, Code.ALREADY_EXISTS),
    ('AuthFailure', 401, Code.UNAUTHENTICATED), ('UnauthorizedOperation', 403, Code.PERMISSION_DENIED),
    ('InvalidSubnetID.NotFound', 400, Code.INVALID_ARGUMENT), ('InvalidAMIID.Malformed', 400, Code.INVALID_ARGUMENT),
    ('InternalError', 500, Code.UNAVAILABLE), ('Whatever', 400, Code.INTERNAL),
])
def test_ec2_errors_map_to_mcm_codes(ec2_code, status, expected):
    assert map_error(ec2_code, status) == expected


# --- the budget ------------------------------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_token_bucket_limits_the_rate_and_a_pause_empties_it():
    clock = Clock()
    bucket = TokenBucket(10, 5, clock=clock, sleep=clock.sleep)
    for _step in range(25):
        assert bucket.acquire()
    assert clock.t == pytest.approx(2.0)           # 5 from the burst, 20 at 10/s
    bucket.pause(3)
    assert bucket.try_take() == pytest.approx(3.0)
    assert not bucket.acquire(timeout=1)


def test_jittered_backoff_grows_and_is_capped():
    import random
    rng = random.Random(1)
    values = [jittered_backoff(a, 0.5, 4, rng) for a in range(10)]
    assert all(0.25 <= v <= 4 for v in values) and max(values[5:]) > max(values[:2])


class ThrottlingClient:
    """Stands in for boto3's EC2 client: throttles `n` times, then answers."""

    def __init__(self, n):
        self.n = n
        self.calls = 0

    def describe_instances(self, **_params):
        self.calls += 1
        if self.calls <= self.n:
            raise botocore.exceptions.ClientError({'Error': {'Code': 'RequestLimitExceeded', 'Message': 'Request limit exceeded.'},
                                                   'ResponseMetadata': {'HTTPStatusCode': 503}}, 'DescribeInstances')
        return {'Reservations': []}


def driver_with(client, retries=4):
    slept = []
    d = AWSDriver(rate=1000, burst=1000, endpoint_url='http://throttle.test', max_throttle_retries=retries,
                  backoff_base=0.01, backoff_cap=0.05, sleep=slept.append)
    spec = aws_spec.parse('AWS', spec_with(), SECRET)
    d._clients[(spec.credentials.access_key_id, spec.credentials.secret_access_key, spec.region, d.endpoint_url)] = client
    return d, slept, ClassContext('ns', 'c', 'cu', 'AWS', spec_with(), SECRET)


def test_throttling_is_retried_with_backoff_then_reported_as_throttled():
    client = ThrottlingClient(2)
    d, slept, cls = driver_with(client)
    assert d.list_vms(cls) == [] and client.calls == 3 and len(slept) == 2
    d, slept, cls = driver_with(ThrottlingClient(100), retries=2)
    with pytest.raises(DriverError) as info:
        d.list_vms(cls)
    assert info.value.code == Code.THROTTLED and info.value.retry_after is not None and len(slept) == 2


def test_a_bad_class_is_invalid_argument_before_any_request():
    d = AWSDriver(endpoint_url='http://unused.test')
    cls = ClassContext('ns', 'c', 'cu', 'AWS', spec_with(machineType=None), SECRET)
    with pytest.raises(DriverError) as info:
        d.create_machine(cls, MachineContext('ns', 'm', 'u'))
    assert info.value.code == Code.INVALID_ARGUMENT and 'providerSpec.machineType' in str(info.value)
    assert info.value.call == Call.CREATE
