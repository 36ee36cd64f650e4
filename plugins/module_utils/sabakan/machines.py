# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sabakan machines as the generator sees them.

Input is the JSON of sabakan's `searchMachines`; it is checked once here so the algorithm
below can trust every field and name the culprit when it cannot.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

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
    """RFC 3339 (or a datetime) to an aware datetime; naive values are taken as UTC."""
    if isinstance(value, datetime):
        result = value
    elif isinstance(value, str) and value:
        text = value.strip()
        if text[-1:] in ('Z', 'z'):
            text = text[:-1] + '+00:00'
        head, sep, tail = text.partition('.')
        if sep:
            # Python < 3.11 accepts only 3 or 6 fraction digits; Go writes up to 9.
            digits = ''.join(ch for ch in tail if ch.isdigit())
            text = head + '.' + (digits[:6].ljust(6, '0')) + tail[len(digits):]
        try:
            result = datetime.fromisoformat(text)
        except ValueError:
            raise MachineError(f'{where}: {value!r} is not an RFC 3339 date-time') from None
    else:
        raise MachineError(f'{where}: {value!r} is not an RFC 3339 date-time')
    if result.tzinfo is None:
        result = result.replace(tzinfo=timezone.utc)
    return result


def resolve_now(now: TimeLike) -> datetime:
    """The caller's clock (pure functions take `now`), or the wall clock when none is given."""
    return parse_time(now, 'now') if now is not None else datetime.now(timezone.utc)


def format_rfc3339(value: datetime) -> str:
    """Go's time.RFC3339 layout: whole seconds, `Z` for UTC, otherwise the numeric offset."""
    offset = value.utcoffset() or timedelta(0)
    base = value.strftime('%Y-%m-%dT%H:%M:%S')
    if offset == timedelta(0):
        return base + 'Z'
    minutes = int(offset.total_seconds()) // 60
    sign = '+' if minutes >= 0 else '-'
    minutes = abs(minutes)
    return f'{base}{sign}{minutes // 60:02d}:{minutes % 60:02d}'


def address_key(address: str) -> Tuple[int, int, str]:
    """Sort key that orders IP addresses numerically (the deterministic tie-breaker)."""
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


@dataclass(eq=False)
class Machine:
    """One sabakan machine; `address` is spec.ipv4[0], the node name CKE uses.

    Not frozen: a frozen dataclass costs twice as much to build, and 50,000 are built per run.
    Treat instances as read-only; identity is the address.
    """

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
    raw: Mapping[str, Any] = field(repr=False)
    sort_key: Tuple[int, int, str] = field(repr=False, default=(9, 0, ''))

    @property
    def healthy(self) -> bool:
        return self.state == HEALTHY

    def days_to_retire(self, now: datetime) -> int:
        """Whole days until retireDate, truncated toward zero like Go's int(hours / 24)."""
        return int((self.retire_date - now).total_seconds() / 3600 / 24)


def _int_field(spec: Mapping[str, Any], name: str, index: Optional[int], serial: str) -> int:
    value = spec.get(name)
    if type(value) is int:  # noqa: E721 fast path; bool must not pass
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip('-').isdigit():
            return int(value)
        raise MachineError(f'{_where(index, serial)}: spec.{name} must be an integer, got {value!r}')
    return value


def _where(index: Optional[int], serial: Any = None) -> str:
    where = 'machine' if index is None else f'machines[{index}]'
    return f'{where} {serial}' if serial else where


@functools.lru_cache(maxsize=4096)
def _cached_time(value: str) -> datetime:
    """Sabakan dates repeat a lot (machines are bought and retired in batches)."""
    return parse_time(value)


def _date(spec: Dict[str, Any], name: str, index: Optional[int], serial: str) -> datetime:
    value = spec.get(name)
    if isinstance(value, str):
        try:
            return _cached_time(value)
        except MachineError:
            pass
    return parse_time(value, f'{_where(index, serial)}: spec.{name}')


def parse_machine(raw: Any, now: Optional[datetime] = None, index: Optional[int] = None) -> Machine:
    """Check and convert one `searchMachines` element; MachineError names the machine and the bad field."""
    if isinstance(raw, Machine):
        return raw
    if not isinstance(raw, dict):
        if not isinstance(raw, Mapping):
            raise MachineError(f'{_where(index)}: expected an object, got {type(raw).__name__}')
        raw = dict(raw)
    spec = raw.get('spec')
    status = raw.get('status')
    if not isinstance(spec, dict):
        raise MachineError(f'{_where(index)}: missing object "spec"')
    if not isinstance(status, dict):
        raise MachineError(f'{_where(index)}: missing object "status"')
    serial = spec.get('serial')
    if not isinstance(serial, str) or not serial:
        raise MachineError(f'{_where(index)}: spec.serial must be a non-empty string')
    ipv4 = spec.get('ipv4') or []
    if not isinstance(ipv4, list) or any(type(a) is not str for a in ipv4):  # noqa: E721
        raise MachineError(f'{_where(index, serial)}: spec.ipv4 must be a list of strings')
    role = spec.get('role', '')
    if not isinstance(role, str):
        raise MachineError(f'{_where(index, serial)}: spec.role must be a string')
    labels = []
    for label in spec.get('labels') or ():
        if not isinstance(label, dict) or not isinstance(label.get('name'), str) or not isinstance(label.get('value', ''), str):
            raise MachineError(f'{_where(index, serial)}: spec.labels entries must be {{name, value}} strings, got {label!r}')
        labels.append((label['name'], label.get('value', '')))
    state = status.get('state')
    if state not in STATES:
        raise MachineError(f'{_where(index, serial)}: status.state {state!r} is not one of {", ".join(STATES)}')
    bmc = spec.get('bmc') or {}
    bmc_type = bmc.get('bmcType', bmc.get('type', '')) if isinstance(bmc, dict) else ''
    duration = status.get('duration')
    if duration is None:
        stamp = status.get('timestamp')
        duration = ((now - parse_time(stamp, f'{_where(index, serial)}: status.timestamp')).total_seconds()
                    if stamp and now else 0.0)
    elif isinstance(duration, bool) or not isinstance(duration, (int, float)):
        raise MachineError(f'{_where(index, serial)}: status.duration must be a number of seconds, got {duration!r}')
    address = ipv4[0] if ipv4 else None
    return Machine(
        serial=serial,
        address=address,
        rack=_int_field(spec, 'rack', index, serial),
        index_in_rack=_int_field(spec, 'indexInRack', index, serial),
        role=role,
        labels=tuple(labels),
        register_date=_date(spec, 'registerDate', index, serial),
        retire_date=_date(spec, 'retireDate', index, serial),
        bmc_type=bmc_type if isinstance(bmc_type, str) else str(bmc_type),
        state=state,
        duration=float(duration),
        raw=raw,
        sort_key=address_key(address or ''),
    )


def parse_machines(raws: Iterable[Any], now: Optional[datetime] = None) -> List[Machine]:
    """All machines, in input order; the first malformed one stops everything."""
    if raws is None:
        return []
    if isinstance(raws, (str, bytes)) or not isinstance(raws, Iterable):
        raise MachineError('machines must be a list of sabakan machines')
    return [parse_machine(raw, now, index) for index, raw in enumerate(raws)]


def machines_by_address(machines: Iterable[Machine]) -> Dict[str, Machine]:
    """Address → machine; machines without IPv4 cannot be nodes and are left out, as CKE does."""
    return {m.address: m for m in machines if m.address}
