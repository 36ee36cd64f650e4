# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Three of moto's lookups done by key instead of by scanning (lab/cloud/ec2_fidelity.py): same answers, linear time.

Found with cProfile over moto's server in the machines benchmark (bench/machines.py, 500 instances); the
figures are over HTTP without a profiler, the index on against off, interleaved:

* a resource's tags: moto 5.2 (`TaggedEC2Resource.get_tags`) runs `TagBackend.describe_tags` with a
  `resource-id` filter, a regular-expression match against every tag of every resource in the region. A
  DescribeInstances asks that for every instance, once per tag filter and once more to write the answer, so a
  listing is quadratic in the instances (at 500 instances: 1,000 scans of 6,000 tags, 1.6 s of 2.0 s). moto keeps
  the tags in a dict keyed by resource id (`TagBackend.tags`): reading that entry gives the very list the scan
  builds (the scan's pattern is the id itself, fnmatch-anchored; the entry's insertion order). An id with glob
  characters (none of EC2's) still goes the scanning way. Over HTTP at load 2: a filtered listing of 500
  instances 2.08 s -> 1.11 s, of 1,000 6.19 s -> 2.05 s; MCM's per-machine DescribeInstances (tag:Name) 0.51 s ->
  0.014 s at 500, 2.17 s -> 0.027 s at 1,000;
* an instance by id: `InstanceBackend.get_instance` (RunInstances with an instance profile, TerminateInstances,
  ModifyInstanceAttribute and more call it) copies every reservation and scans every instance. Here a map
  id -> (reservation, instance), trusted only while that reservation still holds that instance, rebuilt by one
  scan (no copies) on a miss; not found after the scan is moto's own error. TerminateInstances 6.8 -> 5.1 ms
  at 500 instances, 15.2 -> 9.8 ms at 2,000 (load 3-4); RunInstances within the noise (its other costs
  dominate);
* the backend of a request: moto's dispatcher (`DomainDispatcherApplication.get_backend_for_host`) lists moto's
  package directory and stats each entry (about 190 stats), then tries every service's URL patterns, for every
  request, under a process-wide lock: requests queued behind each other's file-system scans. The answer depends
  on the host name alone (the package and the patterns do not change while serving), so it is remembered per
  host. A trivial request 5.5 -> 4.3 ms; eight clients at once 222 -> 255 requests/s.

tests/integration/test_lab_ec2_fidelity.py runs one scenario with the index and without and compares every answer
(admin setting `moto_index`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

GLOB_CHARS = frozenset('*?[')
_ORIGINALS: Dict[str, Callable] = {}


def _tags_by_id(resource: Any) -> List[Dict[str, str]]:
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix
    resource_id = resource.id
    if not resource_id:
        return []
    if GLOB_CHARS.intersection(resource_id):
        return _ORIGINALS['get_tags'](resource)
    tags = resource.ec2_backend.tags.get(resource_id) or {}   # .get: the defaultdict must not grow an entry
    kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), '')
    return [{'resource_id': resource_id, 'key': key, 'value': value, 'resource_type': kind}
            for key, value in list(tags.items())]


def _instance_by_id(backend: Any, instance_id: str) -> Any:
    from moto.ec2.exceptions import InvalidInstanceIdError
    hit = backend.__dict__.get('_lab_instances', {}).get(instance_id)
    if hit is not None and backend.reservations.get(hit[0].id) is hit[0] and hit[1] in hit[0].instances:
        return hit[1]
    fresh: Dict[str, Any] = {}      # built whole, then swapped in: a concurrent request never sees it half done
    for reservation in list(backend.reservations.values()):
        for instance in list(reservation.instances):
            fresh.setdefault(instance.id, (reservation, instance))   # the first, as moto's scan finds it
    backend.__dict__['_lab_instances'] = fresh
    if instance_id in fresh:
        return fresh[instance_id][1]
    raise InvalidInstanceIdError(instance_id)


def _backend_for_host(dispatcher: Any, host: Optional[str]) -> Any:
    if host is None:
        return None
    known = dispatcher.__dict__.setdefault('_lab_backends', {})
    if host not in known:
        known[host] = _ORIGINALS['get_backend_for_host'](dispatcher, host)
    return known[host]


def _targets() -> Dict[str, Any]:
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.models.instances import InstanceBackend
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    return {'get_tags': (TaggedEC2Resource, _tags_by_id), 'get_instance': (InstanceBackend, _instance_by_id),
            'get_backend_for_host': (DomainDispatcherApplication, _backend_for_host)}


def use_index(on: bool) -> None:
    """The lookups by key (on) or moto's scans (off); process-wide, as moto's backends are."""
    for name, (owner, indexed) in _targets().items():
        _ORIGINALS.setdefault(name, getattr(owner, name))
        setattr(owner, name, indexed if on else _ORIGINALS[name])
