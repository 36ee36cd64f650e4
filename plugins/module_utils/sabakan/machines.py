# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sabakan machines as the generator sees them.

Input is the JSON of sabakan's `searchMachines`; it is checked once here so the algorithm
below can trust every field and name the culprit when it cannot.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339, parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import MachineError

UNINITIALIZED = 'UNINITIALIZED'
HEALTHY = 'HEALTHY'
UNHEALTHY = 'UNHEALTHY'
UNREACHABLE = 'UNREACHABLE'
UPDATING = 'UPDATING'
RETIRING = 'RETIRING'
RETIRED = 'RETIRED'
STATES = (UNINITIALIZED, HEALTHY, UNHEALTHY, UNREACHABLE, UPDATING, RETIRING, RETIRED)

TimeLike = Union[datetime, str, None]


def parse_time(value: TimeLike, where: str = 'time') -> datetime:
    """RFC 3339 (or a datetime) to an aware datetime in the zone it was written in (CKE prints dates back in it);
    naive values are taken as UTC: a YAML machines file may hold timestamps without a zone, and PyYAML hands them
    over naive. Surrounding blanks are ignored, as before common/times took over the parsing."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    try:
        return parse_rfc3339(value.strip() if isinstance(value, str) else value, where, naive_utc=True, keep_zone=True)
    except InvalidInput as exc:
        raise MachineError(where, 'rfc3339', f'{value!r} is not an RFC 3339 date-time', value) from exc


def resolve_now(now: TimeLike) -> datetime:
    """The caller's clock (pure functions take `now`), or the wall clock when none is given."""
    return parse_time(now, 'now') if now is not None else datetime.now(timezone.utc)


def format_month(value: datetime) -> str:
    """Go's `2006-01` layout (zero-padded year, unlike strftime for years below 1000)."""
    return f'{value.year:04d}-{value.month:02d}'


# What Go's JSON decoding leaves in a time.Time field that is absent: CKE treats absent fields
# as zero values, so machines from tests or partial fixtures still work the same way.
ZERO_TIME = datetime(1, 1, 1, tzinfo=timezone.utc)


def address_key(address: str) -> Tuple[int, int, str]:
    """Sort key that orders IP addresses numerically (the deterministic tie-breaker)."""
    try:
        packed = socket.inet_aton(address)
    except (OSError, TypeError, ValueError):
        pass
    else:
        # inet_aton also takes shorthand and octal forms; only a canonical dotted quad is used as is.
        if socket.inet_ntoa(packed) == address:
            return (4, int.from_bytes(packed, 'big'), address)
    parts = address.split('.')
    if len(parts) == 4:
        try:
            a, b, c, d = map(int, parts)
        except ValueError:
            pass
        else:
            if 0 <= min(a, b, c, d) and max(a, b, c, d) <= 255:
                return (4, (a << 24) | (b << 16) | (c << 8) | d, address)
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return (9, 0, address)
    return (parsed.version, int(parsed), address)


@dataclass(eq=False, repr=False)
class Machine:
    """One sabakan machine; `address` is spec.ipv4[0], the node name CKE uses.

    Not frozen and with __slots__: a frozen dataclass costs twice as much to build, a __dict__ per
    instance costs memory and garbage-collector time, and 50,000 are built per run.
    Treat instances as read-only; identity is the address.
    """

    __slots__ = ('serial', 'address', 'rack', 'index_in_rack', 'role', 'labels', 'register_date', 'retire_date',
                 'bmc_type', 'state', 'duration', 'raw', '_sort_key')

    serial: str
    address: Optional[str]
    rack: int
    index_in_rack: int
    role: str
    labels: Tuple[Tuple[str, str], ...]
    register_date: datetime
    retire_date: datetime
    bmc_type: str
    state: str
    duration: float
    raw: Mapping[str, Any]  # the machine as sabakan gave it

    @property
    def sort_key(self) -> Tuple[int, int, str]:
        """address_key(address), the deterministic tie-breaker; computed when first compared."""
        try:
            return self._sort_key
        except AttributeError:
            key = self._sort_key = address_key(self.address or '')
            return key

    def __repr__(self) -> str:
        return (f'Machine(serial={self.serial!r}, address={self.address!r}, rack={self.rack}, role={self.role!r}, '
                f'state={self.state}, retire_date={format_rfc3339(self.retire_date)})')

    @property
    def healthy(self) -> bool:
        return self.state == HEALTHY

    def days_to_retire(self, now: datetime) -> int:
        """Whole days until retireDate, truncated toward zero like Go's int(hours / 24)."""
        return int((self.retire_date - now).total_seconds() / 3600 / 24)


def _int_field(spec: Mapping[str, Any], name: str, index: Optional[int], serial: str) -> int:
    value = spec.get(name)
    # Fast path; bool must not pass.
    if type(value) is int:  # noqa: E721  # pylint: disable=unidiomatic-typecheck
        return value
    if value is None:
        return 0  # absent: Go's zero value, as CKE decodes it
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip('-').isdigit():
            return int(value)
        raise MachineError(_where(index, serial), 'type', f'spec.{name} must be an integer, got {value!r}')
    return value


def _where(index: Optional[int], serial: Any = None) -> str:
    where = 'machine' if index is None else f'machines[{index}]'
    return f'{where} {serial}' if serial else where


_TIME_CACHE: Dict[str, datetime] = {}
_TIME_CACHE_SIZE = 65536


def _cached_time(value: str, where: str = 'time') -> datetime:
    """Sabakan dates repeat a lot (machines are bought and retired in batches); a plain dict is the cheapest cache."""
    result = _TIME_CACHE.get(value)
    if result is None:
        result = parse_time(value, where)
        if len(_TIME_CACHE) >= _TIME_CACHE_SIZE:
            _TIME_CACHE.clear()
        _TIME_CACHE[value] = result
    return result


def _date(spec: Dict[str, Any], name: str, index: Optional[int], serial: str) -> datetime:
    value = spec.get(name)
    if value is None:
        return ZERO_TIME
    if isinstance(value, str):
        return _cached_time(value, f'{_where(index, serial)}: spec.{name}')
    return parse_time(value, f'{_where(index, serial)}: spec.{name}')


_STATE_SET = frozenset(STATES)
_LABEL_SETS: Dict[Tuple[Tuple[str, str], ...], Tuple[Tuple[str, str], ...]] = {}
_LABEL_SETS_SIZE = 4096


def _parse_well_formed(raw: Any, now: Optional[datetime]) -> Optional[Machine]:
    """The common case, checked with as few operations as possible; None sends anything unusual
    to the full checks of `parse_machine` (which then either accepts it the same way or names the error).

    The generator parses every machine on every run, so this is the hot spot of a 10,000-machine update.
    Exact type() checks on purpose: they are the cheapest, and bool must not pass for int.
    """
    # pylint: disable=unidiomatic-typecheck
    if type(raw) is not dict:  # noqa: E721
        return None
    try:
        spec = raw['spec']
        status = raw['status']
        if type(spec) is not dict or type(status) is not dict:  # noqa: E721
            return None
        get = spec.get
        serial = spec['serial']
        ipv4 = spec['ipv4']
        role = spec['role']
        rack = spec['rack']
        index_in_rack = spec['indexInRack']
        state = status['state']
        if (type(serial) is not str or type(ipv4) is not list or len(ipv4) != 1 or type(ipv4[0]) is not str  # noqa: E721
                or type(role) is not str or type(rack) is not int or type(index_in_rack) is not int  # noqa: E721
                or state not in _STATE_SET):
            return None
        labels = get('labels')
        if labels:
            if type(labels) is not list:  # noqa: E721
                return None
            pairs = []
            for label in labels:
                if type(label) is not dict:  # noqa: E721
                    return None
                name = label['name']
                value = label['value']
                if type(name) is not str or type(value) is not str:  # noqa: E721
                    return None
                pairs.append((name, value))
            label_pairs = tuple(pairs)
            # one shared tuple per distinct label set (a handful per data center): what hashes it later (the
            # renderer's and the source check's caches) then reads a few objects in cache, not 7 scattered ones
            shared = _LABEL_SETS.get(label_pairs)
            if shared is None:
                if len(_LABEL_SETS) >= _LABEL_SETS_SIZE:
                    _LABEL_SETS.clear()
                shared = _LABEL_SETS[label_pairs] = label_pairs
            label_pairs = shared
        else:
            label_pairs = ()
        register = spec['registerDate']
        retire = spec['retireDate']
        if type(register) is not str or type(retire) is not str:  # noqa: E721
            return None
        cache = _TIME_CACHE
        register_date = cache.get(register)
        retire_date = cache.get(retire)
        if register_date is None or retire_date is None:
            try:
                register_date = _cached_time(register)
                retire_date = _cached_time(retire)
            except MachineError:
                return None
        bmc = get('bmc')
        if bmc is None:
            bmc_type = ''
        elif type(bmc) is dict and type(bmc.get('bmcType')) is str:  # noqa: E721
            bmc_type = bmc['bmcType']
        else:
            return None
        duration = status.get('duration')
        kind = type(duration)
        if kind is float or kind is int:
            duration = float(duration)
        elif duration is None:
            stamp = status.get('timestamp')
            if not stamp or now is None:
                duration = 0.0
            else:
                try:
                    duration = (now - parse_time(stamp)).total_seconds()
                except (MachineError, TypeError):
                    return None
        else:
            return None
        address = ipv4[0]
        return Machine(serial, address, rack, index_in_rack, role, label_pairs, register_date, retire_date,
                       bmc_type, state, duration, raw)
    except KeyError:
        return None  # a field absent: parse_machine decides (Go's zero value, or the error naming it)


def parse_machine(raw: Any, now: Optional[datetime] = None, index: Optional[int] = None) -> Machine:
    """Check and convert one `searchMachines` element; MachineError names the machine and the bad field."""
    if isinstance(raw, Machine):
        return raw
    fast = _parse_well_formed(raw, now)
    if fast is not None:
        return fast
    if not isinstance(raw, dict):
        if not isinstance(raw, Mapping):
            raise MachineError(_where(index), 'type', f'expected an object, got {type(raw).__name__}')
        raw = dict(raw)
    spec = raw.get('spec')
    status = raw.get('status')
    if not isinstance(spec, dict):
        raise MachineError(_where(index), 'required', 'missing object "spec"')
    if not isinstance(status, dict):
        raise MachineError(_where(index), 'required', 'missing object "status"')
    # Absent (or null) fields take Go's zero values, as CKE's JSON decoding gives them; present
    # fields of the wrong type are errors that name the machine (serial, else address) and the field.
    serial = spec.get('serial')
    if serial is None:
        serial = ''
    elif not isinstance(serial, str):
        raise MachineError(_where(index), 'type', f'spec.serial must be a string, got {serial!r}')
    ipv4 = spec.get('ipv4') or []
    if not isinstance(ipv4, list) or not all(isinstance(a, str) for a in ipv4):
        raise MachineError(_where(index, serial), 'type', f'spec.ipv4 must be a list of strings, got {ipv4!r}')
    address = ipv4[0] if ipv4 else None
    name = serial or address or ''
    role = spec.get('role')
    if role is None:
        role = ''
    elif not isinstance(role, str):
        raise MachineError(_where(index, name), 'type', f'spec.role must be a string, got {role!r}')
    labels = []
    for label in spec.get('labels') or ():
        if not isinstance(label, dict) or not isinstance(label.get('name'), str) or not isinstance(label.get('value', ''), str):
            raise MachineError(_where(index, name), 'type', f'spec.labels entries must be {{name, value}} strings, '
                               f'got {label!r}')
        labels.append((label['name'], label.get('value', '')))
    state = status.get('state')
    if state not in STATES:
        raise MachineError(_where(index, name), 'one-of', f'status.state {state!r} is not one of {", ".join(STATES)}')
    bmc = spec.get('bmc') or {}
    if not isinstance(bmc, dict):
        raise MachineError(_where(index, name), 'type', f'spec.bmc must be an object, got {bmc!r}')
    bmc_type = bmc.get('bmcType', bmc.get('type'))
    if bmc_type is None:
        bmc_type = ''
    elif not isinstance(bmc_type, str):
        raise MachineError(_where(index, name), 'type', f'spec.bmc.bmcType must be a string, got {bmc_type!r}')
    duration = status.get('duration')
    if duration is None:
        stamp = status.get('timestamp')
        duration = ((now - parse_time(stamp, f'{_where(index, name)}: status.timestamp')).total_seconds()
                    if stamp and now else 0.0)
    elif isinstance(duration, bool) or not isinstance(duration, (int, float)):
        raise MachineError(_where(index, name), 'type', f'status.duration must be a number of seconds, got {duration!r}')
    return Machine(
        serial=serial,
        address=address,
        rack=_int_field(spec, 'rack', index, name),
        index_in_rack=_int_field(spec, 'indexInRack', index, name),
        role=role,
        labels=tuple(labels),
        register_date=_date(spec, 'registerDate', index, name),
        retire_date=_date(spec, 'retireDate', index, name),
        bmc_type=bmc_type,
        state=state,
        duration=float(duration),
        raw=raw,
    )


def parse_machines(raws: Iterable[Any], now: Optional[datetime] = None) -> List[Machine]:
    """All machines, in input order; the first malformed one stops everything."""
    if raws is None:
        return []
    if isinstance(raws, (str, bytes)) or not isinstance(raws, Iterable):
        raise MachineError('machines', 'type', 'must be a list of sabakan machines')
    # the fast check first; parse_machine (which repeats it) only for what it sends on
    fast = _parse_well_formed
    machines = []
    append = machines.append
    for index, raw in enumerate(raws):
        machine = fast(raw, now)
        append(parse_machine(raw, now, index) if machine is None else machine)
    return machines


def machines_by_address(machines: Iterable[Machine]) -> Dict[str, Machine]:
    """Address → machine; machines without IPv4 cannot be nodes and are left out, as CKE does."""
    return {m.address: m for m in machines if m.address}
