# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sabakan driver: bare-metal machines from a sabakan inventory, claimed one per Machine.

A MachineClass with `provider: Sabakan` names a query in `providerSpec`:

    sabakanURL: http://sabakan:10080    # else the controller's --sabakan-url
    role: cs                            # sabakan spec.role (optional)
    labels: {product: vm}               # sabakan labels the machine must have (optional)
    racks: [0, 1, 2]                    # allowed racks (optional)
    spreadRacks: true                   # prefer the rack with the fewest claims of this class (default true)
    setRetiring: false                  # DeleteMachine also moves the server to RETIRING in sabakan
    timeout: 30                         # seconds per sabakan request

**The claim** (the contract the lab's node emulator reads): a `coordination.k8s.io/v1` Lease named
`sabakan-claim-<serial>` in the Machine's namespace, labelled `machine.steward.io/sabakan-serial: <serial>`,
annotated `machine.steward.io/sabakan-address: <ipv4>`, with `spec.holderIdentity` = the Machine's UID. It is
created with POST: the API server admits one create of a name, so two controllers (or two machines) can never
both hold a server; a 409 moves on to the next candidate. Claims of every namespace are skipped when choosing.

CreateMachine: the machine's own claim if it has one (idempotent), else the first HEALTHY server matching the
query that nobody claims, rack-spread; providerID `sabakan:///<serial>`, node name = its first IPv4 address
(as CKE names nodes). DeleteMachine releases the claim (only one the machine holds) and optionally sets the
server RETIRING. list_vms: the class's claims with the servers' sabakan states (RETIRING/RETIRED = gone).
UpdateMachine (in-place updates): the same server, checked against the new class's query; the claim records the
applied class and kubelet version.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import AlreadyExists, KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro, parse_micro
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    APPLIED_CLASS_ANNOTATION,
    CLASS_TAG,
    SABAKAN_ADDRESS_ANNOTATION,
    SABAKAN_CLAIM_PREFIX,
    SABAKAN_SERIAL_LABEL,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import KUBELET_VERSION_LABEL
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import (
    VM,
    ClassContext,
    CreateResult,
    Driver,
    MachineContext,
    VMState,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import SabakanClient
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    SabakanError,
    SabakanQueryError,
    SabakanUnavailable,
)

PROVIDER = 'Sabakan'
LEASES = 'coordination.k8s.io/v1'
MACHINE_NAME_ANNOTATION = 'machine.steward.io/machine-name'
PROVIDER_PREFIX = 'sabakan:///'
GONE_STATES = ('RETIRING', 'RETIRED')
_SERIAL = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,40}$')


def parse_spec(cls: ClassContext, default_url: str) -> Dict[str, Any]:
    """The class's query, checked; raises InvalidInput naming the field."""
    if cls.provider != PROVIDER:
        raise InvalidInput('provider', 'one-of', "requested for provider %r, this driver supports only 'Sabakan'" % cls.provider,
                           cls.provider)
    spec = cls.provider_spec
    if not isinstance(spec, Mapping):
        raise InvalidInput('providerSpec', 'object', 'must be a mapping', None)
    url = spec.get('sabakanURL') or default_url
    if not isinstance(url, str) or not url.startswith(('http://', 'https://')):
        raise InvalidInput('providerSpec.sabakanURL', 'url', 'an http(s) URL is required (or the controller\'s --sabakan-url)', url)
    labels = spec.get('labels') or {}
    if not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise InvalidInput('providerSpec.labels', 'string-map', 'labels must map strings to strings', labels)
    racks = spec.get('racks')
    if racks is not None and (not isinstance(racks, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in racks)):
        raise InvalidInput('providerSpec.racks', 'int-list', 'racks must be a list of rack numbers', racks)
    role = spec.get('role')
    if role is not None and not isinstance(role, str):
        raise InvalidInput('providerSpec.role', 'string', 'role must be a string', role)
    for flag in ('spreadRacks', 'setRetiring'):
        if spec.get(flag) is not None and not isinstance(spec.get(flag), bool):
            raise InvalidInput('providerSpec.' + flag, 'boolean', 'expected true or false', spec.get(flag))
    timeout = spec.get('timeout', 30)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidInput('providerSpec.timeout', 'positive', 'must be a positive number of seconds', timeout)
    return {'url': url, 'role': role, 'labels': dict(labels), 'racks': racks, 'spread': spec.get('spreadRacks', True) is not False,
            'retire': spec.get('setRetiring') is True, 'timeout': float(timeout)}


def class_query(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """The sabakan MachineParams a class's servers must have (role, labels, racks); {} when it names none."""
    having: Dict[str, Any] = {}
    if spec['role']:
        having['roles'] = [spec['role']]
    if spec['labels']:
        having['labels'] = [{'name': k, 'value': v} for k, v in sorted(spec['labels'].items())]
    if spec['racks'] is not None:
        having['racks'] = list(spec['racks'])
    return having


def claim_name(serial: str) -> str:
    return SABAKAN_CLAIM_PREFIX + serial.lower()


def serial_of(provider_id: str) -> str:
    if not provider_id.startswith(PROVIDER_PREFIX) or not _SERIAL.match(provider_id[len(PROVIDER_PREFIX):]):
        raise InvalidInput('spec.providerID', 'sabakan-provider-id', 'expected sabakan:///<serial>, got %r' % provider_id,
                           provider_id)
    return provider_id[len(PROVIDER_PREFIX):]


def claim_body(namespace: str, serial: str, address: str, machine: MachineContext, class_uid: str, now: float) -> Dict[str, Any]:
    return {'apiVersion': LEASES, 'kind': 'Lease',
            'metadata': {'name': claim_name(serial), 'namespace': namespace,
                         'labels': {SABAKAN_SERIAL_LABEL: serial},
                         'annotations': {SABAKAN_ADDRESS_ANNOTATION: address, MACHINE_NAME_ANNOTATION: machine.name,
                                         CLASS_TAG: class_uid}},
            'spec': {'holderIdentity': machine.uid, 'acquireTime': format_micro(now), 'renewTime': format_micro(now)}}


def vm_state(sabakan_state: Optional[str]) -> VMState:
    if sabakan_state in GONE_STATES or sabakan_state is None:
        return VMState.TERMINATED      # retired, or no longer in sabakan at all
    return VMState.RUNNING


def choose(candidates: List[Dict[str, Any]], claimed: set, rack_load: Mapping[int, int], spread: bool) -> List[Dict[str, Any]]:
    """Unclaimed candidates in the order to try: least-loaded rack first (when spreading), then serial."""
    free = [m for m in candidates if m['spec']['serial'] not in claimed]
    if spread:
        return sorted(free, key=lambda m: (rack_load.get(m['spec']['rack'], 0), m['spec']['rack'], m['spec']['serial']))
    return sorted(free, key=lambda m: m['spec']['serial'])


class SabakanDriver(Driver):
    provider = PROVIDER

    def __init__(self, kube: KubeClient, default_url: str = '', clock: Callable[[], float] = time.time):
        self.kube = kube
        self.default_url = default_url
        self.clock = clock

    # --- plumbing -----------------------------------------------------------------------------------
    def _spec(self, cls: ClassContext, call: Call) -> Dict[str, Any]:
        try:
            return parse_spec(cls, self.default_url)
        except InvalidInput as exc:
            raise DriverError(Code.INVALID_ARGUMENT, 'MachineClass %s: %s' % (cls.key, exc), call, cls.key) from None

    def _sabakan(self, spec: Mapping[str, Any]) -> SabakanClient:
        return SabakanClient(spec['url'], timeout=spec['timeout'])

    @staticmethod
    def _sabakan_error(exc: SabakanError, call: Call) -> DriverError:
        code = Code.UNAVAILABLE if isinstance(exc, SabakanUnavailable) else (
            Code.INVALID_ARGUMENT if isinstance(exc, SabakanQueryError) else Code.INTERNAL)
        return DriverError(code, 'sabakan: %s' % exc, call)

    def _claims(self, namespace: Optional[str], call: Call) -> List[Dict[str, Any]]:
        try:
            return self.kube.list(api_path(LEASES, 'leases', namespace), label_selector=SABAKAN_SERIAL_LABEL)
        except KubeError as exc:
            raise DriverError(Code.UNAVAILABLE, 'cannot list sabakan claims: %s' % exc, call) from None

    @staticmethod
    def _holder(lease: Mapping[str, Any]) -> str:
        return str((lease.get('spec') or {}).get('holderIdentity') or '')

    @staticmethod
    def _serial(lease: Mapping[str, Any]) -> str:
        return str(((lease.get('metadata') or {}).get('labels') or {}).get(SABAKAN_SERIAL_LABEL) or '')

    def _result(self, lease: Mapping[str, Any]) -> CreateResult:
        address = ((lease.get('metadata') or {}).get('annotations') or {}).get(SABAKAN_ADDRESS_ANNOTATION) or ''
        return CreateResult(PROVIDER_PREFIX + self._serial(lease), address, 'claimed')

    # --- MCM's calls ------------------------------------------------------------------------------------
    def create_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        spec = self._spec(cls, Call.CREATE)
        every = self._claims(None, Call.CREATE)
        own = [c for c in every if self._holder(c) == machine.uid and (c.get('metadata') or {}).get('namespace') == machine.namespace]
        if own:
            return self._result(own[0])
        having = dict(class_query(spec), states=['HEALTHY'])
        try:
            candidates = self._sabakan(spec).search_machines(having, {'roles': ['boot']})
        except SabakanError as exc:
            raise self._sabakan_error(exc, Call.CREATE) from None
        claimed = {self._serial(c) for c in every}
        racks = {m['spec']['serial']: m['spec']['rack'] for m in candidates}
        load: Dict[int, int] = {}
        for c in every:
            annotations = (c.get('metadata') or {}).get('annotations') or {}
            if annotations.get(CLASS_TAG) == cls.uid and self._serial(c) in racks:
                load[racks[self._serial(c)]] = load.get(racks[self._serial(c)], 0) + 1
        for candidate in choose(candidates, claimed, load, spec['spread']):
            serial = candidate['spec']['serial']
            address = candidate['spec']['ipv4'][0] if candidate['spec']['ipv4'] else ''
            body = claim_body(machine.namespace, serial, address, machine, cls.uid, self.clock())
            try:
                lease = self.kube.create(api_path(LEASES, 'leases', machine.namespace), body)
            except AlreadyExists:
                continue       # another machine or controller was faster: the API server decided
            except KubeError as exc:
                raise DriverError(Code.UNAVAILABLE, 'cannot claim sabakan machine %s: %s' % (serial, exc), Call.CREATE) from None
            return self._result(lease or body)
        raise DriverError(Code.RESOURCE_EXHAUSTED, 'no HEALTHY sabakan machine matching %s is free (%d match, all claimed)' % (
            having, len(candidates)), Call.CREATE)

    def delete_machine(self, cls: ClassContext, machine: MachineContext) -> str:
        spec = self._spec(cls, Call.DELETE)
        claims = [c for c in self._claims(machine.namespace, Call.DELETE) if self._holder(c) == machine.uid]
        if machine.provider_id and not claims:
            return 'released'      # nothing held: already gone
        for claim in claims:
            serial = self._serial(claim)
            if spec['retire']:
                try:
                    self._sabakan(spec).set_machine_state(serial, 'RETIRING')
                except SabakanQueryError:
                    pass           # not a state that may retire (already retiring/retired): the claim goes anyway
                except SabakanError as exc:
                    raise self._sabakan_error(exc, Call.DELETE) from None
            try:
                self.kube.delete(api_path(LEASES, 'leases', machine.namespace, (claim.get('metadata') or {}).get('name')))
            except NotFound:
                pass
            except KubeError as exc:
                raise DriverError(Code.UNAVAILABLE, 'cannot release sabakan claim of %s: %s' % (serial, exc), Call.DELETE) from None
        return 'released'

    def list_vms(self, cls: ClassContext) -> List[VM]:
        spec = self._spec(cls, Call.LIST)
        claims = [c for c in self._claims(cls.namespace, Call.LIST)
                  if ((c.get('metadata') or {}).get('annotations') or {}).get(CLASS_TAG) in (cls.uid, None)]
        if not claims:
            return []
        try:
            states = {m['spec']['serial']: m['status']['state'] for m in self._sabakan(spec).search_machines(None, None)}
        except SabakanError as exc:
            raise self._sabakan_error(exc, Call.LIST) from None
        vms = []
        for c in claims:
            md = c.get('metadata') or {}
            serial = self._serial(c)
            sabakan_state = states.get(serial)
            vms.append(VM(provider_id=PROVIDER_PREFIX + serial,
                          node_name=(md.get('annotations') or {}).get(SABAKAN_ADDRESS_ANNOTATION) or '',
                          machine_name=(md.get('annotations') or {}).get(MACHINE_NAME_ANNOTATION) or '',
                          owner_uid=self._holder(c), class_uid=(md.get('annotations') or {}).get(CLASS_TAG) or '',
                          state=vm_state(sabakan_state), launched=parse_micro(md.get('creationTimestamp')),
                          last_known_state=sabakan_state or 'missing from sabakan'))
        return vms

    def update_machine(self, cls: ClassContext, machine: MachineContext) -> None:
        """In-place update (MachineDeployment strategy InPlaceUpdate): the server stays the machine's; it must match
        the new class's query (role, labels, racks: an update cannot move a machine to another server, that is a
        RollingUpdate), and its claim records what was applied: `machine.steward.io/applied-class` (the class
        name) and, when the class names one, `machine.steward.io/kubelet-version`. What runs on the server follows
        from there (the lab's node emulator reports that kubelet; on real hardware the server's provisioning reads
        the claim, or CKE / the kubelet install does the rest)."""
        spec = self._spec(cls, Call.UPDATE)
        claims = [c for c in self._claims(machine.namespace, Call.UPDATE) if self._holder(c) == machine.uid]
        if not claims:
            raise DriverError(Code.NOT_FOUND, 'machine %s/%s holds no sabakan claim' % (machine.namespace, machine.name),
                              Call.UPDATE)
        claim = claims[0]
        serial = self._serial(claim)
        having = class_query(spec)
        if having:
            try:
                matching = {m['spec']['serial'] for m in self._sabakan(spec).search_machines(having, None)}
            except SabakanError as exc:
                raise self._sabakan_error(exc, Call.UPDATE) from None
            if serial not in matching:
                raise DriverError(Code.PRECONDITION_FAILED, 'sabakan machine %s does not match the query of MachineClass %s '
                                  '(%s): an in-place update keeps the server; use strategy RollingUpdate to move to '
                                  'other servers' % (serial, cls.key, having), Call.UPDATE, cls.key)
        annotations = {APPLIED_CLASS_ANNOTATION: cls.name, KUBELET_VERSION_LABEL: cls.labels.get(KUBELET_VERSION_LABEL)}
        try:
            self.kube.merge_patch(api_path(LEASES, 'leases', machine.namespace, claim['metadata']['name']),
                                  {'metadata': {'annotations': annotations}})
        except KubeError as exc:
            raise DriverError(Code.UNAVAILABLE, 'cannot record the update on the claim of %s: %s' % (serial, exc),
                              Call.UPDATE) from None

    def get_volume_ids(self, pv_specs: List[Mapping[str, Any]]) -> List[str]:
        """Local and TopoLVM volumes die with the server: nothing to wait for."""
        return []
