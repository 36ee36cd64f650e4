# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWS driver (boto3): MCM's calls for EC2 instances, plus one listing per class per pass.

* CreateMachine: RunInstances (one instance) with the class's parameters, MCM-aws's tags plus the owner and
  class tags, and a ClientToken derived from the Machine UID: after a crash between the call and the status
  write, the retry gets the same instance back instead of a second one. The AMI's root device name is read
  once per AMI and region (DescribeImages) and cached.
* DeleteMachine: TerminateInstances of the providerID's instance (or, without one, of the instances tagged
  with the machine's UID); `InvalidInstanceID.NotFound` is success.
* list_vms (the wave): one DescribeInstances filtered by the class's cluster and role tag keys, paginated.
* InitializeMachine: turns the source/destination check off when `srcAndDstChecksEnabled: false` (NAT); called
  right after CreateMachine, as MCM does, and answers UNIMPLEMENTED without a call when there is nothing to do.

Every call first takes a token from the account/region's shared bucket (ratelimit.py). Botocore's own
retries are off: a throttled answer (`RequestLimitExceeded`, `Throttling`) pauses the bucket and is retried
with full-jitter backoff a few times, then reported as THROTTLED (retried soon, not in 3 minutes). Errors map
to MCM's codes by EC2 error code (`map_error`), never by message text.

Endpoint: botocore reads `AWS_ENDPOINT_URL` (and `AWS_ENDPOINT_URL_EC2`) from the environment, as every
AWS SDK does; `endpoint_url` overrides it. Credentials come from the class's Secret only.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.machines import aws_spec
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import CLASS_TAG, OWNER_TAG
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import (
    VM,
    ClassContext,
    CreateResult,
    Driver,
    MachineContext,
    VMState,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import jittered_backoff
from ansible_collections.steward.cluster.plugins.module_utils.machines.ratelimit import bucket_for

try:
    import boto3
    import botocore.config
    import botocore.exceptions
    import botocore.parsers
    HAS_BOTO3 = True
except ImportError:  # reported when the driver is built
    HAS_BOTO3 = False

THROTTLE_CODES = ('RequestLimitExceeded', 'Throttling', 'ThrottlingException', 'RequestThrottled')
CAPACITY_CODES = ('InsufficientCapacity', 'InsufficientAddressCapacity', 'InsufficientInstanceCapacity',
                  'InsufficientVolumeCapacity', 'InstanceLimitExceeded', 'VcpuLimitExceeded', 'VolumeLimitExceeded',
                  'MaxIOPSLimitExceeded', 'RouteLimitExceeded', 'Unsupported', 'MaxSpotInstanceCountExceeded')
INVALID_PREFIXES = ('InvalidParameter', 'InvalidAMIID', 'InvalidSubnetID', 'InvalidGroup', 'InvalidKeyPair',
                    'InvalidBlockDeviceMapping', 'MissingParameter', 'InvalidInstanceType', 'InvalidIamInstanceProfile',
                    'InvalidSnapshot', 'UnknownParameter', 'InvalidAMIName', 'NoSuchEntity')


def map_error(error_code: str, status: int) -> Code:
    """An EC2 error code (and HTTP status) as one of MCM's codes."""
    if error_code in THROTTLE_CODES:
        return Code.THROTTLED
    if error_code.startswith('InvalidInstanceID.NotFound'):
        return Code.NOT_FOUND
    if error_code == 'IdempotentParameterMismatch':
        return Code.ALREADY_EXISTS
    if error_code in CAPACITY_CODES:
        return Code.RESOURCE_EXHAUSTED
    if error_code in ('AuthFailure', 'InvalidClientTokenId', 'SignatureDoesNotMatch', 'InvalidAccessKeyId'):
        return Code.UNAUTHENTICATED
    if error_code in ('UnauthorizedOperation', 'AccessDenied', 'OptInRequired', 'Blocked'):
        return Code.PERMISSION_DENIED
    if error_code.startswith(INVALID_PREFIXES):
        return Code.INVALID_ARGUMENT
    if status >= 500 or error_code in ('ServiceUnavailable', 'InternalError', 'Unavailable', 'RequestExpired'):
        return Code.UNAVAILABLE
    return Code.INTERNAL


class AWSDriver(Driver):
    provider = 'AWS'

    def __init__(self, rate: float = 10.0, burst: int = 20, endpoint_url: Optional[str] = None,
                 max_throttle_retries: int = 4, backoff_base: float = 0.5, backoff_cap: float = 20.0,
                 call_timeout: float = 30.0, page_size: int = 1000, on_request: Optional[Callable[[str, str], None]] = None,
                 sleep: Callable[[float], None] = time.sleep, rng: Optional[random.Random] = None):
        if not HAS_BOTO3:
            raise DriverError(Code.INTERNAL, 'the python library boto3 is required for the AWS driver')
        self.rate = rate
        self.burst = burst
        self.endpoint_url = endpoint_url
        self.max_throttle_retries = max_throttle_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.call_timeout = call_timeout
        self.page_size = page_size
        self.on_request = on_request      # (operation, outcome code name) per EC2 request, for metrics
        self.sleep = sleep
        self.rng = rng or random.Random()
        self._clients: Dict[Tuple[str, str, str, Optional[str]], Any] = {}
        self._root_devices: Dict[Tuple[str, str], Optional[str]] = {}
        self._lock = threading.Lock()
        self._image_lock = threading.Lock()      # one DescribeImages per AMI, even when workers start together

    # --- plumbing -------------------------------------------------------------------------------
    def _spec(self, cls: ClassContext, call: Call) -> aws_spec.AWSSpec:
        try:
            return aws_spec.parse(cls.provider, cls.provider_spec, cls.secret)
        except InvalidInput as exc:
            raise DriverError(Code.INVALID_ARGUMENT, 'MachineClass %s: %s' % (cls.key, exc), call, cls.key) from None

    def _client(self, spec: aws_spec.AWSSpec) -> Any:
        key = (spec.credentials.access_key_id, spec.credentials.secret_access_key, spec.region, self.endpoint_url)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                config = botocore.config.Config(retries={'max_attempts': 1, 'mode': 'standard'}, connect_timeout=5,
                                                read_timeout=self.call_timeout, max_pool_connections=50)
                kwargs: Dict[str, Any] = {'region_name': spec.region, 'config': config,
                                          'aws_access_key_id': spec.credentials.access_key_id,
                                          'aws_secret_access_key': spec.credentials.secret_access_key}
                if self.endpoint_url:
                    kwargs['endpoint_url'] = self.endpoint_url
                client = boto3.session.Session().client('ec2', **kwargs)
                self._clients[key] = client
            return client

    def bucket(self, spec: aws_spec.AWSSpec):
        return bucket_for(('aws', spec.credentials.access_key_id, spec.region, self.endpoint_url), self.rate, self.burst)

    def _request(self, spec: aws_spec.AWSSpec, call: Call, operation: str, **params: Any) -> Dict[str, Any]:
        """One EC2 request under the account/region budget, throttling retried with jittered backoff."""
        client = self._client(spec)
        bucket = self.bucket(spec)
        deadline = time.monotonic() + self.call_timeout
        attempt = 0
        while True:
            if not bucket.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise DriverError(Code.THROTTLED, '%s: no request budget left within %ss (account/region limit %s/s)' % (
                    operation, self.call_timeout, self.rate), call, retry_after=1.0 / self.rate)
            try:
                answer = getattr(client, _snake(operation))(**params)
                self._count(operation, 'OK')
                return answer
            except botocore.exceptions.ClientError as exc:
                error = exc.response.get('Error') or {}
                status = int((exc.response.get('ResponseMetadata') or {}).get('HTTPStatusCode') or 0)
                code = map_error(str(error.get('Code') or ''), status)
                self._count(operation, str(error.get('Code') or code.mcm_name))
                message = '%s: %s: %s' % (operation, error.get('Code'), error.get('Message') or '')
            except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectTimeoutError,
                    botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectionClosedError) as exc:
                self._count(operation, 'Unavailable')
                code, message = Code.UNAVAILABLE, '%s: the EC2 endpoint did not answer: %s' % (operation, type(exc).__name__)
            except (botocore.exceptions.BotoCoreError, botocore.parsers.ResponseParserError) as exc:
                # an answer that is not EC2's (a proxy's or an overloaded endpoint's HTML 5xx page): transient
                self._count(operation, 'Unavailable')
                code, message = Code.UNAVAILABLE, '%s: the EC2 endpoint answered something unreadable: %s' % (
                    operation, str(exc).splitlines()[0][:200])
            if code != Code.THROTTLED:
                raise DriverError(code, message, call)
            backoff = jittered_backoff(attempt, self.backoff_base, self.backoff_cap, self.rng)
            bucket.pause(backoff)
            attempt += 1
            if attempt > self.max_throttle_retries or time.monotonic() + backoff > deadline:
                raise DriverError(Code.THROTTLED, message, call, retry_after=backoff)
            self.sleep(backoff)

    def _count(self, operation: str, outcome: str) -> None:
        if self.on_request is not None:
            self.on_request(operation, outcome)

    def _root_device(self, spec: aws_spec.AWSSpec) -> Optional[str]:
        key = (spec.region, spec.ami)
        with self._image_lock:
            if key not in self._root_devices:
                answer = self._request(spec, Call.CREATE, 'DescribeImages', ImageIds=[spec.ami])
                images = answer.get('Images') or []
                if not images:
                    raise DriverError(Code.NOT_FOUND, 'Image %s not found' % spec.ami, Call.CREATE)
                self._root_devices[key] = images[0].get('RootDeviceName')
            return self._root_devices[key]

    # --- MCM's calls ------------------------------------------------------------------------------
    def create_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        spec = self._spec(cls, Call.CREATE)
        root = self._root_device(spec) if spec.raw.get('blockDevices') else None
        try:
            params = aws_spec.run_instances_params(spec, machine.name, machine.uid, cls.uid, root)
        except InvalidInput as exc:
            raise DriverError(Code.INVALID_ARGUMENT, str(exc), Call.CREATE) from None
        answer = self._request(spec, Call.CREATE, 'RunInstances', **params)
        instances = answer.get('Instances') or []
        if not instances or not instances[0].get('InstanceId'):
            raise DriverError(Code.INTERNAL, 'RunInstances for machine %s returned no instance' % machine.name, Call.CREATE)
        inst = instances[0]
        return CreateResult(aws_spec.provider_id(spec.region, inst['InstanceId']), inst.get('PrivateDnsName') or '',
                            (inst.get('State') or {}).get('Name') or '')

    def initialize_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        """The instance named by the machine's providerID (right after CreateMachine: no listing, which may not
        show it yet); an instance EC2 does not know yet (eventual consistency) is UNINITIALIZED, retried soon."""
        spec = self._spec(cls, Call.INITIALIZE)
        if spec.src_dst_checks is not False:
            raise DriverError(Code.UNIMPLEMENTED, 'nothing to initialize', Call.INITIALIZE)
        if machine.provider_id:
            vm = VM(provider_id=machine.provider_id, node_name=machine.node_name)
        else:
            vm = self._status(spec, machine)
        try:
            _region, instance = aws_spec.instance_id(vm.provider_id)
        except InvalidInput as exc:
            raise DriverError(Code.INVALID_ARGUMENT, str(exc), Call.INITIALIZE) from None
        try:
            self._request(spec, Call.INITIALIZE, 'ModifyInstanceAttribute', InstanceId=instance,
                          SourceDestCheck={'Value': False})
        except DriverError as exc:
            if exc.code != Code.NOT_FOUND:
                raise
            raise DriverError(Code.UNINITIALIZED, '%s: the instance is not visible yet; source/destination check not '
                              'turned off' % exc.args[0], Call.INITIALIZE) from None
        return CreateResult(vm.provider_id, vm.node_name)

    def delete_machine(self, cls: ClassContext, machine: MachineContext) -> str:
        spec = self._spec(cls, Call.DELETE)
        if machine.provider_id:
            try:
                ids = [aws_spec.instance_id(machine.provider_id)[1]]
            except InvalidInput as exc:
                raise DriverError(Code.INVALID_ARGUMENT, str(exc), Call.DELETE) from None
        else:
            ids = [aws_spec.instance_id(vm.provider_id)[1] for vm in self.list_vms(cls)
                   if vm.owner_uid == machine.uid and machine.uid and not vm.state.gone]
        if not ids:
            return 'no VM'
        try:
            answer = self._request(spec, Call.DELETE, 'TerminateInstances', InstanceIds=ids)
        except DriverError as exc:
            if exc.code == Code.NOT_FOUND or (exc.code != Code.THROTTLED and self._all_gone(spec, ids)):
                return 'terminated'      # already gone: MCM's contract says OK
            raise
        states = [(i.get('CurrentState') or {}).get('Name') for i in answer.get('TerminatingInstances') or []]
        return ','.join(s for s in states if s) or 'shutting-down'

    def _all_gone(self, spec: aws_spec.AWSSpec, ids: List[str]) -> bool:
        """After a refused TerminateInstances: are the instances terminated (or unknown) anyway? Some EC2
        implementations refuse to terminate an instance that already is."""
        try:
            answer = self._request(spec, Call.DELETE, 'DescribeInstances', InstanceIds=ids)
        except DriverError as exc:
            return exc.code == Code.NOT_FOUND
        states = [(i.get('State') or {}).get('Name') for r in answer.get('Reservations') or [] for i in r.get('Instances') or []]
        return all(state in ('shutting-down', 'terminated') for state in states)

    def get_machine_status(self, cls: ClassContext, machine: MachineContext) -> VM:
        return self._status(self._spec(cls, Call.STATUS), machine)

    def _status(self, spec: aws_spec.AWSSpec, machine: MachineContext) -> VM:
        lookup = Inventory(self._list(spec), 0.0, 0).lookup(machine)
        if lookup.code != Code.OK or lookup.vm is None:
            what = 'several VMs' if lookup.code == Code.OUT_OF_RANGE else 'no VM'
            raise DriverError(lookup.code, 'machine %s: %s' % (machine.name, what), Call.STATUS)
        return lookup.vm

    def list_vms(self, cls: ClassContext) -> List[VM]:
        return self._list(self._spec(cls, Call.LIST))

    def _list(self, spec: aws_spec.AWSSpec) -> List[VM]:
        vms: List[VM] = []
        token: Optional[str] = None
        while True:
            params: Dict[str, Any] = {'Filters': aws_spec.describe_filters(spec), 'MaxResults': self.page_size}
            if token:
                params['NextToken'] = token
            answer = self._request(spec, Call.LIST, 'DescribeInstances', **params)
            for reservation in answer.get('Reservations') or []:
                for inst in reservation.get('Instances') or []:
                    keys = {t.get('Key') for t in inst.get('Tags') or []}
                    if spec.cluster_tag in keys and spec.role_tag in keys:   # the filters are a hint; the tags decide
                        vms.append(self._vm(spec, inst))
            token = answer.get('NextToken')
            if not token:
                return vms

    def _vm(self, spec: aws_spec.AWSSpec, inst: Mapping[str, Any]) -> VM:
        tags = {t.get('Key'): t.get('Value') for t in inst.get('Tags') or []}
        state = (inst.get('State') or {}).get('Name') or 'pending'
        launched = inst.get('LaunchTime')
        return VM(provider_id=aws_spec.provider_id(spec.region, inst['InstanceId']),
                  node_name=inst.get('PrivateDnsName') or '', machine_name=tags.get('Name') or '',
                  owner_uid=tags.get(OWNER_TAG) or '', class_uid=tags.get(CLASS_TAG) or '',
                  state=VMState(state) if state in aws_spec.ALL_STATES else VMState.PENDING,
                  launched=launched.timestamp() if hasattr(launched, 'timestamp') else None,
                  needs_init=spec.src_dst_checks is False and inst.get('SourceDestCheck', True) is not False,
                  last_known_state=state)

    def get_volume_ids(self, pv_specs: Sequence[Mapping[str, Any]]) -> List[str]:
        return [v for v in (aws_spec.volume_id(s) for s in pv_specs) if v]


def _snake(operation: str) -> str:
    out = ''
    for i, ch in enumerate(operation):
        if ch.isupper() and i:
            out += '_'
        out += ch.lower()
    return out
