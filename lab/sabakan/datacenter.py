# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A synthetic sabakan data center: machines in racks, as sabakan's `searchMachines` returns them.

One pure, seeded function (`generate_datacenter`) feeds the lab's sabakan server, the tests and the
benchmarks, so all three see the same kind of inventory: boot servers in every rack, a mix of roles,
retire dates spread over every lifetime score bucket of CKE's generator (-1200 .. +1500 days around
`now`), and mostly HEALTHY machines with a few other states when asked.

Also holds the RFC 3339 helpers the lab server shares (sabakan's DateTime scalar is RFC 3339).
"""

from __future__ import annotations

import datetime
import random
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

MACHINE_STATES = ('UNINITIALIZED', 'HEALTHY', 'UNHEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING', 'RETIRED')
DEFAULT_PRODUCTS = ('R640', 'R6525', 'R7525')
DEFAULT_BMC_TYPES = ('IPMI-2.0', 'iDRAC-9')
# A machine's service life; register dates are this far before the retire date (clamped into the past).
LIFETIME_DAYS = (1500, 2200)
DAY = 86400.0

_RFC3339 = re.compile(r'^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$')

Now = Union[datetime.datetime, float, int]


def to_epoch(value: Now) -> float:
    """Seconds since the epoch from a datetime (naive means UTC) or a number."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError('expected a datetime or epoch seconds, got %r' % (value,))
    return float(value)


def format_rfc3339(epoch: float) -> str:
    """UTC, 'Z' suffix, fraction only when there is one (like Go's time.RFC3339Nano)."""
    whole = int(epoch // 1)
    micro = int(round((epoch - whole) * 1e6))
    if micro >= 1000000:
        whole, micro = whole + 1, 0
    text = datetime.datetime.fromtimestamp(whole, tz=datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S')
    if micro:
        text += ('.%06d' % micro).rstrip('0')
    return text + 'Z'


def parse_rfc3339(text: Any) -> float:
    """Epoch seconds from an RFC 3339 date-time; ValueError says what is wrong with it."""
    if not isinstance(text, str):
        raise ValueError('%r is not an RFC 3339 date-time string' % (text,))
    match = _RFC3339.match(text)
    if not match:
        raise ValueError('%r is not an RFC 3339 date-time (like 2024-01-31T12:00:00Z)' % text)
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7), match.group(8)
    if zone in ('Z', 'z'):
        tz = datetime.timezone.utc
    else:
        sign = -1 if zone[0] == '-' else 1
        tz = datetime.timezone(sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        moment = datetime.datetime(year, month, day, hour, minute, min(second, 59), tzinfo=tz)
    except ValueError as e:
        raise ValueError('%r is not a valid date-time: %s' % (text, e)) from e
    return moment.timestamp() + (float(fraction) if fraction else 0.0)


def _state_counts(states: Optional[Mapping[str, Union[int, float]]], eligible: int) -> Dict[str, int]:
    """Turn {state: count or fraction} into exact counts over `eligible` machines."""
    counts: Dict[str, int] = {}
    for state, amount in (states or {}).items():
        if state not in MACHINE_STATES:
            raise ValueError('states: %r is not a machine state (one of %s)' % (state, ', '.join(MACHINE_STATES)))
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ValueError('states[%s]: %r is neither a count nor a fraction' % (state, amount))
        if isinstance(amount, float):
            if amount > 1:
                raise ValueError('states[%s]: fraction %r is above 1' % (state, amount))
            counts[state] = int(round(amount * eligible))
        else:
            counts[state] = amount
    counts.pop('HEALTHY', None)  # HEALTHY is whatever is left
    if sum(counts.values()) > eligible:
        raise ValueError('states ask for %d non-HEALTHY machines but only %d non-boot machines exist'
                         % (sum(counts.values()), eligible))
    return counts


def _nic(address: str) -> Dict[str, Any]:
    prefix = address.rsplit('.', 1)[0]
    return {'address': address, 'netmask': '255.255.255.0', 'maskbits': 24, 'gateway': prefix + '.254'}


def generate_datacenter(racks: int, per_rack: int, *, seed: int, now: Now,
                        roles: Sequence[str] = ('cs', 'ss'), boot_per_rack: int = 1,
                        states: Optional[Mapping[str, Union[int, float]]] = None,
                        products: Sequence[str] = DEFAULT_PRODUCTS, bmc_types: Sequence[str] = DEFAULT_BMC_TYPES,
                        retire_days: Sequence[int] = (-1200, 1500), status_age_seconds: Optional[float] = None,
                        datacenter: str = 'dc1') -> List[Dict[str, Any]]:
    """Machines in the `searchMachines` shape (spec, status, info), rack by rack.

    * rack r (0-based) holds `per_rack` machines, index 1..per_rack; the first `boot_per_rack` are
      role "boot", the rest cycle through `roles` (shifted per rack so each role spreads over racks);
    * ipv4 is 10.<rack>.0.<index>, the BMC 10.<rack>.1.<index>; serials are unique seeded hex strings;
    * retireDate is now + a seeded number of days in `retire_days`; registerDate lies in the past;
    * states: {state: count} or {state: fraction of non-boot machines}; chosen machines are seeded,
      every other machine (and every boot server) is HEALTHY;
    * status.timestamp is now - `status_age_seconds` when given, else a seeded age of 1 h .. 30 days.
    Same arguments, same result.
    """
    if not 1 <= racks <= 255:
        raise ValueError('racks must be 1..255 (it is the second octet of 10.<rack>.0.<index>), got %r' % (racks,))
    if not 1 <= per_rack <= 253:
        raise ValueError('per_rack must be 1..253 (index .254 is the gateway), got %r' % (per_rack,))
    if not 0 <= boot_per_rack <= per_rack:
        raise ValueError('boot_per_rack must be 0..per_rack (%d), got %r' % (per_rack, boot_per_rack))
    if not roles or any(not isinstance(r, str) or not r for r in roles):
        raise ValueError('roles must be non-empty strings, got %r' % (roles,))
    if len(retire_days) != 2 or retire_days[0] > retire_days[1]:
        raise ValueError('retire_days must be (lowest, highest), got %r' % (retire_days,))
    base = float(int(to_epoch(now)))  # whole seconds, like sabakan's own dates
    rng = random.Random(seed)
    counts = _state_counts(states, racks * (per_rack - boot_per_rack))

    machines: List[Dict[str, Any]] = []
    serials = set()
    for rack in range(racks):
        for index in range(1, per_rack + 1):
            serial = '%08x' % rng.getrandbits(32)
            while serial in serials:
                serial = '%08x' % rng.getrandbits(32)
            serials.add(serial)
            boot = index <= boot_per_rack
            role = 'boot' if boot else roles[(index - boot_per_rack - 1 + rack) % len(roles)]
            retire = base + rng.randint(int(retire_days[0]), int(retire_days[1])) * DAY + rng.randint(0, 23) * 3600
            register = min(retire - rng.randint(*LIFETIME_DAYS) * DAY, base - DAY)
            age = status_age_seconds if status_age_seconds is not None else rng.randint(3600, 30 * 86400)
            address = '10.%d.0.%d' % (rack, index)
            bmc_address = '10.%d.1.%d' % (rack, index)
            machines.append({
                'spec': {
                    'serial': serial,
                    'labels': [{'name': 'datacenter', 'value': datacenter},
                               {'name': 'product', 'value': products[rng.randrange(len(products))]}],
                    'rack': rack,
                    'indexInRack': index,
                    'role': role,
                    'ipv4': [address],
                    'registerDate': format_rfc3339(register),
                    'retireDate': format_rfc3339(retire),
                    'bmc': {'bmcType': bmc_types[rng.randrange(len(bmc_types))], 'ipv4': bmc_address},
                },
                'status': {'state': 'HEALTHY', 'timestamp': format_rfc3339(base - float(age))},
                'info': {'network': {'ipv4': [_nic(address)]}, 'bmc': {'ipv4': _nic(bmc_address)}},
            })

    eligible = [m for m in machines if m['spec']['role'] != 'boot']
    chosen = rng.sample(eligible, sum(counts.values()))
    position = 0
    for state in sorted(counts, key=MACHINE_STATES.index):
        for machine in chosen[position:position + counts[state]]:
            machine['status']['state'] = state
        position += counts[state]
    return machines
